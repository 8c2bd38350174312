"""The end of a run: the final model folder, and its score on the test split."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from csan import checkpoint as ckpt
from csan.config import Config
from csan.data import EncodedSplit, SubwordModel
from csan.decoding.translate import translate_lines
from csan.errors import CsanError
from csan.evaluation.bleu import score

__all__ = ["evaluate_test", "write_final_model"]


def write_final_model(
    run_dir: Path,
    model_dir: Path,
    model: nn.Module,
    cfg: Config,
    spm_bytes: bytes,
    *,
    cooldown_step: int | None = None,
) -> str:
    """Write ``model_dir`` from the run's checkpoints; return how it was made.

    With ``train.average_last`` > 1: the average of the last N checkpoints, or of every checkpoint
    from ``cooldown_step`` on (the budget schedule's cooldown), computed in ``model`` (whose weights
    are restored afterwards). Otherwise a copy of the best (else the last) checkpoint.
    """
    n = cfg.train.average_last
    steps = ckpt.step_folders(run_dir)
    if n > 1 and len(steps) >= 2:
        chosen = steps[-n:]
        if cooldown_step is not None:  # schedule "budget": every checkpoint of the cooldown
            cooldown = [p for p in steps if int(p.name.split("_")[1]) >= cooldown_step]
            chosen = cooldown if len(cooldown) >= 2 else chosen
        saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
        ckpt.average_checkpoints(model, chosen)
        how = f"average of {len(chosen)} checkpoints ({', '.join(p.name for p in chosen)})"
        ckpt.write_folder_atomically(
            model_dir, lambda tmp: ckpt.save_model_dir(tmp, model, cfg, spm_bytes, made_from=how)
        )
        model.load_state_dict(saved)
        return how
    # not find_model_dir: it would pick an older model/ left by the run this one resumed
    source = ckpt.best_checkpoint(run_dir)
    if source is None:
        raise CsanError(f"{run_dir / 'checkpoints'}: no checkpoint to make the final model from")
    how = f"copy of {source.name}"
    loaded = ckpt.load_model_dir(source)
    ckpt.write_folder_atomically(
        model_dir,
        lambda tmp: ckpt.save_model_dir(tmp, loaded.model, cfg, loaded.spm_bytes, made_from=how),
    )
    return how


def evaluate_test(
    model_dir: Path, test: EncodedSplit, cfg: Config, run_dir: Path, *, device: torch.device
) -> dict[str, Any]:
    """Translate ``test`` with the model in ``model_dir`` (beam search), score it with sacreBLEU,
    and write ``<split>.hyp`` and ``<split>.json`` into ``run_dir``; return the record."""
    loaded = ckpt.load_model_dir(model_dir, device=device)
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
        device=device,
    )
    seconds = time.monotonic() - t0
    s = score(hyps, test.tgt_text)
    name = cfg.data.test_split
    (run_dir / f"{name}.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
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
    (run_dir / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
