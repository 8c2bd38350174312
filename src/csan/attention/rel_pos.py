"""Relative position representations (Shaw et al. 2018), the REL_POS baseline.

Notation: q, k, v (batch, heads, time, d_h); ``K = max_relative``; ``r_ij = clip(j - i, -K, K)``;
learned ``aK_r``, ``aV_r`` (d_h each, one table shared by all heads and indexed by ``r + K``):

    e_ij = q_i . (k_j + aK_{r_ij}) / sqrt(d_h),   out_i = sum_j a_ij (v_j + aV_{r_ij}).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from csan.attention.base import SelfAttention, merge_heads
from csan.attention.registry import register
from csan.attention.vanilla import append_state
from csan.functional import attention_mask, masked_softmax

__all__ = ["RelativePositionSelfAttention", "relative_buckets"]


def relative_buckets(t_q: int, t_k: int, max_relative: int, device: torch.device) -> Tensor:
    """(t_q, t_k) long: ``clip(j - i, -K, K) + K``; query rows are the last ``t_q`` positions.

    Example:
        >>> relative_buckets(2, 3, 1, torch.device("cpu")).tolist()
        [[0, 1, 2], [0, 0, 1]]
    """
    i = torch.arange(t_k - t_q, t_k, device=device)[:, None]
    j = torch.arange(t_k, device=device)[None, :]
    return (j - i).clamp(-max_relative, max_relative) + max_relative


@register("rel_pos")
class RelativePositionSelfAttention(SelfAttention):
    """Self-attention with clipped relative position embeddings on keys and values.

    Options:
        max_relative: K >= 0 (default 16); distances beyond K share the embedding of +-K.

    Causal use is allowed (the decoder sees ``r <= 0`` only); with ``state`` the cache keeps every key.

    Example:
        >>> import torch
        >>> attn = RelativePositionSelfAttention(d_model=8, heads=2, max_relative=2)
        >>> attn(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        max_relative: int = 16,
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        if isinstance(max_relative, bool) or not isinstance(max_relative, int) or max_relative < 0:
            raise ValueError(f"max_relative must be an integer >= 0, got {max_relative!r}")
        self.max_relative = max_relative
        self.rel_k = nn.Parameter(torch.empty(2 * max_relative + 1, self.head_dim))  # aK, by r + K
        self.rel_v = nn.Parameter(torch.empty(2 * max_relative + 1, self.head_dim))  # aV
        nn.init.xavier_uniform_(self.rel_k)
        nn.init.xavier_uniform_(self.rel_v)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, max_relative={self.max_relative}"

    def relative_scores(self, q: Tensor, t_k: int) -> tuple[Tensor, Tensor]:
        """``q_i . aK_{r_ij}`` (batch, heads, t_q, t_k) and the buckets ``r_ij + K`` it used (same shape)."""
        b, h, t_q, _ = q.shape
        buckets = relative_buckets(t_q, t_k, self.max_relative, q.device)
        buckets = buckets.expand(b, h, t_q, t_k)  # (batch, heads, t_q, t_k)
        # q_i . aK_r for every bucket r, then picked per (i, j): (batch, heads, t_q, 2K+1) -> (.., t_k)
        return (q @ self.rel_k.T).gather(-1, buckets), buckets

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, time, time) with the relative key embeddings, no dropout."""
        q, k, _ = self.project(x)  # (batch, heads, time, d_h)
        rel_scores, _ = self.relative_scores(q, k.size(2))
        return self.dot_product_weights(q, k, key_padding_mask, rel_scores / self.head_dim**0.5)

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
        if state is not None:  # cached decoding: q holds the newest positions, never padding
            k, v = append_state(state, k, v)
            key_padding_mask = None
        b, h, t_q, _ = q.shape
        t_k = k.size(2)
        rel_scores, buckets = self.relative_scores(q, t_k)
        scores = (q @ k.transpose(-1, -2) + rel_scores) / self.head_dim**0.5
        allowed = attention_mask(
            t_q, t_k, key_padding_mask=key_padding_mask, causal=self.causal, device=x.device
        )
        weights = masked_softmax(scores, allowed, dropout_p=self.attn_dropout)
        # sum_j a_ij aV_{r_ij} = (weights summed per bucket) @ aV: (batch, heads, t_q, 2K+1) @ (2K+1, d_h)
        per_bucket = weights.new_zeros(b, h, t_q, self.rel_v.size(0)).scatter_add(
            -1, buckets, weights
        )
        out = weights @ v + per_bucket @ self.rel_v
        return self.out_proj(merge_heads(out))
