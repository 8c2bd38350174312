"""The settings of ``csan stn``: one dataclass, its presets, and ``--set key=value`` overrides.

Presets (:data:`PRESETS`):

- ``mnist``: the table of the issue: 6 rows x 5 distortions x 3 seeds, all 60,000 training digits
  distorted once, 3 epochs of Adam with a cosine schedule, the full 10,000-image test set. Sized for a
  2-core CPU: see :data:`PRESET_NOTES` for the measurement behind it.
- ``smoke``: every row on RTS only, one seed, 10,000 training images, 3 epochs: proves the command end
  to end in a few minutes.
- ``tiny``: what the tests train (a few hundred images, a few steps).

Example:
    >>> cfg = stn_config("smoke", ["epochs=2", "rows=cnn,st-cnn-affine"])
    >>> cfg.epochs, cfg.rows
    (2, ('cnn', 'st-cnn-affine'))
    >>> stn_config("smoke", ["epoch=2"])
    Traceback (most recent call last):
    ...
    csan.errors.CsanError: unknown stn setting 'epoch' (did you mean epochs?)
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, fields
from typing import Any

from csan.config import apply_overrides
from csan.errors import CsanError
from csan.experiments.stn.models import ROWS
from csan.spatial.distortions import DISTORTIONS

__all__ = ["PRESETS", "PRESET_NOTES", "RUN_KEYS", "TABLE_ROWS", "StnConfig", "stn_config"]

TABLE_ROWS = ("cnn", "st-cnn-affine", "st-cnn-projective", "st-cnn-tps", "fcn", "st-fcn-affine")


@dataclass(frozen=True)
class StnConfig:
    """One distorted-MNIST table: what is trained, on what, and how long.

    Example (the defaults are the ``mnist`` preset; a setting is changed by a copy):
        >>> cfg = StnConfig()
        >>> cfg.distortions, cfg.seeds, cfg.train_images, cfg == PRESETS["mnist"]
        (('R', 'RTS', 'P', 'E', 'clutter'), (1, 2, 3), 60000, True)
        >>> dataclasses.replace(cfg, epochs=1, rows=("cnn",)).rows
        ('cnn',)
        >>> "seeds" in RUN_KEYS, "lr" in RUN_KEYS  # a run's folder records the keys that define it
        (False, True)
    """

    distortions: tuple[str, ...] = DISTORTIONS  # columns: R, RTS, P, E, clutter
    rows: tuple[str, ...] = TABLE_ROWS  # models (csan.experiments.stn.models.ROWS)
    seeds: tuple[int, ...] = (1, 2, 3)  # training seeds (initialisation and batch order)
    data_seed: int = 0  # seed of the distortions: the same images for every row and seed
    train_images: int = 60000  # the first N training digits, each distorted once
    test_images: int = 10000  # the first N test digits, distorted with another seed
    epochs: int = 3  # passes over the training images
    batch_size: int = 64
    lr: float = 1e-3  # Adam's learning rate (peak of the cosine schedule)
    st_lr_scale: float = 1.0  # the spatial transformers' learning rate is lr times this
    schedule: str = "cosine"  # "cosine" (to 0 at the last step) or "constant"
    eval_every: int = 250  # steps between points of the test-error curve (and at the end)
    curve_images: int = 2000  # the first N test images score each curve point
    checkpoint_every: int = 500  # steps between checkpoints (and at the end of each epoch)
    threads: int = 1  # torch threads
    tps_grid: int = 4  # TPS control points per side (4x4)
    st_output: int | None = None  # side of an input transformer's output; None: the input's
    figure_images: int = 8  # test images shown in each transforms figure


# keys that may change when a run is resumed (they do not change what it computes)
RESUMABLE = ("threads", "checkpoint_every", "figure_images", "distortions", "rows", "seeds")
# the keys that define one run (recorded in its folder; a resume must match them)
RUN_KEYS = tuple(f.name for f in fields(StnConfig) if f.name not in RESUMABLE)

PRESETS = {
    "mnist": StnConfig(),
    "smoke": StnConfig(
        distortions=("RTS",),
        seeds=(1,),
        train_images=10000,
        test_images=2000,
        epochs=3,
        eval_every=50,
        curve_images=1000,
        checkpoint_every=100,
    ),
    "tiny": StnConfig(
        distortions=("RTS",),
        rows=("cnn", "st-cnn-affine"),
        seeds=(1,),
        train_images=200,
        test_images=100,
        epochs=1,
        batch_size=50,
        eval_every=2,
        curve_images=50,
        checkpoint_every=2,
    ),
}

PRESET_NOTES = {
    "mnist": (
        "Measured on this project's 2-core AMD EPYC (AVX512), 2026-11-23, one torch thread a run, two "
        "runs at a time: a run takes 0.1 min (FCN, 28x28) to 5 min (ST-CNN, cluttered); one seed of "
        "the 6 rows about 4.5 min on R, P or E, 8 min on RTS and 19 min on cluttered MNIST, so the 90 "
        "runs take about 2 hours of training (one process: one run at a time, each a little faster). "
        "A table's training-time total also counts any run slowed by other jobs on the CPU."
    ),
}


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """``value`` (a YAML scalar or list) as the field type ``tp``; CsanError naming the key."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    if origin is tuple:
        if isinstance(value, str):
            items = [v for v in value.split(",") if v.strip()]
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            items = [value]  # one item: seeds=1
        item_tp = typing.get_args(tp)[0]
        return tuple(_coerce(key, v.strip() if isinstance(v, str) else v, item_tp) for v in items)
    if tp is int and isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
        return value
    raise CsanError(f"stn setting {key}: expected {tp.__name__}, got {value!r}")


