"""Writing files so that a reader never sees a part: atomic text files, folders renamed into place.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()) / "made"
    >>> write_folder_atomically(folder, lambda tmp: (tmp / "a.txt").write_text("a"))
    >>> [p.name for p in folder.iterdir()]
    ['a.txt']
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from csan.textio import atomic_write_text

__all__ = [
    "atomic_write_text",  # csan.textio's: every atomic text file is written the same way
    "remove_folder",
    "remove_stale_temporaries",
    "write_folder_atomically",
]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_folder_atomically(final: Path, fill: Callable[[Path], object]) -> None:
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


def remove_folder(path: Path) -> None:
    """Delete a folder so that no half-deleted copy is ever seen under its name.

    It is renamed to ``<name>.old-<pid>`` first (atomic), then removed; a kill in between leaves
    only a dotted name that :func:`step_folders` ignores and :func:`remove_stale_temporaries` removes.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     (Path(tmp) / "step_00000010" / "sub").mkdir(parents=True)
        ...     remove_folder(Path(tmp) / "step_00000010")
        ...     remove_folder(Path(tmp) / "step_00000010")  # gone already: nothing to do
        ...     os.listdir(tmp)
        []
    """
    path = Path(path)
    old = path.with_name(f"{path.name}.old-{os.getpid()}")
    try:
        os.replace(path, old)
    except FileNotFoundError:
        return
    shutil.rmtree(old, ignore_errors=True)


def remove_stale_temporaries(folder: Path, *, names: Sequence[str] | None = None) -> list[str]:
    """Remove ``*.tmp-<pid>`` and ``*.old-<pid>`` leftovers of a killed writer in ``folder``
    (only those of ``names``, e.g. ``("model",)`` for ``model.tmp-<pid>``, when given).

    Only call this while no other process writes there (the trainer holds the run's lock).
    Returns the names removed.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for name in ("model", "model.tmp-12", "step_00000010.old-7"):
        ...         (Path(tmp) / name).mkdir()
        ...     remove_stale_temporaries(tmp), os.listdir(tmp)
        (['model.tmp-12', 'step_00000010.old-7'], ['model'])
    """
    removed = []
    for p in sorted(Path(folder).glob("*")):
        base, dot, tag = p.name.rpartition(".")
        if not dot or not (tag.startswith("tmp-") or tag.startswith("old-")):
            continue
        if names is not None and base not in names:
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p.name)
    return removed
