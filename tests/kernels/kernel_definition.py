"""Local attention written directly from SPEC.md ("1D-CSAN", "2D-CSAN"), independent of csan's kernels.

Every (query head, position) gets the (key head, position) slots it may read as one boolean tensor; the
logits of all slots come from one einsum and one softmax runs over the allowed ones. O(H^2 T^2): tests only.
"""

from __future__ import annotations

import torch
from torch import Tensor


def allowed_slots(
    batch: int,
    heads: int,
    time: int,
    *,
    window: int,
    head_window: int,
    key_padding_mask: Tensor | None,
    causal: bool,
    head_boundary: str,
) -> Tensor:
    """(batch, heads, time, heads, time) bool: query (h, i) may read key (g, j)."""
    i = torch.arange(time)[:, None]
    j = torch.arange(time)[None, :]
    if causal:
        positions = (j <= i) & (j > i - window)  # keys i-M+1 .. i
    else:
        positions = (i - j).abs() <= (window - 1) // 2
    h = torch.arange(heads)[:, None]
    g = torch.arange(heads)[None, :]
    n = (head_window - 1) // 2
    if head_boundary == "wrap":  # circular distance between heads
        heads_ok = torch.minimum((g - h) % heads, (h - g) % heads) <= n
    else:
        heads_ok = (g - h).abs() <= n
    allowed = heads_ok[None, :, None, :, None] & positions[None, None, :, None, :]
    if key_padding_mask is not None:
        allowed = allowed & ~key_padding_mask[:, None, None, None, :]
    return allowed.expand(batch, heads, time, heads, time)


def definition_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    window: int,
    head_window: int = 1,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    head_boundary: str = "wrap",
) -> Tensor:
    """(batch, heads, time, d_h): softmax over the allowed slots of q.k/sqrt(d_h); empty rows are 0."""
    b, h, t, d = q.shape
    allowed = allowed_slots(
        b, h, t, window=window, head_window=head_window, key_padding_mask=key_padding_mask,
        causal=causal, head_boundary=head_boundary,
    ).reshape(b, h, t, h * t)  # fmt: skip
    logits = torch.einsum("bhid,bgjd->bhigj", q, k).reshape(b, h, t, h * t) / d**0.5
    has_key = allowed.any(dim=-1, keepdim=True)
    logits = logits.masked_fill(~allowed, float("-inf")).masked_fill(~has_key, 0.0)
    weights = torch.softmax(logits, dim=-1).masked_fill(~has_key, 0.0)
    return torch.einsum("bhigj,bgjd->bhid", weights.view(b, h, t, h, t), v)
