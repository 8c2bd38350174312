"""Bit-for-bit comparison of two checkpoints: what a resumed run must share with an uninterrupted one."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

TIMINGS = {"train_seconds", "wall_seconds"}  # the clock differs between processes, nothing else


def assert_same_training_state(a: Path, b: Path) -> None:
    """``torch.equal`` on every weight and every tensor of the trainer state (Adam's moments and
    step counts, torch's RNG state); the trainer's JSON (counters, optimizer groups, Python's and
    NumPy's RNG states, best validation) equal but for the timings."""
    for name in ("model.safetensors", "trainer.safetensors"):
        ta, tb = load_file(str(a / name)), load_file(str(b / name))
        assert ta.keys() == tb.keys(), name
        unequal = [k for k in ta if not torch.equal(ta[k], tb[k])]
        assert not unequal, f"{name}: {len(unequal)} tensors differ, first {unequal[0]}"
    ja, jb = (json.loads((p / "trainer.json").read_text()) for p in (a, b))
    assert {k: v for k, v in ja.items() if k not in TIMINGS} == {
        k: v for k, v in jb.items() if k not in TIMINGS
    }
