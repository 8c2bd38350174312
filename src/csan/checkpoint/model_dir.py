"""Model folders: ``model.safetensors``, ``config.json`` and ``spm.model``, what ``--model`` reads.

Nothing here builds a model (that is ``csan.decoding.load_model``, above the models): these
functions write, find, read and average the files. Nothing is unpickled.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from csan.checkpoint.files import write_folder_atomically
from csan.checkpoint.run_dir import pointer
from csan.config import Config
from csan.errors import CsanError

__all__ = [
    "PICKLE_SUFFIXES",
    "average_model_dirs",
    "find_model_dir",
    "load_weights",
    "read_model_meta",
    "read_spm",
    "save_model_dir",
]


PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")


def save_model_dir(
    folder: Path, model: nn.Module, cfg: Config, spm_bytes: bytes, **meta: Any
) -> None:
    """Fill ``folder`` (which must exist) with a self-contained model: weights, config, subwords.

    Weights go to ``model.safetensors`` (never a pickle), the config and ``meta`` to ``config.json``,
    the SentencePiece model to ``spm.model``; ``csan.decoding.load_model`` reads it back.

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
        >>> read_model_meta(folder)["step"]
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
    for name in ("BEST", "LAST"):
        named = pointer(path / "checkpoints", name)
        if named is not None:
            return named
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


def read_model_meta(folder: Path) -> dict[str, Any]:
    """The ``config.json`` of a model folder; a missing, damaged or foreign one is a CsanError.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "config.json").write_text('{"config": {}, "vocab_size": 300}')
        ...     read_model_meta(tmp)["vocab_size"]
        300
        >>> read_model_meta("no-such-folder")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: no-such-folder/config.json: missing (...)
    """
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
    """Load safetensors weights into ``model``; a bad file is a :class:`CsanError` naming it.

    Example:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = Path(tmp.name) / "w.safetensors"
        >>> source, target = nn.Linear(2, 3), nn.Linear(2, 3)
        >>> save_model(source, str(path)); load_weights(target, path)
        >>> torch.equal(target.weight, source.weight)
        True
        >>> load_weights(nn.Linear(3, 3), path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: .../w.safetensors: weights do not fit the model (size mismatch ...)
        >>> tmp.cleanup()
    """
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


def read_spm(folder: Path) -> bytes:
    """The subword model of a model folder (``spm.model``); its absence is a CsanError.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "spm.model").write_bytes(b"subwords")
        ...     read_spm(tmp)
        b'subwords'
    """
    path = Path(folder) / "spm.model"
    if not path.is_file():
        raise CsanError(f"{path}: missing (the subword model travels with the weights)")
    return path.read_bytes()


def _read_weights(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        return load_file(str(path)), metadata
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        lines = str(e).splitlines() or [type(e).__name__]
        raise CsanError(f"{path}: cannot read weights ({lines[0]})") from None


def average_model_dirs(folders: Sequence[Path], out: Path, *, made_from: str) -> None:
    """Write the model folder ``out`` (atomically): the element-wise mean of the weights in
    ``folders`` (float64 sums, stored in each tensor's dtype), with the config and subword model of
    the last folder. One folder makes a copy. The one averaging routine, for ``csan average`` and
    for the end of a run.

    Example:
        >>> import tempfile
        >>> from csan.config import load_config
        >>> from csan.data import SubwordModel
        >>> from csan.models import build_model
        >>> spm = SubwordModel.train(["a dog runs .", "ein Hund läuft ."] * 20, vocab_size=300)
        >>> cfg, root = load_config("tiny"), Path(tempfile.mkdtemp())
        >>> for step in (1, 2):
        ...     model = build_model(cfg.model, len(spm))
        ...     _ = [p.data.fill_(step) for p in model.parameters()]
        ...     (root / f"s{step}").mkdir()
        ...     save_model_dir(root / f"s{step}", model, cfg, spm.to_bytes(), step=step)
        >>> average_model_dirs([root / "s1", root / "s2"], root / "avg", made_from="mean")
        >>> weights = load_file(str(root / "avg" / "model.safetensors"))
        >>> sorted({v for t in weights.values() if t.is_floating_point() for v in t.unique().tolist()})
        [1.5]
    """
    if not folders:
        raise CsanError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    for folder in folders:
        weights, metadata = _read_weights(Path(folder) / "model.safetensors")
        if total and set(weights) != set(total):
            raise CsanError(f"{folder}: its weights do not match those of {folders[0]}")
        for name, tensor in weights.items():
            if tensor.is_floating_point():
                total[name] = total.get(name, 0) + tensor.double()
            else:
                total[name] = tensor  # integer buffers: the last folder's
    averaged = {
        name: (acc / len(folders)).to(weights[name].dtype)
        if weights[name].is_floating_point()
        else acc
        for name, acc in total.items()
    }
    last = Path(folders[-1])
    meta = read_model_meta(last)
    info = {key: meta[key] for key in ("format", "config", "vocab_size") if key in meta}
    spm_bytes = read_spm(last)

    def fill(tmp: Path) -> None:
        save_file(averaged, str(tmp / "model.safetensors"), metadata=metadata or None)
        info["made_from"] = made_from
        (tmp / "config.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
        (tmp / "spm.model").write_bytes(spm_bytes)

    write_folder_atomically(Path(out), fill)
