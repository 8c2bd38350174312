"""conv_over_time: the convolution of nn.Conv1d, time-major, and one compiled graph for every length."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from csan.attention.cnn import ConvThenAttention
from csan.attention.conv_qkv import InceptionConv
from csan.kernels.conv import SeparableTimeConv1d, TimeConv1d, conv_over_time
from csan.models.convs2s import EncoderBlock


@pytest.mark.parametrize(
    ("c_in", "c_out", "k", "dilation", "t_in"),
    [(4, 6, 3, 1, 9), (5, 3, 1, 1, 4), (8, 8, 5, 2, 12), (3, 7, 2, 3, 4), (6, 2, 4, 1, 4)],
)
def test_conv_over_time_is_conv1d_with_its_gradients(
    c_in: int, c_out: int, k: int, dilation: int, t_in: int
) -> None:
    gen = torch.Generator().manual_seed(c_in * 100 + k)
    x = torch.randn(3, t_in, c_in, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(c_out, c_in, k, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(c_out, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, t_in - dilation * (k - 1), c_out, generator=gen, dtype=torch.float64)

    ours = conv_over_time(x, w, b, dilation=dilation)
    grads = torch.autograd.grad((ours * g).sum(), (x, w, b))
    theirs = F.conv1d(x.transpose(1, 2), w, b, dilation=dilation).transpose(1, 2)
    expected = torch.autograd.grad((theirs * g).sum(), (x, w, b))

    torch.testing.assert_close(ours, theirs)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_conv_over_time_without_bias_and_wrong_channels() -> None:
    x, w = torch.randn(2, 6, 4), torch.randn(5, 4, 3)
    torch.testing.assert_close(conv_over_time(x, w), F.conv1d(x.transpose(1, 2), w).transpose(1, 2))
    with pytest.raises(ValueError, match="x has 3 channels, the weight expects 4"):
        conv_over_time(torch.randn(2, 6, 3), w)


class _EveryConvolution(nn.Module):
    """The places csan convolves over time, in one module: CNNs baseline (full and separable), Conv Q/K/V, ConvS2S.

    The CNNs baseline's convolution stacks only (``convolve``), not its attention: the attention
    has its own compile tests, and compiling it here doubled this test's time.
    """

    def __init__(self, d: int) -> None:
        super().__init__()
        self.cnn = ConvThenAttention(d_model=d, heads=2, conv_layers=1, kernel=3)
        self.separable = ConvThenAttention(d_model=d, heads=2, conv_layers=1, separable=True)
        self.qkv = InceptionConv(d, d, [(3, 1), (3, 2)], causal=True)
        self.block = EncoderBlock(d, kernel=3, dropout=0.0)

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        return self.block(self.qkv(self.separable.convolve(self.cnn.convolve(x, pad), pad)), pad)


def test_convolutions_compile_once_for_every_sentence_length() -> None:
    """Regression: inductor's convolution specialised the graph on the length, so a training run
    recompiled for every new batch width until dynamo gave up and ran the rest in eager mode."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch.manual_seed(0)
    module = _EveryConvolution(16)
    counter = CompileCounterWithBackend("inductor")
    torch._dynamo.reset()
    compiled = torch.compile(module, backend=counter, dynamic=True)
    frames = []
    for batch, t in [(3, 10), (5, 7), (2, 13)]:  # no two sizes equal (duck sizing would tie them)
        x = torch.randn(batch, t, 16, requires_grad=True)
        pad = torch.zeros(batch, t, dtype=torch.bool)
        pad[0, -2:] = True
        out = compiled(x, pad)
        torch.testing.assert_close(out, module(x, pad), atol=1e-5, rtol=1e-5)
        out.sum().backward()
        frames.append(counter.frame_count)
    assert frames[0] >= 1
    assert frames == [frames[0]] * 3, f"compiled frames after each length: {frames}"


def test_time_conv1d_refuses_what_conv_over_time_does_not_compute() -> None:
    with pytest.raises(ValueError, match="pads with zeros by an integer"):
        TimeConv1d(4, 4, 3, padding="same")
    with pytest.raises(ValueError, match="stride 1 and one group"):
        TimeConv1d(4, 4, 3, stride=2)


@pytest.mark.parametrize(("channels", "k", "t"), [(4, 3, 9), (6, 1, 4), (5, 5, 3), (3, 7, 8)])
def test_separable_conv_is_grouped_conv1d_then_linear_with_its_gradients(
    channels: int, k: int, t: int
) -> None:
    torch.manual_seed(channels * 10 + k)
    conv = SeparableTimeConv1d(channels, k).double()
    x = torch.randn(2, t, channels, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, t, channels, dtype=torch.float64)
    params = (x, conv.depthwise, conv.pointwise.weight, conv.pointwise.bias)

    ours = conv(x)
    grads = torch.autograd.grad((ours * g).sum(), params)
    depth = F.conv1d(x.transpose(1, 2), conv.depthwise, padding=k // 2, groups=channels)
    theirs = conv.pointwise(depth.transpose(1, 2))
    expected = torch.autograd.grad((theirs * g).sum(), params)

    torch.testing.assert_close(ours, theirs)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_separable_conv_refuses_an_even_width() -> None:
    with pytest.raises(ValueError, match="kernel must be a positive odd integer, got 4"):
        SeparableTimeConv1d(4, 4)
