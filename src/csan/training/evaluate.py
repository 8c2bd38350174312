"""Validation during training, the final model folder, and the test-set score at the end."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from csan import checkpoint as ckpt
from csan.config import Config
from csan.data import collate
from csan.errors import CsanError

if TYPE_CHECKING:
    from csan.training.data import TrainingData
    from csan.training.trainer import Trainer

__all__ = ["evaluate_test", "teacher_forced_metrics", "validate", "write_final_model"]

log = logging.getLogger("csan")


@torch.no_grad()
def teacher_forced_metrics(model, split, *, device, max_tokens: int = 6000) -> dict[str, float]:
    """Validation loss (NLL, bits per token) and token accuracy with teacher forcing."""
    import math

    import torch.nn.functional as F

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
    nll = correct = tokens = 0.0
    start = 0
    while start < len(order):
        longest, end = 0, start
        while end < len(order):
            longest = max(longest, len(split.src[order[end]]) + 1, len(split.tgt[order[end]]) + 1)
            if (end - start + 1) * longest > max_tokens and end > start:
                break
            end += 1
        idx = order[start:end]
        start = end
        b = collate([(split.src[i], split.tgt[i]) for i in idx], idx).to(device)
        logits = model(b.src, b.tgt_in).float()
        mask = b.tgt_out.ne(model.pad_id)
        nll += F.cross_entropy(logits[mask], b.tgt_out[mask], reduction="sum").item()
        correct += logits[mask].argmax(-1).eq(b.tgt_out[mask]).sum().item()
        tokens += mask.sum().item()
    return {"loss": nll / max(tokens, 1) / math.log(2), "accuracy": correct / max(tokens, 1)}


def validate(model, data: TrainingData, cfg: Config, *, device) -> dict[str, float]:
    """Teacher-forced loss/accuracy, and greedy BLEU when ``train.valid_bleu``."""
    metrics = teacher_forced_metrics(model, data.valid, device=device)
    if cfg.train.valid_bleu:
        from csan.decoding.translate import translate_lines
        from csan.evaluation.bleu import score

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


def write_final_model(trainer: Trainer, model_dir: Path) -> None:
    """``model/``: the average of the last N checkpoints, else the best (else the last) weights."""
    cfg = trainer.cfg
    root = trainer.out / "checkpoints"
    n = cfg.train.average_last
    steps = ckpt.step_folders(trainer.out)
    if n > 1 and len(steps) >= 2:
        chosen = steps[-n:]
        if trainer.cooldown_step is not None:  # schedule "budget": every checkpoint of the cooldown
            cooldown = [p for p in steps if int(p.name.split("_")[1]) >= trainer.cooldown_step]
            chosen = cooldown if len(cooldown) >= 2 else chosen
        model = trainer.model
        saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
        ckpt.average_checkpoints(model, chosen)
        how = f"average of {len(chosen)} checkpoints ({', '.join(p.name for p in chosen)})"
        ckpt.write_folder_atomically(
            model_dir,
            lambda tmp: ckpt.save_model_dir(
                tmp, model, cfg, trainer.data.spm.to_bytes(), made_from=how
            ),
        )
        model.load_state_dict(saved)
    else:
        # not find_model_dir: it would pick an older model/ left by the run this one resumed
        source = ckpt.best_checkpoint(trainer.out)
        if source is None:
            raise CsanError(f"{root}: no checkpoint to make the final model from")
        how = f"copy of {source.name}"
        loaded = ckpt.load_model_dir(source)
        ckpt.write_folder_atomically(
            model_dir,
            lambda tmp: ckpt.save_model_dir(
                tmp, loaded.model, cfg, loaded.spm_bytes, made_from=how
            ),
        )
    trainer.say(f"final model: {model_dir} ({how})")


def evaluate_test(trainer: Trainer, model_dir: Path) -> dict[str, Any]:
    """Translate the test split with the final model (beam search) and print sacreBLEU."""
    import time

    from csan.data import SubwordModel
    from csan.decoding.translate import translate_lines
    from csan.evaluation.bleu import score

    cfg = trainer.cfg
    test = trainer.data.test
    if test is None:
        return {}
    loaded = ckpt.load_model_dir(model_dir, device=trainer.device)
    spm = SubwordModel.from_bytes(loaded.spm_bytes)
    dc = cfg.decode
    t0 = time.monotonic()
    hyps = translate_lines(
        loaded.model,
        spm,
        test.src_text,
        beam=dc.beam,
        lenpen=dc.lenpen,
        max_tokens=dc.max_tokens,
        max_len_a=dc.max_len_a,
        max_len_b=dc.max_len_b,
        device=trainer.device,
    )
    seconds = time.monotonic() - t0
    s = score(hyps, test.tgt_text)
    name = cfg.data.test_split
    (trainer.out / f"{name}.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    result = {
        "split": name,
        "bleu": s.bleu,
        "chrf": s.chrf,
        "signature": s.signature,
        "beam": dc.beam,
        "lenpen": dc.lenpen,
        "translate_seconds": round(seconds, 2),
        "sentences_per_s": round(len(hyps) / max(seconds, 1e-9), 2),
    }
    (trainer.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    trainer.say(f"{name} BLEU = {s.bleu:.2f}  chrF = {s.chrf:.2f}  ({s.signature})")
    return result
