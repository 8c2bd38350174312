"""Dense kernels: a boolean mask over all (query, key) pairs and one ``scaled_dot_product_attention``.

Notation: q (batch, heads, t_q, d_h); k, v (batch, heads, t_k, d_h) with t_q <= t_k. When t_q < t_k the
queries are the *last* t_q positions of the key sequence (cached decoding), so query row ``r`` sits at
position ``i = t_k - t_q + r``.

The options are not validated here; :func:`csan.functional.local_attention` does that.
"""

from __future__ import annotations

import torch
from torch import Tensor

from csan.kernels import masks
from csan.kernels.sdpa import sdpa

__all__ = [
    "dense_local_attention",
    "gather_heads",
    "head_neighbours",
    "local_band",
    "masked_attention",
]


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
    """(t_q, t_k) bool, a fresh tensor: key ``j`` is inside query ``i``'s position window.

    Symmetric: ``|i - j| <= (window - 1) / 2``; causal: ``i - window < j <= i``. (The kernels use the
    cached, shared copy of :func:`csan.kernels.masks.band`.)

    Example:
        >>> local_band(4, 4, window=3, causal=True, device=torch.device("cpu")).int().tolist()
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1]]
    """
    return masks.build_band(t_q, t_k, window=window, causal=causal, device=device)


def head_neighbours(
    heads: int, head_window: int, head_boundary: str, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Which heads each head reads in 2D-CSAN (fresh tensors; the kernels use the cached
    :func:`csan.kernels.masks.head_neighbours`).

    Returns ``index`` (heads, head_window) long, the head read by slot ``s`` of head ``h`` (offset
    ``s - n``), and ``exists`` (heads, head_window) bool, False for slots past the edge under ``"clip"``
    (their ``index`` is a valid placeholder that must be masked out).

    Example:
        >>> index, exists = head_neighbours(4, 3, "wrap", torch.device("cpu"))
        >>> index[0].tolist(), exists[0].tolist()
        ([3, 0, 1], [True, True, True])
    """
    return masks.build_head_neighbours(heads, head_window, head_boundary, device)


def gather_heads(x: Tensor, index: Tensor) -> Tensor:
    """(batch, heads, time, d_h) -> (batch, heads, N*time, d_h): slot ``s`` of head ``h`` holds head
    ``index[h, s]`` (``index`` (heads, N)). One ``index_select`` (its backward one ``index_add_``).

    Example:
        >>> x = torch.arange(3.0).view(1, 3, 1, 1)
        >>> gather_heads(x, torch.tensor([[2, 0], [0, 1], [1, 2]])).flatten().tolist()
        [2.0, 0.0, 0.0, 1.0, 1.0, 2.0]
    """
    b, h, t, d = x.shape
    return x.index_select(1, index.flatten()).view(b, h, index.size(1) * t, d)


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
    length ``N * t_k`` so that a single softmax runs over all ``N x M`` slots. The mask (band, heads) is
    cached per shape (:mod:`csan.kernels.masks`); without padding every query has a key (its own
    position), so the call is exactly one ``scaled_dot_product_attention`` with that mask.

    Example:
        >>> q = torch.randn(2, 4, 5, 8)
        >>> dense_local_attention(q, q, q, window=3, head_window=3).shape
        torch.Size([2, 4, 5, 8])
    """
    h, t_q = q.shape[1:3]
    t_k = k.size(2)
    allowed = masks.dense_mask(
        t_q,
        t_k,
        window=window,
        causal=causal,
        heads=h,
        head_window=head_window,
        head_boundary=head_boundary,
        device=q.device,
    )  # (1, 1 or h, t_q, N*t_k)
    if head_window > 1:
        index, _ = masks.head_neighbours(h, head_window, head_boundary, q.device)
        k, v = gather_heads(k, index), gather_heads(v, index)  # (b, h, N*t_k, d_h)
    if key_padding_mask is None:
        return sdpa(q, k, v, attn_mask=allowed, dropout_p=dropout_p)
    keys = ~key_padding_mask[:, None, None, None, :]  # (b, 1, 1, 1, t_k): the same in every slot
    allowed = allowed.view(1, -1, t_q, head_window, t_k) & keys  # (b, 1 or h, t_q, N, t_k)
    return masked_attention(q, k, v, allowed.flatten(3), dropout_p=dropout_p)
