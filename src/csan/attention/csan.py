"""Convolutional self-attention (Yang et al., NAACL 2019): 1D-CSAN and 2D-CSAN.

Notation: x (batch, time, d_model); q, k, v (batch, heads, time, d_h); window ``M`` (odd, ``m = (M-1)/2``),
head window ``N`` (odd, ``n = (N-1)/2``).

- ``csan1d``: query ``i`` attends to keys ``|i - j| <= m`` of its own head (causal: ``i - M < j <= i``).
- ``csan2d``: query ``i`` of head ``h`` attends to the keys of heads ``h-n .. h+n`` in the same window, one
  softmax over all ``N x M`` slots, output in head ``h``'s subspace.

Both reuse the vanilla projections: they add exactly zero parameters. With ``state`` (incremental decoding,
``causal=True`` only) the cache keeps just the last ``M - 1`` keys/values, all a new query can reach.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from csan.attention.base import SelfAttention, merge_heads
from csan.attention.registry import register
from csan.functional import BACKENDS, check_local_options, local_attention, masked_softmax
from csan.kernels.cache import append_window
from csan.kernels.dense import head_neighbours, local_band

__all__ = ["Csan1dSelfAttention", "Csan2dSelfAttention"]


class _WindowedSelfAttention(SelfAttention):
    """Shared body of 1D/2D-CSAN: the vanilla projections, :func:`local_attention`, a bounded cache."""

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool,
        dropout: float,
        window: int,
        head_window: int,
        head_boundary: str,
        backend: str,
        bias: bool,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        check_local_options(
            window=window, head_window=head_window, heads=heads, head_boundary=head_boundary
        )
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
        self.window, self.head_window = window, head_window
        self.head_boundary, self.backend = head_boundary, backend

    def extra_repr(self) -> str:
        windows = f"window={self.window}"
        if self.head_window > 1:
            windows += f", head_window={self.head_window}, head_boundary={self.head_boundary}"
        return f"{super().extra_repr()}, {windows}"

    def attention_weights(
        self, x: Tensor, key_padding_mask: Tensor | None = None, *, per_key_head: bool = False
    ) -> Tensor:
        """Softmax weights of each (head, query) over its window, as :meth:`forward` uses them.

        Returns (batch, heads, time, time), the weight on each key *position* summed over the key heads
        of the head window; with ``per_key_head=True`` (batch, heads, time, heads, time): query head,
        query, key head, key (zero outside the N x M slots). Written from the definition (O(H^2 T^2)):
        for inspection and plots, not for training. No dropout.
        """
        q, k, _ = self.project(x)  # (batch, heads, time, d_h)
        b, h, t, d_h = q.shape
        band = local_band(t, t, window=self.window, causal=self.causal, device=x.device)  # (t, t)
        index, exists = head_neighbours(h, self.head_window, self.head_boundary, x.device)
        reads = torch.zeros(h, h, dtype=torch.bool, device=x.device)  # (query head, key head)
        rows = torch.arange(h, device=x.device)[:, None].expand_as(index)
        reads[rows[exists], index[exists]] = True
        allowed = reads[None, :, None, :, None] & band[None, None, :, None, :]  # (1, h, t, h, t)
        if key_padding_mask is not None:
            allowed = allowed & ~key_padding_mask[:, None, None, None, :]
        allowed = allowed.expand(b, h, t, h, t).reshape(b, h, t, h * t)  # one softmax axis
        logits = torch.einsum("bhid,bgjd->bhigj", q, k).reshape(b, h, t, h * t) / d_h**0.5
        weights = masked_softmax(logits, allowed).reshape(b, h, t, h, t)
        return weights if per_key_head else weights.sum(dim=3)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        *,
        state: dict[str, Any] | None = None,
        history: list[Tensor] | None = None,
    ) -> Tensor:
        self.check_state(state)
        q, k, v = self.project(x)  # (batch, heads, time, d_h)
        if state is not None:
            # Cached decoding: q holds the newest positions; decoded positions are never padding.
            k, v = append_window(state, k, v, window=self.window)
            key_padding_mask = None
        out = local_attention(
            q,
            k,
            v,
            window=self.window,
            head_window=self.head_window,
            key_padding_mask=key_padding_mask,
            causal=self.causal,
            head_boundary=self.head_boundary,
            dropout_p=self.attn_dropout,
            backend=self.backend,
        )
        return self.out_proj(merge_heads(out))


@register("csan1d")
class Csan1dSelfAttention(_WindowedSelfAttention):
    """1D-CSAN: self-attention restricted to a window of ``window`` positions.

    Options:
        window: M, odd >= 1 (default 11). ``M >= 2 * length - 1`` equals vanilla attention.
        backend: kernel for :func:`csan.functional.local_attention`, one of its ``BACKENDS``
            (``"auto"``, ``"dense"``, ``"reference"``, ``"blocked"``, ``"flex"`` on CUDA).

    Example:
        >>> import torch
        >>> attn = Csan1dSelfAttention(d_model=8, heads=2, window=3)
        >>> attn(torch.randn(2, 6, 8), torch.zeros(2, 6, dtype=torch.bool)).shape
        torch.Size([2, 6, 8])
    """

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        window: int = 11,
        backend: str = "auto",
        bias: bool = True,
    ) -> None:
        super().__init__(
            d_model=d_model,
            heads=heads,
            causal=causal,
            dropout=dropout,
            window=window,
            head_window=1,
            head_boundary="wrap",
            backend=backend,
            bias=bias,
        )


@register("csan2d")
class Csan2dSelfAttention(_WindowedSelfAttention):
    """2D-CSAN: a window over positions and over neighbouring heads, one softmax over ``N x M`` slots.

    Options:
        window: M, odd >= 1 (default 11).
        head_window: N, odd, ``1 <= N <= heads`` (default 3); 1 is exactly 1D-CSAN.
        head_boundary: ``"wrap"`` (heads modulo H, every head sees N heads; default) or ``"clip"`` (heads
            past the edge do not exist). Keys and values always come from the same (head, position) slot.
        backend: as for ``csan1d``.

    Example:
        >>> import torch
        >>> attn = Csan2dSelfAttention(d_model=8, heads=4, window=3, head_window=3)
        >>> attn(torch.randn(2, 6, 8)).shape
        torch.Size([2, 6, 8])
    """

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        window: int = 11,
        head_window: int = 3,
        head_boundary: str = "wrap",
        backend: str = "auto",
        bias: bool = True,
    ) -> None:
        super().__init__(
            d_model=d_model,
            heads=heads,
            causal=causal,
            dropout=dropout,
            window=window,
            head_window=head_window,
            head_boundary=head_boundary,
            backend=backend,
            bias=bias,
        )
