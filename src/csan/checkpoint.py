"""Safe, atomic checkpoints: weights in safetensors, everything else in JSON or SentencePiece's format.

Nothing here unpickles: model and optimizer tensors are read with safetensors, metadata with ``json``.
A folder is written aside (``<name>.tmp-<pid>``) and renamed into place, so a checkpoint on disk is
always complete; the ``LAST``/``BEST`` pointer files are replaced atomically.

A *model folder* (what ``csan translate --model`` reads) holds ``model.safetensors``, ``config.json``
and ``spm.model``. A run folder holds ``model/`` (the final model) and ``checkpoints/step_NNNNNNNN/``
(model folder + ``trainer.safetensors`` + ``trainer.json`` for resuming).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from csan.config import Config, config_from_dict
from csan.errors import CsanError

__all__ = [
    "LoadedModel",
    "atomic_write_text",
    "best_checkpoint",
    "find_model_dir",
    "latest_checkpoint",
    "load_model_dir",
    "save_model_dir",
]

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_folder_atomically(final: Path, fill) -> None:
    """Create ``final`` by calling ``fill(tmp_dir)`` on a temporary sibling, then renaming it."""
    final = Path(final)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        for p in tmp.iterdir():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # no half-written folder is left behind
        raise
    if final.exists():
        old = final.with_name(f"{final.name}.old-{os.getpid()}")
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)
    _fsync_dir(final.parent)


def save_model_dir(
    folder: Path, model: nn.Module, cfg: Config, spm_bytes: bytes, **meta: Any
) -> None:
    """Fill ``folder`` (which must exist) with a self-contained model: weights, config, subwords."""
    folder = Path(folder)
    save_model(model, str(folder / "model.safetensors"))
    info = {
        "format": "csan-model-1",
        "config": cfg.to_dict(),
        "vocab_size": model.vocab_size,
        **meta,
    }
    (folder / "config.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    (folder / "spm.model").write_bytes(spm_bytes)


@dataclass
class LoadedModel:
    """A model read back from a model folder, with what it needs to translate."""

    model: nn.Module
    config: Config
    spm_bytes: bytes
    folder: Path
    meta: dict[str, Any]


def find_model_dir(path: Path) -> Path:
    """Resolve ``--model PATH``: a model folder, a run folder (its ``model/``, else best, else last)."""
    path = Path(path)
    if not path.exists():
        raise CsanError(f"{path}: no such model folder")
    if (path / "model.safetensors").is_file():
        return path
    if (path / "model" / "model.safetensors").is_file():
        return path / "model"
    for pointer in ("BEST", "LAST"):
        ckpt = _pointer(path / "checkpoints", pointer)
        if ckpt is not None:
            return ckpt
    pickles = (
        sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if path.is_dir()
        else []
    )
    if pickles:
        raise CsanError(
            f"{path / pickles[0]}: pickle checkpoints are never loaded (unpickling runs code); "
            "csan reads model.safetensors"
        )
    raise CsanError(f"{path}: no model.safetensors here, nor a csan run folder")


def _pointer(ckpt_root: Path, name: str) -> Path | None:
    pointer = ckpt_root / name
    if not pointer.is_file():
        return None
    target = ckpt_root / pointer.read_text(encoding="utf-8").strip()
    return target if (target / "model.safetensors").is_file() else None


def best_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``BEST`` points to in a run folder, else the one ``LAST`` points to, if any."""
    root = Path(run_dir) / "checkpoints"
    return _pointer(root, "BEST") or _pointer(root, "LAST")


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``LAST`` points to in a run folder, if any."""
    return _pointer(Path(run_dir) / "checkpoints", "LAST")


def read_model_meta(folder: Path) -> dict[str, Any]:
    path = Path(folder) / "config.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CsanError(f"{path}: missing (a csan model folder has config.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CsanError(f"{path}: corrupted ({e})") from None
    if not isinstance(meta, dict) or "config" not in meta or "vocab_size" not in meta:
        raise CsanError(f"{path}: not a csan model config")
    return meta


def load_weights(model: nn.Module, path: Path) -> None:
    """Load safetensors weights into ``model``; a bad file is a :class:`CsanError` naming it."""
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        raise CsanError(f"{path}: cannot read weights ({str(e).splitlines()[0]})") from None
    if missing or unexpected:
        # safetensors returns sets of names (lists in older versions)
        names = sorted(missing) if missing else sorted(unexpected)
        what = f"{'missing' if missing else 'unexpected'} {names[:3]}"
        raise CsanError(f"{path}: weights do not fit the model in config.json ({what})")


def load_model_dir(path: Path, *, device: str | torch.device = "cpu") -> LoadedModel:
    """Load a model folder (or run folder) for decoding, in eval mode.

    Example:
        >>> load_model_dir("/nonexistent")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        csan.errors.CsanError: /nonexistent: no such model folder
    """
    from csan.models import build_model

    folder = find_model_dir(Path(path))
    meta = read_model_meta(folder)
    cfg = config_from_dict(meta["config"])
    model = build_model(cfg.model, int(meta["vocab_size"]))
    load_weights(model, folder / "model.safetensors")
    spm_path = folder / "spm.model"
    if not spm_path.is_file():
        raise CsanError(f"{spm_path}: missing (the subword model travels with the weights)")
    model.to(device).eval()
    return LoadedModel(model, cfg, spm_path.read_bytes(), folder, meta)


# -- optimizer state, without pickle ----------------------------------------------------------------
def optimizer_to_files(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer state dict into tensors (for safetensors) and JSON-able metadata."""
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
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def save_trainer_state(
    folder: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]
) -> None:
    save_file(tensors, str(folder / "trainer.safetensors"))
    (folder / "trainer.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


def load_trainer_state(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    path = folder / "trainer.safetensors"
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        raise CsanError(f"{path}: cannot read trainer state ({str(e).splitlines()[0]})") from None
    try:
        meta = json.loads((folder / "trainer.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise CsanError(f"{folder / 'trainer.json'}: cannot read ({e})") from None
    return tensors, meta


def average_checkpoints(model: nn.Module, folders: list[Path]) -> None:
    """Load into ``model`` the element-wise mean of the weights in ``folders``."""
    if not folders:
        raise CsanError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    for folder in folders:
        load_weights(model, folder / "model.safetensors")
        for name, p in model.state_dict(keep_vars=False).items():
            if p.is_floating_point():
                total[name] = total.get(name, 0) + p.detach().double()
    with torch.no_grad():
        sd = model.state_dict()
        for name, acc in total.items():
            sd[name].copy_((acc / len(folders)).to(sd[name].dtype))
