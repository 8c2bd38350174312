"""What csan may write over: its own run and model folders, never a folder it did not write.

A *model folder* is csan's when it holds nothing but ``model.safetensors``, ``config.json`` (a csan
model config) and ``spm.model``. A *run folder* is csan's when everything in it is something
``csan train`` writes (``config.yaml``, ``metrics.jsonl``, ``results.json``, ``.lock``,
``checkpoints/``, a csan ``model/``, the test split's ``.hyp`` / ``.json``, the ``error.txt`` an
experiment grid leaves in the folder of a failed run (so the next call trains it again), and the
``*.tmp-N`` / ``*.old-N`` leftovers of an interrupted write) and it has a checkpoint, the lock or a
``config.yaml``. Anything else is the user's: refused with one line naming the path and what is in
it, unless the user passes ``--force``. A path that is a file where a folder is expected is always
refused.

Example:
    >>> import tempfile
    >>> notes = Path(tempfile.mkdtemp())
    >>> _ = (notes / "notes.txt").write_text("mine")
    >>> check_model_output(notes)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    csan.errors.CsanError: .../...: exists and is not a csan model folder (it holds notes.txt); ...
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from csan.errors import CsanError

__all__ = ["check_model_output", "check_run_output", "is_model_folder", "is_run_folder"]

MODEL_FILES = frozenset({"model.safetensors", "config.json", "spm.model"})
# error.txt: written by the experiment grids (compare, ablate, stn) into the folder of a run that failed
RUN_ENTRIES = frozenset(
    {"config.yaml", "metrics.jsonl", "results.json", ".lock", "checkpoints", "error.txt"}
)
_LEFTOVER = re.compile(r"^\.?.+\.(tmp|old)-\d+$")


def _foreign_in_model(folder: Path) -> str | None:
    """The first entry of ``folder`` that a csan model folder does not hold (None: all are)."""
    for entry in sorted(folder.iterdir()):
        if entry.name not in MODEL_FILES and not _LEFTOVER.match(entry.name):
            return entry.name
    config = folder / "config.json"
    if config.is_file():
        try:
            meta = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "config.json"
        if not isinstance(meta, dict) or meta.get("format") != "csan-model-1":
            return "config.json"
    return None


def is_model_folder(folder: Path) -> bool:
    """``folder`` is a (possibly empty) model folder csan wrote.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "config.json").write_text('{"format": "csan-model-1"}')
        ...     is_model_folder(tmp)
        ...     _ = (Path(tmp) / "notes.txt").write_text("mine")
        ...     is_model_folder(tmp)
        True
        False
    """
    folder = Path(folder)
    return folder.is_dir() and _foreign_in_model(folder) is None


def _foreign_in_run(folder: Path) -> str | None:
    for entry in sorted(folder.iterdir()):
        name = entry.name
        if name in RUN_ENTRIES or _LEFTOVER.match(name):
            continue
        if name == "model" and is_model_folder(entry):
            continue
        if entry.is_file() and entry.suffix in (".hyp", ".json"):
            continue  # the test split's translations and scores
        return name if name != "model" else f"model/{_foreign_in_model(entry) or ''}".rstrip("/")
    return None


def is_run_folder(folder: Path) -> bool:
    """``folder`` holds a run csan wrote (see the module docstring).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     is_run_folder(tmp)  # empty: no checkpoints, lock or config.yaml
        ...     (Path(tmp) / "checkpoints").mkdir()
        ...     is_run_folder(tmp)
        False
        True
    """
    folder = Path(folder)
    if not folder.is_dir() or _foreign_in_run(folder) is not None:
        return False
    return any((folder / name).exists() for name in ("checkpoints", ".lock", "config.yaml"))


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and next(path.iterdir(), None) is None


def check_run_output(out: Path, *, force: bool = False) -> None:
    """Refuse ``csan train --out`` on a file, or on a folder that is neither empty nor a csan run
    (unless ``force``).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:  # doctest: +ELLIPSIS
        ...     check_run_output(Path(tmp) / "new")  # a new folder: fine
        ...     _ = (Path(tmp) / "notes.txt").write_text("mine")
        ...     check_run_output(tmp, force=True)  # the user's folder, but forced
        ...     check_run_output(tmp)
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: ...: exists and is not a csan run folder (it holds notes.txt); ...
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CsanError(f"{out}: is a file, expected a run folder (a new or an existing csan run)")
    if not out.exists() or _is_empty_dir(out) or force or is_run_folder(out):
        return
    foreign = _foreign_in_run(out)
    holds = f"it holds {foreign}" if foreign else "no csan checkpoint, lock or config.yaml"
    raise CsanError(
        f"{out}: exists and is not a csan run folder ({holds}); choose a new folder, or pass "
        "--force to train into it (csan's own file names in it are overwritten)"
    )


def check_model_output(out: Path, *, force: bool = False, protect: Path | None = None) -> None:
    """Refuse a model-folder output (``csan average --out``) on a file, inside or over the run
    ``protect``, or on a folder that is neither empty nor a csan model folder (unless ``force``).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:  # doctest: +ELLIPSIS
        ...     run = Path(tmp) / "run"
        ...     check_model_output(run / "averaged")  # a new folder: fine
        ...     check_model_output(run / "model", protect=run)
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: .../run/model: would overwrite the run .../run it is made from
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CsanError(f"{out}: is a file, expected a model folder")
    if protect is not None:
        a, b = out.resolve(), Path(protect).resolve()
        if a == b or b in a.parents or a in b.parents:
            raise CsanError(f"{out}: would overwrite the run {protect} it is made from")
    if not out.exists() or _is_empty_dir(out) or force or is_model_folder(out):
        return
    raise CsanError(
        f"{out}: exists and is not a csan model folder (it holds {_foreign_in_model(out)}); "
        "choose a new folder, or pass --force to replace it"
    )
