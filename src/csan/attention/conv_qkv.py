"""Convolutional Q/K/V projections ("Conv Transformer"): inception-style 1-D convolutions over time.

Notation: x (batch, time, d_model). A kernel spec is ``w`` or ``w d r`` (width ``w``, dilation ``r``, e.g.
``"3d2"``), spanning ``s = r (w - 1)`` positions. For each of Q, K, V the d_model output channels are split
over the specs (evenly; when they do not divide, the first specs get one channel more), each spec is a
``Conv1d(d_model -> its channels, w, dilation=r)`` over all d_model input channels, and the outputs are
concatenated. These convolutions replace the linear Q/K/V projections; the output projection stays linear.

- Symmetric (encoder self-attention, encoder-side keys/values): ``s/2`` zeros on each side, padding
  positions zeroed first, so real tokens never read padding. Widths must be odd.
- Causal (decoder self-attention, decoder-side queries): ``s`` zeros on the left only, no position reads
  a later token. With ``state`` the last ``max s`` inputs are kept (``"conv"``), so incremental decoding
  equals the full pass.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import Tensor, nn

from csan.attention.base import SelfAttention, merge_heads, split_heads
from csan.attention.registry import register, register_cross
from csan.attention.vanilla import CrossAttention, append_state
from csan.functional import attention_mask, masked_attention
from csan.kernels.conv import TimeConv1d

__all__ = ["ConvQKVCrossAttention", "ConvQKVSelfAttention", "InceptionConv", "parse_kernels"]

_SPEC = re.compile(r"^(\d+)(?:d(\d+))?$")


def parse_kernels(kernels: str) -> list[tuple[int, int]]:
    """``"1,3,5,7,3d2"`` -> ``[(1, 1), (3, 1), (5, 1), (7, 1), (3, 2)]`` as (width, dilation) pairs.

    Example:
        >>> parse_kernels("1, 3d2")
        [(1, 1), (3, 2)]
    """
    specs = []
    for item in str(kernels).split(","):
        match = _SPEC.match(item.strip())
        if match is None or int(match.group(1)) < 1 or int(match.group(2) or 1) < 1:
            raise ValueError(
                f"bad kernel spec {item.strip()!r} in kernels={kernels!r}; expected widths like "
                "'3' or '3d2' (width 3, dilation 2), comma-separated"
            )
        specs.append((int(match.group(1)), int(match.group(2) or 1)))
    return specs


class InceptionConv(nn.Module):
    """Parallel 1-D convolutions of several (width, dilation) specs, outputs concatenated on channels.

    ``forward(x, left=None)``: x (batch, time, d_in) -> (batch, time, d_out). Causal convolutions read
    ``left`` (batch, reach, d_in) as the positions before ``x`` (zeros when None); ``reach`` = max span.

    Example:
        >>> conv = InceptionConv(8, 8, [(1, 1), (3, 2)], causal=True)
        >>> conv(torch.randn(2, 5, 8)).shape, conv.reach
        (torch.Size([2, 5, 8]), 4)
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        specs: list[tuple[int, int]],
        *,
        causal: bool,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if len(specs) > d_out:
            raise ValueError(f"{len(specs)} kernel specs cannot share {d_out} output channels")
        if not causal and any(w % 2 == 0 for w, _ in specs):
            raise ValueError(f"symmetric convolutions need odd widths, got {specs}")
        base, extra = divmod(d_out, len(specs))
        channels = [base + (i < extra) for i in range(len(specs))]
        self.specs, self.causal = list(specs), causal
        self.spans = [r * (w - 1) for w, r in specs]
        self.reach = max(self.spans)
        self.convs = nn.ModuleList(
            # symmetric: "same" zero padding over time; causal: forward cuts the left context from x
            TimeConv1d(d_in, c, w, dilation=r, bias=bias, padding=0 if causal else span // 2)
            for (w, r), c, span in zip(specs, channels, self.spans)
        )

    def forward(self, x: Tensor, left: Tensor | None = None) -> Tensor:
        t = x.size(1)
        if self.causal:
            if left is None:
                left = x.new_zeros(x.size(0), self.reach, x.size(2))
            x = torch.cat([left, x], dim=1)  # (batch, reach + time, d_in)
        outs = []
        for conv, span in zip(self.convs, self.spans):
            # causal: from the span positions before the first output
            outs.append(conv(x[:, x.size(1) - t - span :]) if self.causal else conv(x))
        return torch.cat(outs, dim=-1)  # (batch, time, d_out)


def _left_context(x: Tensor, state: dict[str, Any] | None, key: str, reach: int) -> Tensor | None:
    """The ``reach`` inputs before ``x`` kept in ``state[key]`` (zeros at the start; None without state).

    Stores the last ``reach`` inputs, ``x`` included, for the next step.
    """
    if state is None:
        return None
    left = state.get(key)
    if left is None:
        left = x.new_zeros(x.size(0), reach, x.size(2))  # the causal zero padding
    inputs = torch.cat([left, x], dim=1)  # (batch, reach + new, d_model)
    state[key] = inputs[:, inputs.size(1) - reach :]
    return left


@register("conv_qkv")
class ConvQKVSelfAttention(SelfAttention):
    """Self-attention with Q, K, V from inception convolutions over time (causal in a decoder).

    Options:
        kernels: comma-separated specs ``w`` or ``wdr`` (default ``"1,3,5,7"``; the dilated preset is
            ``"1,3,5,7,3d2,5d2,7d2"``).

    Example:
        >>> import torch
        >>> attn = ConvQKVSelfAttention(d_model=8, heads=2, kernels="1,3d2")
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
        kernels: str = "1,3,5,7",
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        specs = parse_kernels(kernels)
        self.kernels = kernels
        del self.qkv  # the convolutions replace the linear Q/K/V projection
        self.q_conv, self.k_conv, self.v_conv = (
            InceptionConv(d_model, d_model, specs, causal=causal, bias=bias) for _ in range(3)
        )

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, kernels={self.kernels!r}"

    def project(
        self, x: Tensor, state: dict[str, Any] | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """x (batch, time, d_model) -> q, k, v (batch, heads, time, d_h); causal ones read ``state``."""
        left = _left_context(x, state, "conv", self.q_conv.reach)  # same specs: one buffer for all
        q, k, v = (conv(x, left) for conv in (self.q_conv, self.k_conv, self.v_conv))
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, time, time) between the convolved queries and keys."""
        if key_padding_mask is not None:
            x = x.masked_fill(key_padding_mask[..., None], 0.0)  # as forward: padding reads as zero
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
        self.check_state(state)
        if state is not None:
            key_padding_mask = None  # decoded positions are never padding
        if key_padding_mask is not None:
            x = x.masked_fill(key_padding_mask[..., None], 0.0)  # padding reads as the zero padding
        q, k, v = self.project(x, state)  # (batch, heads, time, d_h)
        if state is not None:
            k, v = append_state(state, k, v)
        allowed = self.allowed_keys(q, k, key_padding_mask)
        out = masked_attention(q, k, v, allowed, dropout_p=self.attn_dropout)
        return self.out_proj(merge_heads(out))


@register_cross("conv_qkv")
class ConvQKVCrossAttention(CrossAttention):
    """Encoder-decoder attention with convolutional projections.

    Queries: causal inception convolution over the decoder states (with ``state``, the last inputs are
    kept so incremental decoding equals the full pass). Keys/values: symmetric inception convolutions over
    the encoder memory, padding zeroed first; with ``state`` computed once and cached.

    Example:
        >>> import torch
        >>> attn = ConvQKVCrossAttention(d_model=8, heads=2, kernels="1,3")
        >>> memory, mask = torch.randn(1, 4, 8), torch.zeros(1, 4, dtype=torch.bool)
        >>> attn(torch.randn(1, 3, 8), memory, mask).shape
        torch.Size([1, 3, 8])
    """

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        dropout: float = 0.0,
        kernels: str = "1,3,5,7",
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, dropout=dropout, bias=bias)
        specs = parse_kernels(kernels)
        self.kernels = kernels
        del self.q_proj, self.kv_proj  # replaced by the convolutions
        self.q_conv = InceptionConv(d_model, d_model, specs, causal=True, bias=bias)
        self.k_conv = InceptionConv(d_model, d_model, specs, causal=False, bias=bias)
        self.v_conv = InceptionConv(d_model, d_model, specs, causal=False, bias=bias)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, heads={self.heads}, kernels={self.kernels!r}"

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        memory_padding_mask: Tensor | None,
        *,
        state: dict[str, Any] | None = None,
    ) -> Tensor:
        left = _left_context(x, state, "conv", self.q_conv.reach)
        q = split_heads(self.q_conv(x, left), self.heads)  # (batch, heads, tgt, d_h)
        if state is not None and "k" in state:
            k, v = state["k"], state["v"]
        else:
            if memory_padding_mask is not None:
                memory = memory.masked_fill(memory_padding_mask[..., None], 0.0)
            k = split_heads(self.k_conv(memory), self.heads)  # (batch, heads, src, d_h)
            v = split_heads(self.v_conv(memory), self.heads)
            if state is not None:
                state["k"], state["v"] = k, v
        allowed = attention_mask(
            q.size(2), k.size(2), key_padding_mask=memory_padding_mask, device=x.device
        )
        dropout = self.dropout if self.training else 0.0
        out = masked_attention(q, k, v, allowed, dropout_p=dropout)
        return self.out_proj(merge_heads(out))
