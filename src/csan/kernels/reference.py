"""The slow, obviously correct local attention, written straight from SPEC.md ("1D-CSAN", "2D-CSAN").

Every (query head, query position) gets the explicit set of (key head, key position) slots it may read,
built with Python loops from the definition; logits for all (head, head, position, position) pairs come from
one einsum and one softmax runs over the allowed slots. O(H^2 T^2) memory: for tests and small inputs only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["reference_local_attention"]


def _head_sets(heads: int, head_window: int, head_boundary: str) -> Tensor:
    """(heads, heads) bool: query head ``h`` reads key head ``g``."""
    n = (head_window - 1) // 2
    reads = torch.zeros(heads, heads, dtype=torch.bool)
    for h in range(heads):
        for offset in range(-n, n + 1):
            g = h + offset
            if head_boundary == "wrap":
                reads[h, g % heads] = True
            elif 0 <= g < heads:
                reads[h, g] = True
    return reads


def _position_sets(t_q: int, t_k: int, window: int, causal: bool) -> Tensor:
    """(t_q, t_k) bool: query row ``r`` (position ``t_k - t_q + r``) reads key position ``j``."""
    m = (window - 1) // 2
    reads = torch.zeros(t_q, t_k, dtype=torch.bool)
    for r in range(t_q):
        i = t_k - t_q + r
        for j in range(t_k):
            reads[r, j] = (i - window < j <= i) if causal else abs(i - j) <= m
    return reads


def reference_local_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    window: int,
    head_window: int = 1,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    head_boundary: str = "wrap",
    dropout_p: float = 0.0,
) -> Tensor:
    """Local attention from the definition; same contract as :func:`csan.functional.local_attention`.

    Example:
        >>> q = torch.randn(1, 2, 4, 3)
        >>> reference_local_attention(q, q, q, window=3).shape
        torch.Size([1, 2, 4, 3])
    """
    b, h, t_q, d_h = q.shape
    t_k = k.size(2)
    heads = _head_sets(h, head_window, head_boundary).to(q.device)  # (h_q, h_k)
    positions = _position_sets(t_q, t_k, window, causal).to(q.device)  # (t_q, t_k)
    # (1, h_q, t_q, h_k, t_k): query (head, position) reads key (head, position)
    allowed = heads[None, :, None, :, None] & positions[None, None, :, None, :]
    if key_padding_mask is not None:
        allowed = allowed & ~key_padding_mask[:, None, None, None, :].to(q.device)
    allowed = allowed.expand(b, h, t_q, h, t_k)
    # logits[b, h, i, g, j] = q[b, h, i] . k[b, g, j] / sqrt(d_h)
    logits = torch.einsum("bhid,bgjd->bhigj", q, k) / d_h**0.5
    flat = logits.masked_fill(~allowed, float("-inf")).reshape(b, h, t_q, h * t_k)
    has_key = allowed.reshape(b, h, t_q, h * t_k).any(dim=-1, keepdim=True)  # (b, h, t_q, 1)
    weights = torch.softmax(flat.masked_fill(~has_key, 0.0), dim=-1).masked_fill(~has_key, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    weights = weights.reshape(b, h, t_q, h, t_k)
    return torch.einsum("bhigj,bgjd->bhid", weights, v)
