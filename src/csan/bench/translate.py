"""``csan bench translate``: sentences per second of beam search on a test set with a trained model."""

from __future__ import annotations

import math
import time
from typing import Any

from csan.decoding.translator import Translator
from csan.textio import read_text_lines

__all__ = ["run_translate_bench"]


def run_translate_bench(
    model_dir: str, src: str, *, beam: int = 4, repeats: int = 1
) -> dict[str, Any]:
    """Sentences per second of a :class:`~csan.decoding.Translator` (model loading timed apart).

    Example (an untrained tiny model, greedy, on a 3-line file):
        >>> from pathlib import Path
        >>> import tempfile
        >>> from csan.toy import toy_model
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = toy_model(d)
        >>> _ = (d / "src.en").write_text("a dog runs .\\na dog .\\nruns .\\n")
        >>> row = run_translate_bench(str(d), str(d / "src.en"), beam=1, repeats=2)
        >>> row["sentences"], row["beam"], row["model"] == str(d), row["sentences_per_s"] > 0
        (3, 1, True, True)
        >>> row["translate_seconds"] >= 0, row["load_seconds"] >= 0
        (True, True)
    """

    t0 = time.perf_counter()
    translator = Translator.from_dir(model_dir)
    load_s = time.perf_counter() - t0
    lines = read_text_lines(src)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        translator.translate(lines, beam=beam)
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
