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
    "check_trainer_state",
    "find_model_dir",
    "latest_checkpoint",
    "load_model_dir",
    "load_trainer_state",
    "remove_folder",
    "remove_stale_temporaries",
    "save_model_dir",
    "save_trainer_state",
    "step_folders",
    "write_folder_atomically",
]

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``.

    Readers see the old file or the new one, never a part; a failed write leaves the old file.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "LAST"
        >>> atomic_write_text(path, "step_00000010\\n")
        >>> path.read_text()
        'step_00000010\\n'
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves the old file, and nothing else
        raise


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
    """Create ``final`` by calling ``fill(tmp_dir)`` on a temporary sibling, then renaming it.

    Example:
        >>> import tempfile
        >>> final = Path(tempfile.mkdtemp()) / "step_00000001"
        >>> write_folder_atomically(final, lambda tmp: (tmp / "a.txt").write_text("a"))
        >>> sorted(p.name for p in final.iterdir())
        ['a.txt']
    """
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
    """Fill ``folder`` (which must exist) with a self-contained model: weights, config, subwords.

    Weights go to ``model.safetensors`` (never a pickle), the config and ``meta`` to ``config.json``,
    the SentencePiece model to ``spm.model``; :func:`load_model_dir` reads it back.

    Example:
        >>> import tempfile
        >>> from csan.config import load_config
        >>> from csan.data import SubwordModel
        >>> from csan.models import build_model
        >>> spm = SubwordModel.train(["a dog runs .", "ein Hund läuft ."] * 20, vocab_size=300)
        >>> cfg = load_config("tiny")
        >>> folder = Path(tempfile.mkdtemp())
        >>> save_model_dir(folder, build_model(cfg.model, len(spm)), cfg, spm.to_bytes(), step=0)
        >>> sorted(p.name for p in folder.iterdir())
        ['config.json', 'model.safetensors', 'spm.model']
        >>> load_model_dir(folder).meta["step"]
        0
    """
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
    """Resolve ``--model PATH``: a model folder, a run folder (its ``model/``, else best, else last).

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> (run / "model").mkdir(); (run / "model" / "model.safetensors").touch()
        >>> find_model_dir(run) == run / "model"
        True
    """
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
    try:
        target = ckpt_root / pointer.read_text(encoding="utf-8").strip()
    except (OSError, ValueError):  # unreadable or not text: as if absent
        return None
    return target if (target / "model.safetensors").is_file() else None


def best_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``BEST`` points to in a run folder, else the one ``LAST`` points to, if any."""
    root = Path(run_dir) / "checkpoints"
    return _pointer(root, "BEST") or _pointer(root, "LAST")


CHECKPOINT_FILES = (
    "model.safetensors",
    "config.json",
    "spm.model",
    "trainer.safetensors",
    "trainer.json",
)
"""What a training checkpoint folder ``checkpoints/step_NNNNNNNN`` holds."""


def step_folders(run_dir: Path) -> list[Path]:
    """The ``checkpoints/step_*`` folders of a run, oldest first (temporary folders excluded).

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> for name in ("step_00000020", "step_00000010", "step_00000030.tmp-1"):
        ...     (run / "checkpoints" / name).mkdir(parents=True)
        >>> [p.name for p in step_folders(run)]
        ['step_00000010', 'step_00000020']
    """
    root = Path(run_dir) / "checkpoints"
    return sorted(p for p in root.glob("step_*") if p.is_dir() and "." not in p.name)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint to resume from: the one ``LAST`` points to, else the newest complete one.

    ``LAST`` is written right after its folder is renamed into place, so a run killed between the
    two has a complete folder that ``LAST`` does not name yet; one whose ``LAST`` was lost (or
    names a folder that was deleted) resumes from its newest complete ``step_*`` folder too.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> latest_checkpoint(run) is None  # a fresh run
        True
        >>> for name in ("step_00000010", "step_00000020"):
        ...     (run / "checkpoints" / name).mkdir(parents=True)
        ...     for f in CHECKPOINT_FILES:
        ...         (run / "checkpoints" / name / f).touch()
        >>> latest_checkpoint(run).name  # no LAST pointer: the newest complete folder
        'step_00000020'
    """
    last = _pointer(Path(run_dir) / "checkpoints", "LAST")
    if last is not None:
        return last
    complete = [
        p for p in step_folders(run_dir) if all((p / f).is_file() for f in CHECKPOINT_FILES)
    ]
    return complete[-1] if complete else None


def remove_folder(path: Path) -> None:
    """Delete a folder so that no half-deleted copy is ever seen under its name.

    It is renamed to ``<name>.old-<pid>`` first (atomic), then removed; a kill in between leaves
    only a dotted name that :func:`step_folders` ignores and :func:`remove_stale_temporaries` removes.
    """
    path = Path(path)
    old = path.with_name(f"{path.name}.old-{os.getpid()}")
    try:
        os.replace(path, old)
    except FileNotFoundError:
        return
    shutil.rmtree(old, ignore_errors=True)


def remove_stale_temporaries(folder: Path) -> list[str]:
    """Remove ``*.tmp-<pid>`` and ``*.old-<pid>`` leftovers of a killed writer in ``folder``.

    Only call this while no other process writes there (the trainer holds the run's lock).
    Returns the names removed.
    """
    removed = []
    for p in sorted(Path(folder).glob("*")):
        _, dot, tag = p.name.rpartition(".")
        if not dot or not (tag.startswith("tmp-") or tag.startswith("old-")):
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p.name)
    return removed


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
        lines = str(e).splitlines() or [type(e).__name__]
        mismatch = next((line.strip() for line in lines if "size mismatch" in line), None)
        if mismatch:  # "size mismatch for NAME: copying a param with shape ..."
            raise CsanError(f"{path}: weights do not fit the model ({mismatch})") from None
        raise CsanError(f"{path}: cannot read weights ({lines[0]})") from None
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
    """Read ``trainer.safetensors`` and ``trainer.json``; a damaged one is a CsanError naming it."""
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
    """Check that what :func:`load_trainer_state` read is a whole trainer state (else CsanError)."""
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