def _check(cfg: StnConfig) -> StnConfig:
    """Ranges and names; CsanError naming the key and the value."""
    bad = [d for d in cfg.distortions if d not in DISTORTIONS]
    if bad or not cfg.distortions:
        raise CsanError(f"distortions: {bad or 'none'}; choose from {', '.join(DISTORTIONS)}")
    bad = [r for r in cfg.rows if r not in ROWS]
    if bad or not cfg.rows:
        raise CsanError(f"rows: {bad or 'none'}; choose from {', '.join(ROWS)}")
    if not cfg.seeds or len(set(cfg.seeds)) != len(cfg.seeds):
        raise CsanError(f"seeds must be distinct and at least one, got {list(cfg.seeds)}")
    for key in ("train_images", "test_images", "epochs", "batch_size", "eval_every"):
        if getattr(cfg, key) < 1:
            raise CsanError(f"{key} must be at least 1, got {getattr(cfg, key)}")
    for key in ("curve_images", "checkpoint_every", "threads", "figure_images"):
        if getattr(cfg, key) < 1:
            raise CsanError(f"{key} must be at least 1, got {getattr(cfg, key)}")
    if not (cfg.train_images <= 60000 and cfg.test_images <= 10000):
        raise CsanError(
            f"MNIST has 60000 training and 10000 test digits; got train_images="
            f"{cfg.train_images}, test_images={cfg.test_images}"
        )
    if cfg.lr <= 0 or cfg.st_lr_scale < 0:
        raise CsanError(f"lr must be > 0 and st_lr_scale >= 0, got {cfg.lr}, {cfg.st_lr_scale}")
    if cfg.schedule not in ("cosine", "constant"):
        raise CsanError(f"schedule must be 'cosine' or 'constant', got {cfg.schedule!r}")
    if cfg.tps_grid < 2:
        raise CsanError(
            f"tps_grid must be at least 2 (control points per side), got {cfg.tps_grid}"
        )
    if cfg.st_output is not None and cfg.st_output < 4:
        raise CsanError(f"st_output must be at least 4 pixels or null, got {cfg.st_output}")
    return cfg


def stn_config(preset: str = "mnist", overrides: list[str] | None = None) -> StnConfig:
    """The preset ``preset`` with ``key=value`` overrides (values as YAML; lists as ``a,b,c``).

    Example:
        >>> stn_config("mnist", ["seeds=1", "st_output=null"]).seeds
        (1,)
    """
    if preset not in PRESETS:
        raise CsanError(f"unknown stn preset {preset!r}; presets: {', '.join(PRESETS)}")
    data = dataclasses.asdict(PRESETS[preset])
    hints = typing.get_type_hints(StnConfig)
    for key, value in apply_overrides({}, list(overrides or [])).items():
        if key not in hints:
            close = difflib.get_close_matches(key, list(hints), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise CsanError(f"unknown stn setting {key!r}{hint}")
        data[key] = _coerce(key, value, hints[key])
    return _check(StnConfig(**data))
