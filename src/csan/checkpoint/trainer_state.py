"""What a checkpoint holds besides the weights: the optimizer, the random-number generators, counters.

Tensors go to ``trainer.safetensors`` (Adam's moments, torch's RNG states), the rest to
``trainer.json`` (counters, optimizer scalars and groups, Python's and NumPy's RNG states); nothing
is pickled. :func:`restore` checks what it reads, so a damaged file is a CsanError naming it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from csan.errors import CsanError

__all__ = [
    "TRAINER_META_TYPES",
    "capture",
    "check_trainer_state",
    "load_trainer_state",
    "optimizer_from_files",
    "optimizer_to_files",
    "restore",
    "save_trainer_state",
]


# -- optimizer state, without pickle ----------------------------------------------------------------
def optimizer_to_files(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer state dict into tensors (for safetensors) and JSON-able metadata.

    Example:
        >>> model = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.Adam(model.parameters())
        >>> model(torch.ones(1, 2)).sum().backward(); optimizer.step()
        >>> tensors, meta = optimizer_to_files(optimizer)
        >>> sorted(tensors)[:3], meta["param_groups"][0]["params"]
        (['state.0.exp_avg', 'state.0.exp_avg_sq', 'state.0.step'], [0, 1])
    """
    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, st in sd["state"].items():
        for key, value in st.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{idx}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[key] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def optimizer_from_files(optimizer: torch.optim.Optimizer, tensors: dict, meta: dict) -> None:
    """Load what :func:`optimizer_to_files` split back into ``optimizer`` (a ValueError when the
    state does not fit its parameters).

    Example:
        >>> model = torch.nn.Linear(2, 1)
        >>> old = torch.optim.Adam(model.parameters(), lr=0.1)
        >>> model(torch.ones(1, 2)).sum().backward(); old.step()
        >>> new = torch.optim.Adam(model.parameters(), lr=0.5)
        >>> optimizer_from_files(new, *optimizer_to_files(old))
        >>> moments = [o.state[model.bias]["exp_avg"] for o in (old, new)]
        >>> new.param_groups[0]["lr"], torch.equal(*moments)
        (0.1, True)
    """
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        if not name.startswith("state."):
            continue
        _, idx, key = name.split(".", 2)
        state.setdefault(int(idx), {})[key] = value
    for idx, values in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(values)
    groups = meta["param_groups"]
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    # load_state_dict checks the group sizes, not the shapes: a mismatch would fail at the next step
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for idx, values in state.items():
        if not 0 <= idx < len(params):
            raise ValueError(f"state for parameter {idx}, the model has {len(params)}")
        for key, value in values.items():
            shape = params[idx].shape
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != shape:
                raise ValueError(
                    f"{key} of parameter {idx} has shape {tuple(value.shape)}, "
                    f"the parameter {tuple(shape)}"
                )
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def save_trainer_state(
    folder: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]
) -> None:
    """Write ``tensors`` to ``folder/trainer.safetensors`` and ``meta`` to ``folder/trainer.json``.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     save_trainer_state(Path(tmp), {"rng.torch": torch.get_rng_state()}, {"step": 7})
        ...     sorted(p.name for p in Path(tmp).iterdir())
        ['trainer.json', 'trainer.safetensors']
    """
    save_file(tensors, str(folder / "trainer.safetensors"))
    (folder / "trainer.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


# trainer.json: the keys the trainer needs to resume, and their JSON types
TRAINER_META_TYPES: dict[str, type | tuple[type, ...]] = {
    "step": int,
    "epoch": int,
    "batch_in_epoch": int,
    "train_seconds": (int, float),
    "tokens_seen": int,
    "best": (dict, type(None)),
    "optimizer": dict,
    "rng_python": list,
    "rng_numpy": list,
}


def load_trainer_state(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read ``trainer.safetensors`` and ``trainer.json``; a damaged one is a CsanError naming it.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     save_trainer_state(Path(tmp), {"x": torch.arange(3)}, {"step": 7})
        ...     tensors, meta = load_trainer_state(tmp)
        ...     tensors["x"].tolist(), meta["step"]
        ([0, 1, 2], 7)
    """
    folder = Path(folder)
    path = folder / "trainer.safetensors"
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        raise CsanError(f"{path}: cannot read trainer state ({str(e).splitlines()[0]})") from None
    path = folder / "trainer.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CsanError(f"{path}: missing (a checkpoint to resume from has trainer.json)") from None
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CsanError(f"{path}: corrupted ({str(e).splitlines()[0]})") from None
    if not isinstance(meta, dict):
        raise CsanError(f"{path}: corrupted (expected a JSON object)")
    return tensors, meta


def check_trainer_state(folder: Path, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Check that what :func:`load_trainer_state` read is a whole trainer state (else CsanError).

    Example:
        >>> optimizer = torch.optim.Adam(torch.nn.Linear(2, 1).parameters())
        >>> counters = dict(step=9, epoch=1, batch_in_epoch=4, train_seconds=2.5, tokens_seen=640,
        ...                 best=None)
        >>> tensors, meta = capture(optimizer, counters)
        >>> check_trainer_state(Path("ckpt"), tensors, meta)  # whole: no error
        >>> check_trainer_state(Path("ckpt"), tensors, {**meta, "step": True})
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: ckpt/trainer.json: 'step' has a wrong type (bool)
    """
    folder = Path(folder)
    if "rng.torch" not in tensors:
        raise CsanError(
            f"{folder / 'trainer.safetensors'}: not a csan trainer state (no 'rng.torch' tensor)"
        )
    path = folder / "trainer.json"
    for key, types in TRAINER_META_TYPES.items():
        if key not in meta:
            raise CsanError(f"{path}: not a csan trainer state (no {key!r})")
        value = meta[key]
        if not isinstance(value, types) or isinstance(value, bool):  # JSON true is no number
            raise CsanError(f"{path}: {key!r} has a wrong type ({type(value).__name__})")


def capture(
    optimizer: torch.optim.Optimizer, counters: dict[str, Any]
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The (tensors, JSON metadata) of ``optimizer``, the RNGs and ``counters`` (step, epoch, ...).

    Example:
        >>> optimizer = torch.optim.Adam(torch.nn.Linear(2, 1).parameters())
        >>> tensors, meta = capture(optimizer, {"step": 3, "epoch": 1})
        >>> "rng.torch" in tensors, meta["step"], sorted(meta)
        (True, 3, ['epoch', 'optimizer', 'rng_numpy', 'rng_python', 'step'])
    """
    tensors, opt_meta = optimizer_to_files(optimizer)
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
    """Load the optimizer and RNG states of checkpoint ``folder``; returns its trainer.json.

    Example:
        >>> import tempfile
        >>> optimizer = torch.optim.Adam(torch.nn.Linear(2, 1).parameters())
        >>> counters = dict(step=9, epoch=1, batch_in_epoch=4, train_seconds=2.5, tokens_seen=640,
        ...                 best=None)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     save_trainer_state(Path(tmp), *capture(optimizer, counters))
        ...     drawn = torch.rand(3)
        ...     meta = restore(tmp, optimizer)  # the generators go back to where capture saw them
        ...     meta["step"], torch.equal(torch.rand(3), drawn)
        (9, True)
    """
    folder = Path(folder)
    tensors, meta = load_trainer_state(folder)
    check_trainer_state(folder, tensors, meta)
    try:
        optimizer_from_files(optimizer, tensors, meta["optimizer"])
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
