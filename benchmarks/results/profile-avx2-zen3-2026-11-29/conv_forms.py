"""A 256 -> 256 convolution of width 3 over time, forward and backward, in five forms (csan's
`conv_over_time`, `F.conv1d`, shifted sum, three products, and a width-1 product for scale).

    python benchmarks/results/profile-avx2-zen3-2026-11-29/conv_forms.py
"""

import torch
import torch.nn.functional as F

from csan.bench.train import median_step
from csan.kernels.conv import conv_over_time


def bench(f, n=31):
    return median_step(f, warmup=5, repeats=n) * 1e3


torch.manual_seed(0)
w = torch.randn(256, 256, 3, requires_grad=True)
b = torch.randn(256, requires_grad=True)


def compare(B, T):
    x = torch.randn(B, T, 256, requires_grad=True)
    g = torch.randn(B, T, 256)

    def ours():
        y = conv_over_time(F.pad(x, (0, 0, 1, 1)), w, b)
        y.backward(g)

    def onednn():
        y = F.conv1d(x.transpose(1, 2), w, b, padding=1).transpose(1, 2)
        y.backward(g)

    def shifted():
        # x @ [W0 W1 W2] then shift-add
        W = w.permute(2, 0, 1).reshape(3 * 256, 256)  # [j*co + o, i]
        Y = F.linear(x, W).view(B, T, 3, 256)
        y = Y[:, :, 1] + b
        y = torch.cat([y[:, :1], y[:, 1:] + Y[:, :-1, 0]], 1)
        y = torch.cat([y[:, :-1] + Y[:, 1:, 2], y[:, -1:]], 1)
        y.backward(g)

    def linear_only():
        F.linear(x, w[:, :, 1], b).backward(g)

    def three_mm():
        W0, W1, W2 = w[:, :, 0], w[:, :, 1], w[:, :, 2]
        xp = F.pad(x, (0, 0, 1, 1))
        y = F.linear(x, W1, b) + F.linear(xp[:, :-2], W0) + F.linear(xp[:, 2:], W2)
        y.backward(g)

    print(
        f"B{B} T{T}: ours {bench(ours):.2f} ms | F.conv1d {bench(onednn):.2f} | "
        f"shift-add {bench(shifted):.2f} | 3 mm {bench(three_mm):.2f} | "
        f"1x1 linear {bench(linear_only):.2f}"
    )


for shape in ((78, 13), (33, 31), (128, 8)):
    compare(*shape)
