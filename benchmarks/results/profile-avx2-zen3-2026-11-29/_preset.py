"""The trainer of ``multi30k-small`` (float32 eager here) and its first batches of epoch 1, in a
temporary run folder: what ``mm_shapes.py`` and ``step_ab.py`` time."""

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from csan.config import load_config
from csan.training.trainer import Trainer


@contextmanager
def preset_trainer(batches: int, overrides: list[str]) -> Iterator[tuple[Trainer, list]]:
    cfg = load_config("multi30k-small", ["train.evaluate_test=false", *overrides])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp) / "run", progress=False)
        indices = trainer.data.sampler.batches(1)[:batches]
        yield trainer, [[trainer.data.batch(i)] for i in indices]
