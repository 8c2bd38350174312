"""Argument checks shared by :func:`csan.functional.local_attention` and the public kernels.

Every check raises ``ValueError`` naming the bad value, before any arithmetic.

Example:
    >>> check_local_options(window=11, head_window=5, heads=4)
    Traceback (most recent call last):
    ...
    ValueError: head_window (5) must not exceed the number of heads (4)
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["HEAD_BOUNDARIES", "check_local_attention", "check_local_options"]

HEAD_BOUNDARIES = ("wrap", "clip")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_local_options(
    *, window: int, head_window: int = 1, heads: int | None = None, head_boundary: str = "wrap"
) -> None:
    """Raise ``ValueError`` naming the bad value unless the CSAN window options are valid.

    Example:
        >>> check_local_options(window=4)
        Traceback (most recent call last):
        ...
        ValueError: window must be a positive odd integer, got 4
    """
    if not _is_int(window) or window < 1 or window % 2 == 0:
        raise ValueError(f"window must be a positive odd integer, got {window!r}")
    if not _is_int(head_window) or head_window < 1 or head_window % 2 == 0:
        raise ValueError(f"head_window must be a positive odd integer, got {head_window!r}")
    if heads is not None and head_window > heads:
        raise ValueError(
            f"head_window ({head_window}) must not exceed the number of heads ({heads})"
        )
    if head_boundary not in HEAD_BOUNDARIES:
        raise ValueError(f"head_boundary must be 'wrap' or 'clip', got {head_boundary!r}")


def check_local_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_padding_mask: Tensor | None,
    *,
    window: int,
    head_window: int,
    head_boundary: str,
    dropout_p: float,
    fewer_queries: bool = False,
) -> None:
    """Raise ``ValueError`` unless a local-attention call is valid: the window options (as
    :func:`check_local_options`, heads from ``q``), q, k, v (batch, heads, time, d_h) alike, a matching
    bool mask and ``0 <= dropout_p < 1``.

    ``fewer_queries``: allow fewer query positions than keys (cached causal decoding: the queries are
    the last positions); otherwise the lengths must be equal.

    Example:
        >>> q = torch.zeros(1, 2, 3, 4)
        >>> mask = torch.zeros(1, 4, dtype=torch.bool)
        >>> check_local_attention(
        ...     q, q, q, mask, window=3, head_window=1, head_boundary="wrap", dropout_p=0.0
        ... )
        Traceback (most recent call last):
        ...
        ValueError: key_padding_mask must be bool (batch, time) = (1, 3), got torch.bool (1, 4)
    """
    heads = q.size(1) if q.dim() == 4 else None
    check_local_options(
        window=window, head_window=head_window, heads=heads, head_boundary=head_boundary
    )
    if q.dim() != 4 or k.shape != v.shape or k.dim() != 4:
        raise ValueError(
            "q, k, v must be (batch, heads, time, d_h) with k and v alike, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    t_q, t_k = q.size(2), k.size(2)
    if q.shape[:2] != k.shape[:2] or q.size(3) != k.size(3):
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch, heads or d_h")
    if t_q != t_k and not (fewer_queries and t_q < t_k):
        rule = (
            "more queries than keys"
            if fewer_queries
            else "fewer queries than keys only in causal local_attention (cached decoding)"
        )
        raise ValueError(f"q has {t_q} positions and k {t_k}: {rule}")
    if key_padding_mask is not None and (
        key_padding_mask.dtype != torch.bool or tuple(key_padding_mask.shape) != (k.size(0), t_k)
    ):
        raise ValueError(
            f"key_padding_mask must be bool (batch, time) = {(k.size(0), t_k)}, got "
            f"{key_padding_mask.dtype} {tuple(key_padding_mask.shape)}"
        )
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p!r}")
