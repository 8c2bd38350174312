"""Bounded key/value cache for causal local attention (1D/2D-CSAN in a decoder), incremental decoding.

Notation (SPEC.md): q, k, v (batch, heads, time, d_h). With a causal window ``M`` the query at position
``i`` reads keys ``i - M < j <= i`` only, so after a step only the last ``M - 1`` keys and values can
ever be read again: the cache keeps those and nothing more (memory O(M), not O(steps)).

The cache lives in the module's incremental-decoding ``state`` dict (tensors batch first, so
``csan.models.base.reorder_state`` follows beam search), under ``state["k"]`` and ``state["v"]``.

Example (a decoder layer's attention, in its ``forward`` with ``state`` given)::

    q, k, v = self.project(x)                                # x: only the newest positions
    k, v = append_window(state, k, v, window=self.window)   # cached + new keys and values
    out = local_attention(q, k, v, window=self.window, causal=True)  # (batch, heads, new, d_h)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["append_window"]


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
