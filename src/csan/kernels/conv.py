"""A convolution over time as one matrix product, for inputs laid out (batch, time, channels).

:class:`TimeConv1d` is ``nn.Conv1d`` (same parameters, same checkpoint keys, same zero padding) for a
time-major input; :func:`conv_over_time` is the arithmetic, on an input already padded.

Notation: x (batch, t_in, c_in), already padded as the caller wants; ``weight`` (c_out, c_in, k), an
``nn.Conv1d``'s weight; dilation r. The output has ``t = t_in - r (k - 1)`` positions:

    y[b, τ, o] = bias[o] + Σ_j Σ_i weight[o, i, j] · x[b, τ + j r, i]          (j < k, i < c_in)

which is ``F.conv1d(x.transpose(1, 2), weight, bias, dilation=r).transpose(1, 2)``, computed as the k
shifted views of x side by side, (batch, t, k c_in), times the weight laid out (c_out, k c_in).

Why not ``F.conv1d``: under ``torch.compile(dynamic=True)`` inductor's CPU convolution specialises the
graph on the sequence length (torch 2.13), so every new batch width compiles again until dynamo's
recompile limit sends the rest of a training run to eager mode (and inside the whole Transformer it can
fail to lower at all). Slices, a concatenation and a matrix product stay symbolic in the length, keep
the time-major layout the models use (no transposes), and take the same bf16 matrix units as the rest
of the model under autocast.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["SeparableTimeConv1d", "TimeConv1d", "conv_over_time"]


def conv_over_time(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, *, dilation: int = 1
) -> Tensor:
    """``Conv1d`` over the time axis of a time-major input, without padding (pad ``x`` first).

    Args:
        x: (batch, t_in, c_in).
        weight: (c_out, c_in, k), as in ``nn.Conv1d``.
        bias: (c_out,) or None.
        dilation: spacing r of the k taps; ``t_in >= r (k - 1) + 1``.

    Returns:
        (batch, t_in - r (k - 1), c_out).

    Example:
        >>> import torch
        >>> conv = torch.nn.Conv1d(4, 6, 3, dilation=2)
        >>> x = torch.randn(2, 9, 4)
        >>> y = conv_over_time(x, conv.weight, conv.bias, dilation=2)
        >>> y.shape
        torch.Size([2, 5, 6])
        >>> torch.allclose(y, conv(x.transpose(1, 2)).transpose(1, 2), atol=1e-6)
        True
    """
    c_out, c_in, k = weight.shape
    if x.size(-1) != c_in:
        raise ValueError(f"x has {x.size(-1)} channels, the weight expects {c_in}")
    if k == 1:
        return F.linear(x, weight[:, :, 0], bias)
    t = x.size(1) - dilation * (k - 1)
    columns = [x[:, j * dilation : j * dilation + t] for j in range(k)]  # k x (batch, t, c_in)
    flat = weight.permute(0, 2, 1).reshape(c_out, k * c_in)  # [o, j * c_in + i] = weight[o, i, j]
    return F.linear(torch.cat(columns, dim=-1), flat, bias)  # (batch, t, k c_in) @ flat^T


class TimeConv1d(nn.Conv1d):
    """``nn.Conv1d`` applied to a time-major input: (batch, time, c_in) -> (batch, time', c_out).

    The same parameters (``weight``, ``bias``) and the same ``padding`` zeros on both ends of the time
    axis as ``nn.Conv1d``, computed by :func:`conv_over_time`. Stride 1, one group, integer padding.

    Example:
        >>> import torch
        >>> conv = TimeConv1d(4, 6, 3, padding=1)
        >>> x = torch.randn(2, 9, 4)
        >>> conv(x).shape
        torch.Size([2, 9, 6])
        >>> plain = torch.nn.Conv1d(4, 6, 3, padding=1)
        >>> _ = plain.load_state_dict(conv.state_dict())
        >>> torch.allclose(conv(x), plain(x.transpose(1, 2)).transpose(1, 2), atol=1e-6)
        True
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # nn.Conv1d's arguments
        super().__init__(*args, **kwargs)
        if isinstance(self.padding, str) or self.padding_mode != "zeros":
            raise ValueError(f"TimeConv1d pads with zeros by an integer, got {self.padding!r}")
        if self.stride != (1,) or self.groups != 1:
            raise ValueError("TimeConv1d has stride 1 and one group")

    def forward(self, x: Tensor) -> Tensor:
        pad = self.padding[0]
        if pad:
            x = F.pad(x, (0, 0, pad, pad))  # zeros before the first and after the last position
        return conv_over_time(x, self.weight, self.bias, dilation=self.dilation[0])


class SeparableTimeConv1d(nn.Module):
    """A depthwise-separable convolution over time (QANet's form), time-major: (batch, t, c) -> same.

    A depthwise convolution (one width-k filter per channel, no bias, "same" zero padding), then a
    pointwise ``nn.Linear(channels, channels)``:

        u[b, τ, i] = Σ_j depthwise[i, 0, j] · x[b, τ + j - k // 2, i]   (zeros outside 0 <= τ + j - k // 2 < t)
        y[b, τ, :] = pointwise(u[b, τ, :])

    ``channels (k + channels + 1)`` parameters and ``k c + c^2`` multiply-adds a position, against
    ``k c^2`` for :class:`TimeConv1d` (c -> c): about a third of the work at k = 3. ``depthwise`` has the
    layout of an ``nn.Conv1d(c, c, k, groups=c, bias=False)``'s weight; the depthwise part is k shifted
    multiply-adds (no convolution op: they stay symbolic in the length under ``torch.compile``).

    Example:
        >>> import torch
        >>> conv = SeparableTimeConv1d(4, 3)
        >>> x = torch.randn(2, 9, 4)
        >>> y = conv(x)
        >>> y.shape
        torch.Size([2, 9, 4])
        >>> depth = torch.nn.Conv1d(4, 4, 3, padding=1, groups=4, bias=False)
        >>> _ = depth.weight.data.copy_(conv.depthwise)
        >>> ref = conv.pointwise(depth(x.transpose(1, 2)).transpose(1, 2))
        >>> torch.allclose(y, ref, atol=1e-6)
        True
    """

    def __init__(self, channels: int, kernel: int) -> None:
        super().__init__()
        if kernel < 1 or kernel % 2 == 0:
            raise ValueError(f"kernel must be a positive odd integer, got {kernel!r}")
        self.kernel = kernel
        self.depthwise = nn.Parameter(torch.empty(channels, 1, kernel))
        nn.init.kaiming_uniform_(self.depthwise, a=5**0.5)  # nn.Conv1d's own initialisation
        self.pointwise = nn.Linear(channels, channels)

    def extra_repr(self) -> str:
        return f"channels={self.depthwise.size(0)}, kernel={self.kernel}"

    def forward(self, x: Tensor) -> Tensor:
        k, t = self.kernel, x.size(1)
        w = self.depthwise[:, 0, :]  # (c, k)
        if k == 1:
            return self.pointwise(x * w[:, 0])
        xp = F.pad(x, (0, 0, k // 2, k // 2))  # zeros before the first and after the last position
        u = xp[:, 0:t] * w[:, 0]
        for j in range(1, k):
            u = u + xp[:, j : j + t] * w[:, j]
        return self.pointwise(u)
