"""A run folder's checkpoints: ``checkpoints/step_NNNNNNNN/`` and the ``LAST`` / ``BEST`` pointers."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = [
    "CHECKPOINT_FILES",
    "best_checkpoint",
    "is_unplanned",
    "latest_checkpoint",
    "planned_step_folders",
    "pointer",
    "step_folders",
]


def pointer(ckpt_root: Path, name: str) -> Path | None:
    """The checkpoint folder the pointer file ``ckpt_root/name`` names, if it holds weights.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     root = Path(tmp)
        ...     (root / "step_00000010").mkdir()
        ...     _ = (root / "LAST").write_text("step_00000010")
        ...     pointer(root, "LAST") is None  # no weights in it yet
        ...     (root / "step_00000010" / "model.safetensors").touch()
        ...     pointer(root, "LAST").name, pointer(root, "BEST")
        True
        ('step_00000010', None)
    """
    path = ckpt_root / name
    if not path.is_file():
        return None
    try:
        target = ckpt_root / path.read_text(encoding="utf-8").strip()
    except (OSError, ValueError):  # unreadable or not text: as if absent
        return None
    return target if (target / "model.safetensors").is_file() else None


def best_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``BEST`` points to in a run folder, else the one ``LAST`` points to, if any.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     root = Path(tmp) / "checkpoints"
        ...     for name in ("step_00000010", "step_00000020"):
        ...         (root / name).mkdir(parents=True)
        ...         (root / name / "model.safetensors").touch()
        ...     _ = (root / "LAST").write_text("step_00000020")
        ...     best_checkpoint(tmp).name  # no BEST: the one LAST names
        ...     _ = (root / "BEST").write_text("step_00000010")
        ...     best_checkpoint(tmp).name
        'step_00000020'
        'step_00000010'
    """
    root = Path(run_dir) / "checkpoints"
    return pointer(root, "BEST") or pointer(root, "LAST")


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


def is_unplanned(folder: Path) -> bool:
    """Whether a checkpoint was written only to resume from: a signal's or the
    ``train.checkpoint_minutes`` timer's (``"unplanned": true`` in its ``trainer.json``).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()) / "step_00000010"
        >>> folder.mkdir()
        >>> is_unplanned(folder)  # no trainer.json: a model folder, planned
        False
        >>> _ = (folder / "trainer.json").write_text('{"step": 10, "unplanned": true}')
        >>> is_unplanned(folder)
        True
    """
    path = Path(folder) / "trainer.json"
    if not path.is_file():
        return False
    try:
        return bool(json.loads(path.read_text(encoding="utf-8")).get("unplanned", False))
    except (OSError, ValueError, AttributeError):  # unreadable, not JSON, or not an object
        return False


def planned_step_folders(run_dir: Path) -> list[Path]:
    """:func:`step_folders` without the checkpoints written only to resume from
    (:func:`is_unplanned`): the ones a run's final model, and ``csan average``, average.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> for step, unplanned in ((10, False), (13, True), (20, False)):
        ...     folder = run / "checkpoints" / f"step_{step:08d}"
        ...     folder.mkdir(parents=True)
        ...     _ = (folder / "trainer.json").write_text(json.dumps({"unplanned": unplanned}))
        >>> [p.name for p in planned_step_folders(run)]
        ['step_00000010', 'step_00000020']
    """
    return [p for p in step_folders(run_dir) if not is_unplanned(p)]


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
    last = pointer(Path(run_dir) / "checkpoints", "LAST")
    if last is not None:
        return last
    complete = [
        p for p in step_folders(run_dir) if all((p / f).is_file() for f in CHECKPOINT_FILES)
    ]
    return complete[-1] if complete else None
