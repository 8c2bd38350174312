"""Dense kernels: a boolean mask over all (query, key) pairs and one ``scaled_dot_product_attention``.

Notation: q (batch, heads, t_q, d_h); k, v (batch, heads, t_k, d_h) with t_q <= t_k. When t_q < t_k the
queries are the *last* t_q positions of the key sequence (cached decoding), so query row ``r`` sits at
position ``i = t_k - t_q + r``.

The options are not validated here; :func:`csan.functional.local_attention` does that.
"""

from __future__ import annotations

import torch
from torch import Tensor

from csan.kernels.sdpa import sdpa

__all__ = ["dense_local_attention", "head_neighbours", "local_band", "masked_attention"]


def masked_attention(
    q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None, *, dropout_p: float = 0.0
) -> Tensor:
    """Scaled dot-product attention over the ``allowed`` keys; a row with no allowed key gives zeros.

    Args:
        q: (..., t_q, d_h); k, v: (..., t_k, d_h).
        allowed: bool, broadcastable to (..., t_q, t_k), True where query may see key; None = all.
        dropout_p: dropout on the attention weights.

    Example:
        >>> q = torch.randn(1, 1, 2, 4)
        >>> masked_attention(q, q, q, torch.tensor([[True, False], [False, False]]))[0, 0, 1]
        tensor([0., 0., 0., 0.])
    """
    if allowed is None:
        return sdpa(q, k, v, dropout_p=dropout_p)
    # Empty rows would give NaN (softmax over nothing); let them see every key, then zero their output.
    has_key = allowed.any(dim=-1, keepdim=True)  # (..., t_q, 1)
    out = sdpa(q, k, v, attn_mask=allowed | ~has_key, dropout_p=dropout_p)
    return out.masked_fill(~has_key, 0.0)


def local_band(t_q: int, t_k: int, *, window: int, causal: bool, device: torch.device) -> Tensor:
    """(t_q, t_k) bool: key ``j`` is inside query ``i``'s position window.

    Symmetric: ``|i - j| <= (window - 1) / 2``; causal: ``i - window < j <= i``.

    Example:
        >>> local_band(4, 4, window=3, causal=True, device=torch.device("cpu")).int().tolist()
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1]]
    """
    i = torch.arange(t_k - t_q, t_k, device=device)[:, None]  # (t_q, 1) absolute query positions
    j = torch.arange(t_k, device=device)[None, :]  # (1, t_k)
    offset = j - i
    if causal:
        return (offset <= 0) & (offset > -window)
    return offset.abs() <= window // 2


def head_neighbours(
    heads: int, head_window: int, head_boundary: str, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Which heads each head reads in 2D-CSAN.

    Returns ``index`` (heads, head_window) long, the head read by slot ``s`` of head ``h`` (offset
    ``s - n``), and ``exists`` (heads, head_window) bool, False for slots past the edge under ``"clip"``
    (their ``index`` is a valid placeholder that must be masked out).

    Example:
        >>> index, exists = head_neighbours(4, 3, "wrap", torch.device("cpu"))
        >>> index[0].tolist(), exists[0].tolist()
        ([3, 0, 1], [True, True, True])
    """
    n = head_window // 2
    raw = torch.arange(heads, device=device)[:, None] + torch.arange(-n, n + 1, device=device)
    if head_boundary == "wrap":
        return raw % heads, torch.ones_like(raw, dtype=torch.bool)
    return raw.clamp(0, heads - 1), (raw >= 0) & (raw < heads)


def dense_local_attention(
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
    """1D/2D-CSAN by one masked SDPA; see :func:`csan.functional.local_attention` for the semantics.

    For 2D, the keys/values of each head's ``N`` neighbouring heads are gathered into one key axis of
    length ``N * t_k`` so that a single softmax runs over all ``N x M`` slots.

    Example:
        >>> q = torch.randn(2, 4, 5, 8)
        >>> dense_local_attention(q, q, q, window=3, head_window=3).shape
        torch.Size([2, 4, 5, 8])
    """
    b, h, t_q, d_h = q.shape
    t_k = k.size(2)
    band = local_band(t_q, t_k, window=window, causal=causal, device=q.device)
    allowed = band[None, None, :, None, :]  # (1, 1, t_q, 1, t_k): (batch, head, query, slot, key)
    slots = 1
    if head_window > 1:
        index, exists = head_neighbours(h, head_window, head_boundary, q.device)
        slots = head_window
        k = k[:, index].reshape(b, h, slots * t_k, d_h)  # (b, h, N, t_k, d_h) -> (b, h, N*t_k, d_h)
        v = v[:, index].reshape(b, h, slots * t_k, d_h)
        allowed = allowed & exists[None, :, None, :, None]  # (1, h, t_q, N, t_k)
    if key_padding_mask is not None:
        allowed = allowed & ~key_padding_mask[:, None, None, None, :]  # (b, ., t_q, ., t_k)
    lead = (allowed.size(0), allowed.size(1), t_q, slots, t_k)
    allowed = allowed.expand(lead).reshape(lead[0], lead[1], t_q, slots * t_k)  # one softmax axis
    return masked_attention(q, k, v, allowed, dropout_p=dropout_p)
