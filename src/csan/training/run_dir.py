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

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from csan import checkpoint as ckpt
from csan.checkpoint import trainer_state
from csan.config import Config
from csan.training.safety import trim_metrics

__all__ = ["RUN_LEFTOVERS", "RunCheckpoints", "tidy_after_crash"]

log = logging.getLogger("csan")

# what the run writes aside (``<name>.tmp-<pid>``) and renames into place in its folder
RUN_LEFTOVERS = ("model", ".config.yaml", ".results.json")


class RunCheckpoints:
    """The ``checkpoints/`` folder of the run in ``out``, keeping the newest ``keep`` checkpoints
    (and the ones ``LAST`` / ``BEST`` name, and every one from ``protect_from`` on).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     run = RunCheckpoints(Path(tmp), keep=1)
        ...     run.save(1, lambda d: (d / "model.safetensors").touch(), is_best=True)
        ...     run.save(2, lambda d: (d / "model.safetensors").touch())
        ...     [p.name for p in run.folders()], run.pointed("BEST")  # the best one is kept too
        (['step_00000001', 'step_00000002'], 'step_00000001')
    """

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

    def save_state(
        self,
        step: int,
        *,
        model: nn.Module,
        cfg: Config,
        spm_bytes: bytes,
        optimizer: torch.optim.Optimizer,
        counters: dict[str, Any],
        is_best: bool = False,
        protect_from: int | None = None,
    ) -> str | None:
        """Checkpoint a training run: the model folder (weights, config, subword model) and the
        trainer state (optimizer, random generators, ``counters``). Weights that are not finite are
        not saved (a good checkpoint is never replaced by a broken one): returns why, else None."""
        bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
        if bad:
            return f"weights not finite ({bad[0]})"
        tensors, meta = trainer_state.capture(optimizer, counters)

        def fill(tmp: Path) -> None:
            ckpt.save_model_dir(tmp, model, cfg, spm_bytes, step=step)
            ckpt.save_trainer_state(tmp, tensors, meta)

        self.save(step, fill, is_best=is_best, protect_from=protect_from)
        return None

    @staticmethod
    def load_state(
        folder: Path, *, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, Any]:
        """Load a checkpoint's weights, optimizer and random generators; return its counters."""
        ckpt.load_weights(model, folder / "model.safetensors")
        return trainer_state.restore(folder, optimizer)


def tidy_after_crash(out: Path, step: int) -> int:
    """Remove a killed run's temporary folders and files, and its metrics lines past ``step`` (the
    checkpoint it resumes from); return the number of metrics lines dropped.

    Example (a run killed while writing step 30, resumed from step 20):
        >>> import os, tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> for name in ("checkpoints/step_00000020", "checkpoints/step_00000030.tmp-41", "model"):
        ...     (out / name).mkdir(parents=True)
        >>> _ = (out / ".results.json.tmp-41").write_text("{")
        >>> _ = (out / "metrics.jsonl").write_text("".join(
        ...     f'{{"kind": "train", "step": {s}}}\\n' for s in (10, 20, 30)))
        >>> tidy_after_crash(out, 20)  # the line of step 30 is dropped
        1
        >>> sorted(os.listdir(out)), os.listdir(out / "checkpoints")
        (['checkpoints', 'metrics.jsonl', 'model'], ['step_00000020'])
    """
    root = out / "checkpoints"
    if root.is_dir():
        removed = ckpt.remove_stale_temporaries(root)
        if removed:
            log.info("removed leftovers of an interrupted checkpoint: %s", ", ".join(removed))
    # the final model and the run's own files, written aside and renamed: their leftovers only
    removed = ckpt.remove_stale_temporaries(out, names=RUN_LEFTOVERS)
    if removed:
        log.info("removed leftovers of an interrupted write: %s", ", ".join(removed))
    return trim_metrics(out / "metrics.jsonl", step)
