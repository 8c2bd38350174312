"""Bounded key/value cache for causal local attention (1D/2D-CSAN in a decoder), incremental decoding.

Notation (SPEC.md): q, k, v (batch, heads, time, d_h). With a causal window ``M`` the query at position
``i`` reads keys ``i - M < j <= i`` only, so after a step only the last ``M - 1`` keys and values can
ever be read again: the cache keeps those and nothing more (memory O(M), not O(steps)).

The cache lives in the module's incremental-decoding ``state`` dict (tensors batch first, so
``csan.models.base.reorder_state`` follows beam search), under ``state["k"]`` and ``state["v"]``.

Example (a decoder layer's attention, in its ``forward`` with ``state`` given)::

    cache = WindowCache(window=11, head_window=3)   # built once, in __init__
    q, k, v = self.project(x)                       # x: only the newest positions
    out = cache.step(state, q, k, v)                # (batch, heads, new, d_h)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from csan.kernels.dense import dense_local_attention

__all__ = ["WindowCache", "append_window"]


def append_window(
    state: dict[str, Any], k: Tensor, v: Tensor, *, window: int
) -> tuple[Tensor, Tensor]:
    """Append new keys/values (batch, heads, new, d_h) to ``state`` and return all readable ones.

    Returns ``(k_all, v_all)``, (batch, heads, kept + new, d_h): the cached ``kept <= window - 1``
    positions followed by the new ones. ``state`` then keeps only the last ``window - 1`` positions.

    Example:
        >>> state = {}
        >>> for step in range(5):
        ...     k_all, _ = append_window(state, torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4), window=3)
        >>> k_all.size(2), state["k"].size(2)
        (3, 2)
    """
    if "k" in state:
        k = torch.cat([state["k"], k], dim=2)
        v = torch.cat([state["v"], v], dim=2)
    start = max(k.size(2) - (window - 1), 0)
    state["k"], state["v"] = k[:, :, start:], v[:, :, start:]
    return k, v


class WindowCache:
    """Incremental decoding for causal 1D/2D-CSAN with a bounded cache.

    Args:
        window: M, odd >= 1: the query at ``i`` reads keys ``i - M < j <= i``.
        head_window: N, odd: keys and values of heads ``h - n .. h + n`` (one softmax over all slots).
        head_boundary: ``"wrap"`` or ``"clip"``, as in ``csan.functional.local_attention``.

    Feeding a sequence step by step (any number of positions per step) through :meth:`step` gives the
    same outputs as one causal pass over the whole sequence.

    Example:
        >>> cache, state = WindowCache(window=3, head_window=3), {}
        >>> x = torch.randn(1, 4, 6, 8)
        >>> steps = [cache.step(state, x[:, :, i : i + 1], x[:, :, i : i + 1], x[:, :, i : i + 1])
        ...          for i in range(6)]
        >>> torch.cat(steps, dim=2).shape, state["k"].shape
        (torch.Size([1, 4, 6, 8]), torch.Size([1, 4, 2, 8]))
    """

    def __init__(self, *, window: int, head_window: int = 1, head_boundary: str = "wrap") -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1 or window % 2 == 0:
            raise ValueError(f"window must be a positive odd integer, got {window!r}")
        if head_window < 1 or head_window % 2 == 0:
            raise ValueError(f"head_window must be a positive odd integer, got {head_window!r}")
        if head_boundary not in ("wrap", "clip"):
            raise ValueError(f"head_boundary must be 'wrap' or 'clip', got {head_boundary!r}")
        self.window = window
        self.head_window = head_window
        self.head_boundary = head_boundary

    def step(self, state: dict[str, Any], q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """Attention of the newest positions; updates ``state`` in place.

        Args:
            state: the layer's decoding state, ``{}`` at the first step.
            q, k, v: (batch, heads, new, d_h) for the newest ``new`` positions.

        Returns:
            (batch, heads, new, d_h).
        """
        if q.size(1) < self.head_window:
            raise ValueError(f"head_window ({self.head_window}) exceeds the heads ({q.size(1)})")
        k_all, v_all = append_window(state, k, v, window=self.window)
        return dense_local_attention(
            q,
            k_all,
            v_all,
            window=self.window,
            head_window=self.head_window,
            causal=True,
            head_boundary=self.head_boundary,
        )

    def __repr__(self) -> str:
        return (
            f"WindowCache(window={self.window}, head_window={self.head_window}, "
            f"head_boundary={self.head_boundary!r})"
        )
