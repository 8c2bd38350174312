"""Block self-attention (after Shen et al. 2018b, Bi-BloSAN), the BLOCK baseline.

Notation: x (batch, time, d_model); blocks of ``b`` consecutive tokens (the last block is completed with
padding); ``blk(i)`` the block of token ``i``.

1. Intra-block: multi-head attention with the layer's Q/K/V projections, keys of the same block only
   (never padding): ``u_i`` (d_model, heads concatenated).
2. Summary of block ``k``: ``s_k`` = mean of ``u_i`` over the non-padding tokens of the block.
3. Inter-block: multi-head attention among the summaries with its own Q/K/V projections (``inter_qkv``),
   blocks made only of padding are not keys: ``o_k``.
4. Fusion: ``g_i = sigmoid(W_g [u_i; o_blk(i)] + b_g)`` (d_model gates),
   ``out_i = W_o (g_i * u_i + (1 - g_i) * o_blk(i))``.

Choices where SPEC is silent: Bi-BloSAN's forward/backward (directional) masks and its source2token
summaries are not used: SPEC asks for plain intra-block attention and a mean summary. Encoder only.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from csan.attention.base import SelfAttention, merge_heads, split_heads
from csan.attention.registry import register
from csan.functional import masked_attention, masked_softmax

__all__ = ["BlockSelfAttention"]


@register("block")
class BlockSelfAttention(SelfAttention):
    """Intra-block attention, attention among block means, and a learned gate to fuse the two.

    Options:
        block_size: tokens per block, >= 1 (default 4).

    Example:
        >>> import torch
        >>> attn = BlockSelfAttention(d_model=8, heads=2, block_size=3)
        >>> attn(torch.randn(2, 7, 8)).shape
        torch.Size([2, 7, 8])
    """

    supports_causal: ClassVar[bool] = False

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        block_size: int = 4,
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
        self.block_size = block_size
        self.inter_qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.gate = nn.Linear(2 * d_model, d_model, bias=bias)
        nn.init.xavier_uniform_(self.inter_qkv.weight, gain=1 / 2**0.5)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, block_size={self.block_size}"

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """The intra-block softmax weights (step 1) as (batch, heads, time, time), no dropout.

        Zero outside each token's own block; the attention among block summaries (step 3) is over
        blocks, not tokens, and is not part of this map.
        """
        q, k, _ = self.project(x)  # (batch, heads, time, d_h)
        block = torch.arange(x.size(1), device=x.device) // self.block_size  # blk(i), (time,)
        same = block[:, None] == block[None, :]  # (time, time)
        allowed = same if key_padding_mask is None else same & ~key_padding_mask[:, None, None, :]
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
        b, t, d = x.shape
        size = self.block_size
        blocks = -(-t // size)
        extra = blocks * size - t
        padding = key_padding_mask
        if padding is None:
            padding = torch.zeros(b, t, dtype=torch.bool, device=x.device)
        x = F.pad(x, (0, 0, 0, extra))  # (batch, blocks*size, d_model)
        padding = F.pad(padding, (0, extra), value=True).view(b, blocks, size)

        q, k, v = self.project(x)  # (batch, heads, blocks*size, d_h)
        q, k, v = (z.unflatten(2, (blocks, size)) for z in (q, k, v))  # (b, h, blocks, size, d_h)
        keys = ~padding[:, None, :, None, :]  # (batch, 1, blocks, 1, size)
        intra = masked_attention(q, k, v, keys, dropout_p=self.attn_dropout)
        intra = merge_heads(intra.flatten(2, 3))  # (batch, blocks*size, d_model)

        real = (~padding).to(x.dtype)[..., None]  # (batch, blocks, size, 1)
        summary = (intra.view(b, blocks, size, d) * real).sum(2) / real.sum(2).clamp_min(1.0)
        qs, ks, vs = (split_heads(z, self.heads) for z in self.inter_qkv(summary).chunk(3, dim=-1))
        block_keys = ~padding.all(-1)[:, None, None, :]  # (batch, 1, 1, blocks)
        inter = masked_attention(qs, ks, vs, block_keys, dropout_p=self.attn_dropout)
        inter = merge_heads(inter).repeat_interleave(size, dim=1)  # (batch, blocks*size, d_model)

        gate = torch.sigmoid(self.gate(torch.cat([intra, inter], dim=-1)))
        fused = gate * intra + (1 - gate) * inter
        return self.out_proj(fused[:, :t])
