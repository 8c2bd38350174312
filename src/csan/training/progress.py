"""Where a run stands (step, epoch, time, tokens, best validation), kept over resumes.

A checkpoint's ``trainer.json`` holds these counters (:meth:`Progress.counters`); a resumed run
starts from them (:meth:`Progress.from_counters`), so its steps, epochs, clock and best score go on
where the checkpoint left them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Progress"]


@dataclass
class Progress:
    """The counters of one run.

    Example:
        >>> p = Progress(step=30, epoch=2, batch_in_epoch=5, train_seconds=12.0)
        >>> p.epochs_done(batches_per_epoch=20)  # the second epoch a quarter done
        1.25
        >>> q = Progress.from_counters(p.counters(cooldown_step=None))
        >>> (q.step, q.epoch, q.batch_in_epoch, q.train_seconds)
        (30, 2, 5, 12.0)
    """

    step: int = 0
    epoch: int = 1  # the epoch being trained (1-based)
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    train_seconds: float = 0.0  # time in training steps (validation excluded), over resumes
    wall_before: float = 0.0  # wall time of the earlier sessions of this run (resume)
    tokens_seen: int = 0
    best: dict[str, float] | None = None  # the best validation metrics so far
    wall_start: float = field(default_factory=time.monotonic)  # this session's start

    @property
    def wall_seconds(self) -> float:
        """Wall time of the run so far (validation and checkpoints included), over resumes."""
        return self.wall_before + time.monotonic() - self.wall_start

    def eta(self, max_minutes: float | None) -> str:
        """Time left of a ``max_minutes`` budget, as ``"12m05s"`` (``"-"`` without one)."""
        if max_minutes is None:
            return "-"
        left = max(max_minutes * 60 - self.wall_seconds, 0)
        return f"{int(left // 60)}m{int(left % 60):02d}s"

    def epochs_done(self, batches_per_epoch: int) -> float:
        """Completed epochs as a fraction (3.5 = half-way through the fourth)."""
        return self.epoch - 1 + self.batch_in_epoch / max(batches_per_epoch, 1)

    def counters(self, *, cooldown_step: int | None) -> dict[str, Any]:
        """What a checkpoint keeps (with the budget schedule's ``cooldown_step``)."""
        return {
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "train_seconds": self.train_seconds,
            "wall_seconds": self.wall_seconds,
            "tokens_seen": self.tokens_seen,
            "best": self.best,
            "cooldown_step": cooldown_step,
        }

    @classmethod
    def from_counters(cls, meta: dict[str, Any]) -> Progress:
        """The progress a checkpoint's counters describe (its clock continues from now)."""
        return cls(
            step=meta["step"],
            epoch=meta["epoch"],
            batch_in_epoch=meta["batch_in_epoch"],
            train_seconds=meta["train_seconds"],
            wall_before=meta.get("wall_seconds", meta["train_seconds"]),
            tokens_seen=meta["tokens_seen"],
            best=meta["best"],
        )

    def limit_reached(
        self, *, max_steps: int | None, max_minutes: float | None, max_epochs: int | None
    ) -> str | None:
        """The first limit reached, as ``"max_steps=200"``, or None.

        Example:
            >>> Progress(step=200).limit_reached(max_steps=200, max_minutes=None, max_epochs=None)
            'max_steps=200'
        """
        if max_steps is not None and self.step >= max_steps:
            return f"max_steps={max_steps}"
        if max_minutes is not None and self.wall_seconds >= max_minutes * 60:
            return f"max_minutes={max_minutes}"
        if max_epochs is not None and self.epoch > max_epochs:
            return f"max_epochs={max_epochs}"
        return None

    def better(self, metrics: dict[str, float]) -> bool:
        """Whether ``metrics`` beat the best so far: higher BLEU when validation has BLEU, else
        lower loss.

        Example:
            >>> Progress(best={"loss": 2.0, "bleu": 30.0}).better({"loss": 2.5, "bleu": 31.0})
            True
        """
        if self.best is None:
            return True
        if "bleu" in metrics:
            return metrics["bleu"] > self.best["bleu"]
        return metrics["loss"] < self.best["loss"]
