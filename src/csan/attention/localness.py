"""Gaussian localness (Yang et al., EMNLP 2018) and its two ablations: ``neighbor``, ``local_hard``, ``local_soft``.

Notation: x (batch, time, d_model); ``q_i`` the projected query of position ``i`` at full width d_model
(before the head split); ``I`` the sentence length (non-padding tokens); one centre/window per head.

    G_ij = -(j - P_i)^2 / (2 sigma_i^2),  sigma_i = D_i / 2,   a_ij = softmax_j(e_ij + G_ij)
    P_i = (I - 1) * sigmoid(U_p^T tanh(W_p q_i)),   D_i = I * sigmoid(U_d^T tanh(W_p q_i))

``W_p`` (d_model x d_model) is shared by both predictors; ``U_p``, ``U_d`` (d_model x heads) give one value
per head. No biases, as in the formulas. Variants:

- ``neighbor``: ``P_i = i`` fixed, ``D_i`` predicted (``U_p`` absent).
- ``local_hard``: ``P_i`` predicted, ``D`` fixed (option ``window``, default 10; ``U_d`` absent).
- ``local_soft``: both predicted.

Choices where the paper is silent: the bias is computed in float32 (or wider) and ``sigma`` is floored at
``MIN_SIGMA`` so that the bias stays finite (the floor is reached only when the sigmoid is below ~1e-6/I).
Encoder only (``supports_causal = False``): ``I`` is the whole sentence.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from csan.attention.base import SelfAttention, merge_heads, split_heads
from csan.attention.registry import register
from csan.functional import attention_mask, masked_softmax

__all__ = [
    "MIN_SIGMA",
    "LocalHardSelfAttention",
    "LocalSoftSelfAttention",
    "NeighborSelfAttention",
    "gaussian_bias",
]

MIN_SIGMA = 1e-6


def gaussian_bias(centre: Tensor, width: Tensor) -> Tensor:
    """``G_ij = -(j - P_i)^2 / (2 (D_i/2)^2)``, computed in float32 at least.

    Args:
        centre: P, (batch, time, heads); width: D, broadcastable to it.

    Returns:
        (batch, heads, time, time), float32 or wider.

    Example:
        >>> gaussian_bias(torch.zeros(1, 2, 1), torch.full((1, 2, 1), 2.0))[0, 0, 0].tolist()
        [-0.0, -0.5]
    """
    t = centre.size(1)
    dtype = torch.promote_types(centre.dtype, torch.float32)  # at least float32
    centre = centre.to(dtype).transpose(1, 2)[..., None]  # (batch, heads, time, 1)
    sigma = (width.to(dtype) / 2).clamp_min(MIN_SIGMA).transpose(1, 2)[..., None]  # like centre
    j = torch.arange(t, device=centre.device, dtype=dtype)  # (time,) key positions
    return -((j - centre) ** 2) / (2 * sigma**2)


class _GaussianLocalness(SelfAttention):
    """Shared body: predictors from the full projected query, Gaussian bias, masked softmax."""

    supports_causal: ClassVar[bool] = False
    predicts_centre: ClassVar[bool] = True
    predicts_window: ClassVar[bool] = True

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        self.w_p = nn.Linear(d_model, d_model, bias=False)
        self.u_p = nn.Linear(d_model, heads, bias=False) if self.predicts_centre else None
        self.u_d = nn.Linear(d_model, heads, bias=False) if self.predicts_window else None
        self.fixed_window: float | None = None

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, time, time) with the Gaussian bias, no dropout (float32)."""
        return self._weights_and_values(x, key_padding_mask, dropout_p=0.0)[0]

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        *,
        state: dict[str, Any] | None = None,
        history: list[Tensor] | None = None,
    ) -> Tensor:
        self.check_state(state)
        weights, v = self._weights_and_values(x, key_padding_mask, dropout_p=self.attn_dropout)
        return self.out_proj(merge_heads(weights.to(v.dtype) @ v))

    def _weights_and_values(
        self, x: Tensor, key_padding_mask: Tensor | None, *, dropout_p: float
    ) -> tuple[Tensor, Tensor]:
        """``a_ij = softmax_j(e_ij + G_ij)`` (batch, heads, time, time) and v (batch, heads, time, d_h)."""
        b, t, _ = x.shape
        q_full, k_full, v_full = self.qkv(x).chunk(3, dim=-1)  # (batch, time, d_model) each
        hidden = torch.tanh(self.w_p(q_full))  # (batch, time, d_model)
        if key_padding_mask is None:
            length = x.new_full((b, 1, 1), float(t))
        else:
            length = (~key_padding_mask).sum(-1).to(x.dtype)[:, None, None]  # I, (batch, 1, 1)
        if self.u_p is not None:
            centre = (length - 1) * torch.sigmoid(self.u_p(hidden))  # P, (batch, time, heads)
        else:
            centre = torch.arange(t, device=x.device, dtype=x.dtype)[None, :, None].expand(b, t, 1)
        if self.u_d is not None:
            width = length * torch.sigmoid(self.u_d(hidden))  # D, (batch, time, heads)
        else:
            width = x.new_full((1, 1, 1), float(self.fixed_window))
        centre = centre.expand(b, t, self.heads)
        q, k, v = (split_heads(z, self.heads) for z in (q_full, k_full, v_full))  # (b, h, t, d_h)
        scores = q @ k.transpose(-1, -2) / self.head_dim**0.5 + gaussian_bias(centre, width)
        allowed = attention_mask(t, t, key_padding_mask=key_padding_mask, device=x.device)
        return masked_softmax(scores, allowed, dropout_p=dropout_p), v


@register("neighbor")
class NeighborSelfAttention(_GaussianLocalness):
    """NEIGHBOR: Gaussian bias centred on the query itself (``P_i = i``), window ``D_i`` predicted per head.

    Example:
        >>> import torch
        >>> attn = NeighborSelfAttention(d_model=8, heads=2)
        >>> attn(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    predicts_centre: ClassVar[bool] = False


@register("local_hard")
class LocalHardSelfAttention(_GaussianLocalness):
    """LOCAL_HARD: centre ``P_i`` predicted per head, window fixed.

    Options:
        window: D > 0 (default 10); ``sigma = D / 2``.

    Example:
        >>> import torch
        >>> attn = LocalHardSelfAttention(d_model=8, heads=2, window=4)
        >>> attn(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    predicts_window: ClassVar[bool] = False

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        window: float = 10.0,
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        if isinstance(window, bool) or not isinstance(window, int | float) or not window > 0:
            raise ValueError(f"local_hard window D must be a number > 0, got {window!r}")
        self.fixed_window = float(window)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, window={self.fixed_window}"


@register("local_soft")
class LocalSoftSelfAttention(_GaussianLocalness):
    """LOCAL_SOFT: both the centre ``P_i`` and the window ``D_i`` predicted per head.

    Example:
        >>> import torch
        >>> attn = LocalSoftSelfAttention(d_model=8, heads=2)
        >>> attn(torch.randn(2, 5, 8), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])).shape
        torch.Size([2, 5, 8])
    """
