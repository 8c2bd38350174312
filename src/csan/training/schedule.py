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

__all__ = ["Budget", "budget_progress", "budget_schedule", "make_schedule"]


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


class Budget:
    """Where a run stands in its budget, and when the cooldown's checkpoints are due.

    Args:
        max_steps: the step budget (``train.max_steps``, or ``max_epochs`` epochs, whichever is
            smaller); None: no step budget.
        max_seconds: the wall-time budget (``train.max_minutes``); None: none.
        cooldown_fraction: the last fraction of the budget, over which ``average_last``
            checkpoints are spread; 0 or ``average_last`` < 2: no cooldown checkpoints.
        average_last: how many checkpoints the final model averages.

    Example:
        >>> budget = Budget(max_steps=100, max_seconds=None, cooldown_fraction=0.2, average_last=4)
        >>> budget.used(step=50, seconds=999.0)
        0.5
        >>> [s for s in range(1, 101) if budget.cooldown_checkpoint_due(s, 0.0)], budget.cooldown_step
        ([80, 85, 90, 95], 80)

    (The run's last checkpoint, at its stop, is the cooldown's last point: 100 here.)
    """

    def __init__(
        self,
        *,
        max_steps: int | None,
        max_seconds: float | None,
        cooldown_fraction: float,
        average_last: int,
    ) -> None:
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.cooldown_fraction = cooldown_fraction
        self.average_last = average_last
        self.cooldown_step: int | None = None  # the first step of the cooldown, once reached
        self._last = 0.0  # progress at the previous call of cooldown_checkpoint_due

    def used(self, step: int, seconds: float) -> float:
        """The fraction of the budget used at ``step`` after ``seconds`` (:func:`budget_progress`)."""
        return budget_progress(
            step=step,
            seconds=seconds,
            max_steps=self.max_steps or 0,
            max_seconds=self.max_seconds or 0.0,
        )

    def resume(self, *, step: int, seconds: float, cooldown_step: int | None) -> None:
        """Carry on from a checkpoint at ``step`` after ``seconds``: the next call of
        :meth:`cooldown_checkpoint_due` counts from there, as the run that wrote it would have.

        Example (stopped at step 91 of 100, resumed in a new process):
            >>> budget = Budget(max_steps=100, max_seconds=None, cooldown_fraction=0.2, average_last=4)
            >>> budget.resume(step=91, seconds=0.0, cooldown_step=80)
            >>> [s for s in range(92, 101) if budget.cooldown_checkpoint_due(s, 0.0)]
            [95]
        """
        self.cooldown_step = cooldown_step
        self._last = self.used(step, seconds)

    def cooldown_checkpoint_due(self, step: int, seconds: float) -> bool:
        """A checkpoint at each of ``average_last`` points spread over the cooldown (called once per
        step); records :attr:`cooldown_step`, from which the final model averages.

        The trainer calls it once more after an epoch's validation, ignoring the answer: the epoch's
        checkpoint then stands for the cooldown points that the validation's time passed, so the next
        step writes no other one a step later, and a cooldown that starts there starts at that step.

        Example (a 100-second budget, 1 s a step; the validation at step 83 runs to 86 s, past the
        cooldown point at 85 s; without the second call at 83, step 84 writes a checkpoint too):
            >>> budget = Budget(max_steps=None, max_seconds=100.0, cooldown_fraction=0.2, average_last=4)
            >>> due = []
            >>> for step in range(1, 98):
            ...     if budget.cooldown_checkpoint_due(step, step + (3.0 if step > 83 else 0.0)):
            ...         due.append(step)
            ...     if step == 83:
            ...         _ = budget.cooldown_checkpoint_due(83, 86.0)  # the epoch's checkpoint
            >>> due
            [80, 87, 92]
        """
        if not self.cooldown_fraction or self.average_last < 2:
            return False
        start = 1.0 - self.cooldown_fraction
        p = self.used(step, seconds)
        before, self._last = self._last, p
        if p < start:
            return False
        if self.cooldown_step is None:
            self.cooldown_step = step
            return True
        # points start + c * k / N, k = 1 .. N - 1 (the last checkpoint comes with the stop)
        width = self.cooldown_fraction / self.average_last
        slot = lambda q: math.floor((q - start) / width + 1e-9)  # noqa: E731  (0.05 / 0.05 < 1 in floats)
        return slot(max(before, start)) < slot(p) < self.average_last
