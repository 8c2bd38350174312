"""A toy corpus and an untrained toy model: something to try csan's API on in seconds.

The docstring examples of the training, decoding and experiment functions use these, so that each
shows its own call rather than the same setup; they are as useful in a notebook.

Example:
    >>> from csan.decoding import Translator, load_model
    >>> model = toy_model()
    >>> len(Translator(load_model(model)).translate(["a dog runs .", ""], beam=1))
    2
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from csan.checkpoint import save_model_dir
from csan.config import Config, dump_config, load_config
from csan.data import SubwordModel
from csan.models import build_model

__all__ = ["TOY_PAIRS", "toy_corpus", "toy_model", "toy_run", "toy_train"]

# three English-German pairs; the corpus repeats them 20 times in every split
TOY_PAIRS = (
    ("a dog runs .", "ein Hund rennt ."),
    ("a cat sleeps .", "eine Katze schlaeft ."),
    ("two men walk .", "zwei Maenner gehen ."),
)


def toy_corpus(
    folder: str | os.PathLike[str] | None = None,
    splits: Sequence[str] = ("train", "valid", "test2016"),
    *,
    repeat: int = 20,
) -> Path:
    """Write ``<split>.en`` and ``<split>.de`` (the :data:`TOY_PAIRS`, ``repeat`` times) into
    ``folder`` (a new temporary folder if None) and return it: a corpus for ``data.data_dir``.

    Example:
        >>> d = toy_corpus()
        >>> sorted(p.name for p in d.iterdir())
        ['test2016.de', 'test2016.en', 'train.de', 'train.en', 'valid.de', 'valid.en']
        >>> lines = (d / "train.de").read_text().splitlines()
        >>> len(lines), lines[0]
        (60, 'ein Hund rennt .')
    """
    d = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="csan-toy-"))
    d.mkdir(parents=True, exist_ok=True)
    for split in splits:
        for side, lang in enumerate(("en", "de")):
            lines = [pair[side] for pair in TOY_PAIRS] * repeat
            (d / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


def toy_model(
    folder: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] = (),
    **meta: Any,
) -> Path:
    """Save an untrained model of the ``tiny`` preset (with ``overrides``) into ``folder`` (a new
    temporary ``.../model`` if None), with a 300-piece subword model learned from :data:`TOY_PAIRS`;
    return the folder. ``meta`` goes into its ``config.json`` (``step=...``). Its translations are
    noise; its shapes, files and code paths are real.

    Example:
        >>> folder = toy_model(overrides=["model.encoder_attention=csan1d"])
        >>> sorted(p.name for p in folder.iterdir())
        ['config.json', 'model.safetensors', 'spm.model']
        >>> from csan.decoding import load_model
        >>> loaded = load_model(folder)
        >>> loaded.config.model.encoder_attention, loaded.model.vocab_size
        ('csan1d', 300)
    """
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="csan-toy-")) / "model"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spm = SubwordModel.train([s for pair in TOY_PAIRS for s in pair] * 20, vocab_size=300)
    cfg = load_config("tiny", list(overrides))
    save_model_dir(folder, build_model(cfg.model, len(spm)), cfg, spm.to_bytes(), **meta)
    return folder


def toy_run(
    folder: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] = (),
    *,
    steps: int = 4,
) -> Path:
    """Train the ``tiny`` preset (with ``overrides``) for ``steps`` steps on :func:`toy_corpus`,
    checkpointed every 2 steps, in ``folder/run`` (``folder``: a new temporary one if None); return
    the run folder. The corpus and its encoded cache stay inside ``folder``. A second of CPU or so.

    Example:
        >>> run = toy_run()  # doctest: +ELLIPSIS
        machine: ...
        >>> sorted(p.name for p in (run / "checkpoints").iterdir())
        ['LAST', 'step_00000002', 'step_00000004']
        >>> sorted(p.name for p in (run / "model").iterdir())
        ['config.json', 'model.safetensors', 'spm.model']
    """
    from csan.training.trainer import train

    d = toy_corpus(folder, splits=("train", "valid"))
    cfg = load_config(
        "tiny",
        [
            f"data.data_dir={d}",
            "data.vocab_size=300",
            f"train.max_steps={steps}",
            "train.checkpoint_every=2",
            "train.evaluate_test=false",
            "train.device=cpu",
            "train.threads=1",
            *overrides,
        ],
    )
    with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        train(cfg, d / "run", progress=False)
    return d / "run"


def toy_train(cfg: Config, run_dir: Path, *, progress: bool = False) -> None:
    """A stand-in for :func:`csan.training.trainer.train` that trains nothing: it writes what a
    finished run folder holds (``config.yaml``, ``results.json``), with test BLEU 20 + seed, plus 1
    for any encoder attention but ``vanilla``. For showing grids and tables in no time.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()) / "run"
        >>> toy_train(load_config("tiny", ["train.seed=2", "model.encoder_attention=csan1d"]), run)
        >>> json.loads((run / "results.json").read_text())["test"]["bleu"]
        23.0
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(dump_config(cfg), encoding="utf-8")
    bleu = 20.0 + cfg.train.seed + (cfg.model.encoder_attention != "vanilla")
    results = {
        "steps": 5,
        "stop_reason": "max_steps=5",
        "test": {"split": "test2016", "bleu": bleu},
    }
    (run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
