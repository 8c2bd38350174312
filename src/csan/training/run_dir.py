"""A training run's checkpoints on disk: written whole, pointed at, pruned.

``checkpoints/step_NNNNNNNN/`` holds a model folder plus the trainer state; ``LAST`` names the
newest, ``BEST`` the best by validation. A folder is written aside and renamed into place before
``LAST`` moves (:func:`csan.checkpoint.write_folder_atomically`), so a kill at any moment leaves a
complete checkpoint to resume from.

Example:
    >>> import tempfile
    >>> run = RunCheckpoints(Path(tempfile.mkdtemp()), keep=2)
    >>> for step in (1, 2, 3):
    ...     run.save(step, lambda tmp: (tmp / "model.safetensors").touch())
    >>> [p.name for p in run.folders()], run.pointed("LAST")
    (['step_00000002', 'step_00000003'], 'step_00000003')
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from csan import checkpoint as ckpt

__all__ = ["RunCheckpoints"]


class RunCheckpoints:
    """The ``checkpoints/`` folder of the run in ``out``, keeping the newest ``keep`` checkpoints
    (and the ones ``LAST`` / ``BEST`` name, and every one from ``protect_from`` on)."""

    def __init__(self, out: Path, *, keep: int) -> None:
        self.out = Path(out)
        self.root = self.out / "checkpoints"
        self.keep = max(keep, 1)

    @staticmethod
    def name(step: int) -> str:
        return f"step_{step:08d}"

    def folders(self) -> list[Path]:
        return ckpt.step_folders(self.out)

    def pointed(self, pointer: str) -> str | None:
        """The folder name ``LAST`` or ``BEST`` holds, if any."""
        path = self.root / pointer
        return path.read_text(encoding="utf-8").strip() if path.is_file() else None

    def point(self, pointer: str, step: int) -> None:
        """Set ``LAST`` or ``BEST`` to the checkpoint of ``step`` (atomically)."""
        ckpt.atomic_write_text(self.root / pointer, self.name(step) + "\n")

    def save(
        self,
        step: int,
        fill: Callable[[Path], None],
        *,
        is_best: bool = False,
        protect_from: int | None = None,
    ) -> None:
        """Write the checkpoint of ``step`` (``fill`` puts its files in a temporary folder), point
        ``LAST`` (and ``BEST``) at it, then prune."""
        self.root.mkdir(parents=True, exist_ok=True)
        ckpt.write_folder_atomically(self.root / self.name(step), fill)
        self.point("LAST", step)
        if is_best:
            self.point("BEST", step)
        self.prune(protect_from=protect_from)

    def prune(self, *, protect_from: int | None = None) -> None:
        """Remove the checkpoints that are not among the newest ``keep``, not pointed at, and
        older than ``protect_from`` (the budget schedule's cooldown, averaged at the end)."""
        names = [p.name for p in self.folders()]
        keep = {self.pointed("LAST"), self.pointed("BEST"), *names[-self.keep :]}
        if protect_from is not None:
            keep.update(n for n in names if int(n.split("_")[1]) >= protect_from)
        for name in names:
            if name not in keep:
                ckpt.remove_folder(self.root / name)
