"""What a checkpoint holds besides the weights: the optimizer, the random-number generators, counters.

Tensors go to ``trainer.safetensors`` (Adam's moments, torch's RNG states), the rest to
``trainer.json`` (counters, optimizer scalars and groups, Python's and NumPy's RNG states); nothing
is pickled. :func:`restore` checks what it reads, so a damaged file is a CsanError naming it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from csan import checkpoint as ckpt
from csan.errors import CsanError

__all__ = ["capture", "restore"]


def capture(
    optimizer: torch.optim.Optimizer, counters: dict[str, Any]
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The (tensors, JSON metadata) of ``optimizer``, the RNGs and ``counters`` (step, epoch, ...)."""
    tensors, opt_meta = ckpt.optimizer_to_files(optimizer)
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    py_state = random.getstate()
    np_state = np.random.get_state()
    meta = {
        **counters,
        "optimizer": opt_meta,
        "rng_python": [py_state[0], list(py_state[1]), py_state[2]],
        "rng_numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
    }
    return tensors, meta


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def restore(folder: Path, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Load the optimizer and RNG states of checkpoint ``folder``; returns its trainer.json."""
    folder = Path(folder)
    tensors, meta = ckpt.load_trainer_state(folder)
    ckpt.check_trainer_state(folder, tensors, meta)
    try:
        ckpt.optimizer_from_files(optimizer, tensors, meta["optimizer"])
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CsanError(
            f"{folder / 'trainer.safetensors'}: the optimizer state does not fit the model "
            f"({_first_line(e)})"
        ) from None
    try:
        torch.set_rng_state(tensors["rng.torch"])
        if "rng.cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["rng.cuda"])
        py = meta["rng_python"]
        random.setstate((py[0], tuple(py[1]), py[2]))
        npst = meta["rng_numpy"]
        np.random.set_state((npst[0], np.array(npst[1], dtype=np.uint32), *npst[2:]))
    except (IndexError, TypeError, ValueError, RuntimeError, OverflowError) as e:
        raise CsanError(
            f"{folder / 'trainer.json'}: corrupted random-number state ({_first_line(e)})"
        ) from None
    return meta
