"""Directional self-attention (after Shen et al. 2018a, DiSAN), the BI_DIRECT baseline.

Notation: q, k, v (batch, heads, time, d_h). Heads ``0 .. H/2 - 1`` are forward (query ``i`` reads keys
``j <= i``), heads ``H/2 .. H - 1`` backward (``j >= i``); the diagonal is included in both. No new
parameters. Choices where SPEC is silent: the number of heads must be even (an even split is what "half
the heads" means); DiSAN's fusion gate and multi-dimensional attention are not used. Encoder only: the
backward heads read the future.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from csan.attention.base import SelfAttention, merge_heads
from csan.attention.registry import register
from csan.functional import masked_attention, masked_softmax

__all__ = ["BiDirectionalSelfAttention", "directional_mask"]


def directional_mask(heads: int, time: int, device: torch.device) -> Tensor:
    """(heads, time, time) bool: forward heads see ``j <= i``, backward heads ``j >= i``.

    Example:
        >>> directional_mask(2, 2, torch.device("cpu")).int().tolist()
        [[[1, 0], [1, 1]], [[1, 1], [0, 1]]]
    """
    ones = torch.ones(time, time, dtype=torch.bool, device=device)
    forward = ones.tril()[None].expand(heads // 2, time, time)
    backward = ones.triu()[None].expand(heads - heads // 2, time, time)
    return torch.cat([forward, backward])


@register("bi_direct")
class BiDirectionalSelfAttention(SelfAttention):
    """Half the heads look back (``j <= i``), the other half look ahead (``j >= i``).

    Example:
        >>> import torch
        >>> attn = BiDirectionalSelfAttention(d_model=8, heads=2)
        >>> attn(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    supports_causal: ClassVar[bool] = False

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
        if heads % 2 != 0:
            raise ValueError(
                f"bi_direct splits the heads in two halves: heads must be even, got {heads}"
            )

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, time, time): forward heads ``j <= i``, backward ``j >= i``."""
        q, k, _ = self.project(x)  # (batch, heads, time, d_h)
        allowed = directional_mask(self.heads, x.size(1), x.device)[None]  # (1, heads, time, time)
        if key_padding_mask is not None:
            allowed = allowed & ~key_padding_mask[:, None, None, :]
        return masked_softmax(q @ k.transpose(-1, -2) / self.head_dim**0.5, allowed)

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
        allowed = directional_mask(self.heads, x.size(1), x.device)[None]  # (1, heads, time, time)
        if key_padding_mask is not None:
            allowed = allowed & ~key_padding_mask[:, None, None, :]  # (batch, heads, time, time)
        out = masked_attention(q, k, v, allowed, dropout_p=self.attn_dropout)
        return self.out_proj(merge_heads(out))
