"""``csan bench translate``: sentences per second of beam search on a test set with a trained model."""

from __future__ import annotations

import math
import time
from typing import Any

from csan.checkpoint import load_model_dir
from csan.data import SubwordModel
from csan.decoding.translate import translate_lines
from csan.evaluation.bleu import read_text

__all__ = ["run_translate_bench"]


def run_translate_bench(
    model_dir: str, src: str, *, beam: int = 4, repeats: int = 1
) -> dict[str, Any]:
    """Sentences per second of ``translate_lines`` (model loading timed separately)."""

    t0 = time.perf_counter()
    loaded = load_model_dir(model_dir)
    spm = SubwordModel.from_bytes(loaded.spm_bytes)
    load_s = time.perf_counter() - t0
    lines = read_text(src)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        translate_lines(
            loaded.model,
            spm,
            lines,
            beam=beam,
            lenpen=loaded.config.decode.lenpen,
            max_tokens=loaded.config.decode.max_tokens,
        )
        best = min(best, time.perf_counter() - t0)
    return {
        "model": str(model_dir),
        "input": src,
        "sentences": len(lines),
        "beam": beam,
        "load_seconds": round(load_s, 2),
        "translate_seconds": round(best, 2),
        "sentences_per_s": round(len(lines) / best, 1),
    }
