"""Learning-rate schedules (as multipliers for ``torch.optim.lr_scheduler.LambdaLR``)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["make_schedule"]


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
    raise ValueError(f"train.schedule: unknown schedule {name!r} (inverse_sqrt or noam)")
