"""Convolutions before self-attention (after Yu et al. 2018, QANet), the CNNs baseline.

Notation: x (batch, time, d_model). ``L = conv_layers`` residual convolution sublayers, QANet order
(layer norm, convolution, ReLU, residual), padding positions zeroed before every convolution:

    c^0 = x,   c^l = c^(l-1) + ReLU(Conv_l(zero_pad(LN_l(c^(l-1)))))   (kernel k, "same" zero padding)
    y   = MultiHeadAttention(c^L)   (vanilla, padding keys masked)

The module returns ``y + (c^L - x)``: the model adds its input ``x`` back (its residual connection), so the
layer's stream becomes ``c^L + y``, which makes the convolutions true residual sublayers before the
attention sublayer as in QANet. Choices where SPEC is silent: full convolutions ``d_model -> d_model`` by
default, QANet's own depthwise-separable form with ``separable=True`` (a third of the multiply-adds at
kernel 3); layer norm before each convolution (QANet's pre-norm blocks). Encoder only.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch.nn.functional as F
from torch import Tensor, nn

from csan.attention.base import SelfAttention, merge_heads
from csan.attention.registry import register
from csan.functional import attention_mask, masked_attention
from csan.kernels.conv import SeparableTimeConv1d, TimeConv1d

__all__ = ["ConvThenAttention"]


@register("cnn")
class ConvThenAttention(SelfAttention):
    """A stack of residual convolution sublayers, then vanilla self-attention.

    Options:
        conv_layers: number of convolution sublayers, >= 1 (default 2).
        kernel: odd convolution width, >= 1 (default 3).
        separable: depthwise-separable convolutions (QANet's form: a width-k filter per channel, then
            a pointwise ``d_model -> d_model`` product) instead of full ones (default False).

    Example:
        >>> import torch
        >>> attn = ConvThenAttention(d_model=8, heads=2, conv_layers=1, kernel=3)
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
        conv_layers: int = 2,
        kernel: int = 3,
        separable: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        if isinstance(conv_layers, bool) or not isinstance(conv_layers, int) or conv_layers < 1:
            raise ValueError(f"conv_layers must be an integer >= 1, got {conv_layers!r}")
        if isinstance(kernel, bool) or not isinstance(kernel, int) or kernel < 1 or kernel % 2 == 0:
            raise ValueError(f"kernel must be a positive odd integer, got {kernel!r}")
        if not isinstance(separable, bool):
            raise ValueError(f"separable must be true or false, got {separable!r}")
        self.kernel = kernel
        self.separable = separable
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(conv_layers))
        self.convs = nn.ModuleList(
            SeparableTimeConv1d(d_model, kernel)
            if separable
            else TimeConv1d(d_model, d_model, kernel, padding=kernel // 2)
            for _ in range(conv_layers)
        )

    def extra_repr(self) -> str:
        extra = ", separable=True" if self.separable else ""
        return f"{super().extra_repr()}, conv_layers={len(self.convs)}, kernel={self.kernel}{extra}"

    def convolve(self, x: Tensor, key_padding_mask: Tensor | None) -> Tensor:
        """The residual convolution stack: (batch, time, d_model) -> same."""
        for norm, conv in zip(self.norms, self.convs):
            h = norm(x)
            if key_padding_mask is not None:
                h = h.masked_fill(key_padding_mask[..., None], 0.0)
            x = x + F.relu(conv(h))  # "same" zero padding over time
        return x

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, time, time) of the attention over the convolved ``c^L``."""
        q, k, _ = self.project(self.convolve(x, key_padding_mask))  # (batch, heads, time, d_h)
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
        c = self.convolve(x, key_padding_mask)
        q, k, v = self.project(c)  # (batch, heads, time, d_h)
        t = x.size(1)
        allowed = attention_mask(t, t, key_padding_mask=key_padding_mask, device=x.device)
        out = masked_attention(q, k, v, allowed, dropout_p=self.attn_dropout)
        return self.out_proj(merge_heads(out)) + (c - x)
