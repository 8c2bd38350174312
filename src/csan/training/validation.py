"""Validation during training: teacher-forced loss and accuracy, and greedy BLEU when asked."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from csan.config import Config
from csan.data import collate, cut_batches
from csan.decoding.translate import translate_lines
from csan.evaluation.bleu import score
from csan.training.data import TrainingData
from csan.training.loss import output_logits

__all__ = ["teacher_forced_metrics", "validate"]


@torch.no_grad()
def teacher_forced_metrics(model, split, *, device, max_tokens: int = 6000) -> dict[str, float]:
    """Validation loss (NLL, bits per token) and token accuracy with teacher forcing.

    Example (a model with every weight zero gives all 1000 pieces the same probability, so each
    target token costs log2(1000) bits; the pair with an empty side is left out):
        >>> from csan.config import load_config
        >>> from csan.data import EncodedSplit
        >>> from csan.models import build_model
        >>> model = build_model(load_config("tiny").model, 1000).eval()
        >>> with torch.no_grad():
        ...     for p in model.parameters():
        ...         _ = p.zero_()
        >>> split = EncodedSplit([[5, 6, 7], [8, 9], []], [[10, 11], [12, 13, 14], [15]],
        ...                      ["", "", ""], ["", "", ""])
        >>> metrics = teacher_forced_metrics(model, split, device="cpu")
        >>> round(metrics["loss"], 4), round(math.log2(1000), 4), metrics["accuracy"]
        (9.9658, 9.9658, 0.0)
    """
    order = sorted(range(len(split)), key=lambda i: (len(split.tgt[i]), len(split.src[i])))
    # pairs the model cannot take (an empty side, or longer than max_positions) are left out one by
    # one, so that one long sentence does not drop its whole batch
    max_pos = getattr(model, "max_positions", None) or float("inf")
    order = [
        i
        for i in order
        if split.src[i]
        and split.tgt[i]
        and len(split.src[i]) + 1 <= max_pos
        and len(split.tgt[i]) + 1 <= max_pos
    ]
    widths = [max(len(split.src[i]), len(split.tgt[i])) + 1 for i in range(len(split))]
    nll = correct = tokens = 0.0
    for idx in cut_batches(order, widths, max_tokens):
        b = collate([(split.src[i], split.tgt[i]) for i in idx], idx).to(device)
        logits, target = output_logits(model, model.encode(b.src), b.tgt_in, b.tgt_out)
        logits = logits.float()  # over the output vocabulary, as the training loss
        nll += F.cross_entropy(logits, target, reduction="sum").item()
        correct += logits.argmax(-1).eq(target).sum().item()
        tokens += target.numel()
    return {"loss": nll / max(tokens, 1) / math.log(2), "accuracy": correct / max(tokens, 1)}


def validate(model, data: TrainingData, cfg: Config, *, device) -> dict[str, float]:
    """Teacher-forced loss/accuracy, and greedy BLEU when ``train.valid_bleu``.

    Example (a model with every weight zero: each target token costs log2(300) bits):
        >>> import os
        >>> from pathlib import Path
        >>> from unittest import mock
        >>> from csan.config import load_config
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus(splits=("train", "valid"))
        >>> from csan.models import build_model
        >>> from csan.training.data import load_training_data
        >>> cfg = load_config("tiny", [f"data.data_dir={d}", "data.vocab_size=300",
        ...                            "train.valid_bleu=true"])
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     data = load_training_data(cfg)
        >>> model = build_model(cfg.model, len(data.spm)).eval()
        >>> with torch.no_grad():
        ...     for p in model.parameters():
        ...         _ = p.zero_()
        >>> metrics = validate(model, data, cfg, device="cpu")
        >>> sorted(metrics), round(metrics["loss"], 4), round(math.log2(300), 4)
        (['accuracy', 'bleu', 'loss'], 8.2288, 8.2288)
        >>> metrics["accuracy"], metrics["bleu"]
        (0.0, 0.0)
    """
    metrics = teacher_forced_metrics(model, data.valid, device=device)
    if cfg.train.valid_bleu:
        hyps = translate_lines(
            model,
            data.spm,
            data.valid.src_text,
            beam=1,
            lenpen=0.0,
            max_tokens=cfg.decode.max_tokens,
            max_len_a=cfg.decode.max_len_a,
            max_len_b=cfg.decode.max_len_b,
            device=device,
        )
        metrics["bleu"] = score(hyps, data.valid.tgt_text).bleu
    return metrics
