"""Learning-rate schedules.

Two kinds:

- by step (:func:`make_schedule`): ``inverse_sqrt`` and ``noam``, warmup counted in optimizer steps, as
  fairseq and the Transformer paper define them;
- by budget (:func:`budget_schedule`, ``train.schedule: budget``): the rate is a function of the
  fraction ``p`` of the run's budget already used, ``p = max(step / planned_steps, seconds / budget)``
  (:func:`budget_progress`), so that the same preset gets a complete schedule (warmup, peak, decay,
  cooldown) whether the machine does 900 or 4,000 steps in its hour.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["budget_progress", "budget_schedule", "make_schedule"]


def make_schedule(name: str, *, lr: float, warmup: int, d_model: int) -> Callable[[int], float]:
    """Return ``step -> learning rate`` (steps count from 1).

    - ``inverse_sqrt``: linear warmup to ``lr`` over ``warmup`` steps, then ``lr * sqrt(warmup / step)``.
    - ``noam``: ``lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (Vaswani et al.).

    Example:
        >>> f = make_schedule("inverse_sqrt", lr=1e-3, warmup=100, d_model=256)
        >>> round(f(50), 6), round(f(100), 6), round(f(400), 6)
        (0.0005, 0.001, 0.0005)
    """
    if warmup < 1:
        raise ValueError(f"train.warmup must be >= 1, got {warmup}")
    if name == "inverse_sqrt":
        return lambda step: lr * min(max(step, 1) / warmup, (warmup / max(step, 1)) ** 0.5)
    if name == "noam":
        return lambda step: (
            lr * d_model**-0.5 * min(max(step, 1) ** -0.5, max(step, 1) * warmup**-1.5)
        )
    raise ValueError(f"train.schedule: unknown schedule {name!r} (inverse_sqrt, noam or budget)")


def budget_schedule(
    *, lr: float, warmup_fraction: float, cooldown_fraction: float
) -> Callable[[float], float]:
    """Return ``progress -> learning rate`` for ``progress`` in [0, 1] (the budget used so far).

    Linear warmup to ``lr`` over the first ``warmup_fraction`` ``w``, then inverse-square-root decay
    ``lr * sqrt(w / p)`` (fairseq's ``inverse_sqrt``, in budget terms), and over the last
    ``cooldown_fraction`` ``c`` a linear cooldown of that rate to 0 at ``p = 1``. With ``w = 0.25`` and
    a fast machine's 4,000 steps in an hour this is fairseq's 1,000-step warmup; a machine four times
    slower reaches the same peak after the same quarter of its hour.

    Example:
        >>> f = budget_schedule(lr=1e-3, warmup_fraction=0.25, cooldown_fraction=0.2)
        >>> [round(f(p) * 1e3, 3) for p in (0.125, 0.25, 0.5, 0.8, 0.9, 1.0)]
        [0.5, 1.0, 0.707, 0.559, 0.264, 0.0]
    """
    if not 0.0 < warmup_fraction < 1.0:
        raise ValueError(f"train.warmup_fraction must be in (0, 1), got {warmup_fraction}")
    if not 0.0 <= cooldown_fraction <= 1.0 - warmup_fraction:
        raise ValueError(
            f"train.cooldown_fraction must be in [0, 1 - warmup_fraction = "
            f"{1 - warmup_fraction:g}], got {cooldown_fraction}"
        )
    w, c = warmup_fraction, cooldown_fraction

    def rate(progress: float) -> float:
        p = min(max(progress, 0.0), 1.0)
        if p < w:
            return lr * p / w
        value = lr * math.sqrt(w / p)
        if c > 0.0 and p > 1.0 - c:
            value *= (1.0 - p) / c
        return value

    return rate


def budget_progress(
    *,
    step: int,
    seconds: float,
    max_steps: int = 0,
    max_seconds: float = 0.0,
) -> float:
    """The fraction of the budget used: the larger of the steps' and the clock's share (0: no limit).

    ``max_steps`` is the step budget (``train.max_steps``, or ``max_epochs`` times the steps of an
    epoch), ``max_seconds`` the time budget (``train.max_minutes``), ``seconds`` the run's wall time so
    far (validation included, as the stop rule counts it). Whichever limit the run reaches first
    ends it, so that one sets the pace.

    Example:
        >>> budget_progress(step=300, seconds=1800.0, max_steps=4000, max_seconds=3600.0)
        0.5
        >>> budget_progress(step=3000, seconds=1800.0, max_steps=4000, max_seconds=3600.0)
        0.75
    """
    if not (max_steps or max_seconds):
        raise ValueError("schedule 'budget' needs train.max_minutes, max_steps or max_epochs")
    shares = []
    if max_steps:
        shares.append(step / max_steps)
    if max_seconds:
        shares.append(seconds / max_seconds)
    return min(max(shares), 1.0)
