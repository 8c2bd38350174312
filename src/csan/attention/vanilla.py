"""Vanilla multi-head attention (Vaswani et al. 2017): every query sees every non-padding key."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from csan.attention.base import SelfAttention, merge_heads, split_heads
from csan.attention.registry import register, register_cross
from csan.kernels.sdpa import sdpa

__all__ = ["CrossAttention", "VanillaSelfAttention", "append_state"]


def append_state(state: dict[str, Any], k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Append this step's keys/values (batch, heads, new, d_h) to the cache and return all of them.

    Example:
        >>> state = {}
        >>> k, v = append_state(state, torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
        >>> k, v = append_state(state, torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
        >>> k.shape, state["v"].shape
        (torch.Size([1, 2, 4, 4]), torch.Size([1, 2, 4, 4]))
    """
    if "k" in state:
        k = torch.cat([state["k"], k], dim=2)
        v = torch.cat([state["v"], v], dim=2)
    state["k"], state["v"] = k, v
    return k, v


@register("vanilla")
class VanillaSelfAttention(SelfAttention):
    """Scaled dot-product self-attention over all keys (causal in a decoder).

    Example:
        >>> import torch
        >>> attn = VanillaSelfAttention(d_model=8, heads=2)
        >>> attn(torch.randn(1, 3, 8)).shape
        torch.Size([1, 3, 8])
    """

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, time, time) over the allowed keys (causal, padding), no dropout."""
        q, k, _ = self.project(x)  # (batch, heads, time, d_h)
        return self.dot_product_weights(q, k, key_padding_mask)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        *,
        state: dict[str, Any] | None = None,
        history: list[Tensor] | None = None,
    ) -> Tensor:
        q, k, v = self.project(x)  # (batch, heads, time, d_h)
        if state is not None:
            # Incremental decoding: x holds the newest positions only; earlier keys come from the cache.
            k, v = append_state(state, k, v)
            mask = None
            if q.size(2) > 1:  # several new positions at once: causal among them
                t_new, t_all = q.size(2), k.size(2)
                mask = torch.ones(t_new, t_all, dtype=torch.bool, device=x.device).tril(
                    t_all - t_new
                )
            out = sdpa(q, k, v, attn_mask=mask)
            return self.out_proj(merge_heads(out))
        if self.causal:
            # Right padding: a real query never reaches a padding key under the causal mask.
            out = sdpa(q, k, v, is_causal=True, dropout_p=self.attn_dropout)
        else:
            mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
            out = sdpa(q, k, v, attn_mask=mask, dropout_p=self.attn_dropout)
        return self.out_proj(merge_heads(out))


@register_cross("vanilla")
class CrossAttention(nn.Module):
    """Encoder-decoder attention: decoder queries, encoder keys/values.

    ``forward(x, memory, memory_padding_mask, *, state=None)``; with ``state`` the projected memory is
    computed once and cached.

    Example:
        >>> import torch
        >>> attn = CrossAttention(d_model=8, heads=2)
        >>> attn(torch.randn(1, 3, 8), torch.randn(1, 4, 8), torch.zeros(1, 4, dtype=torch.bool)).shape
        torch.Size([1, 3, 8])
    """

    def __init__(
        self, *, d_model: int, heads: int, dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        if heads < 1 or d_model % heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by heads ({heads})")
        self.d_model, self.heads, self.dropout = d_model, heads, dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.kv_proj = nn.Linear(d_model, 2 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        for lin in (self.q_proj, self.kv_proj):
            nn.init.xavier_uniform_(lin.weight, gain=1 / 2**0.5)
        nn.init.xavier_uniform_(self.out_proj.weight)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        memory_padding_mask: Tensor | None,
        *,
        state: dict[str, Any] | None = None,
    ) -> Tensor:
        q = split_heads(self.q_proj(x), self.heads)  # (batch, heads, tgt, d_h)
        if state is not None and "k" in state:
            k, v = state["k"], state["v"]
        else:
            k, v = self.kv_proj(memory).chunk(2, dim=-1)
            # (batch, heads, src, d_h)
            k, v = split_heads(k, self.heads), split_heads(v, self.heads)
            if state is not None:
                state["k"], state["v"] = k, v
        mask = None if memory_padding_mask is None else ~memory_padding_mask[:, None, None, :]
        dropout = self.dropout if self.training else 0.0
        out = sdpa(q, k, v, attn_mask=mask, dropout_p=dropout)
        return self.out_proj(merge_heads(out))
