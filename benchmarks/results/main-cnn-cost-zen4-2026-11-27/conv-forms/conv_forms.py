"""One TimeConv1d(256, 256, 3) forward and backward in three forms, timed side by side.

Each (batch, time) is timed twice with csan's shared ``interleaved_ms`` (5 warm-up rounds, median of
30 rounds, the order rotating round by round). Run with AVX2 emulated:

    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python conv_forms.py
"""

from functools import partial

import torch
import torch.nn.functional as F

from csan.bench.timing import interleaved_ms
from csan.kernels.conv import TimeConv1d


def cat_linear(conv: TimeConv1d, x: torch.Tensor) -> None:
    conv(x).sum().backward()  # csan's form: k shifted views side by side, one product


def conv1d(conv: TimeConv1d, x: torch.Tensor) -> None:
    y = F.conv1d(x.transpose(1, 2), conv.weight, conv.bias, padding=conv.padding)
    y.transpose(1, 2).sum().backward()


def linear_shift(conv: TimeConv1d, x: torch.Tensor) -> None:
    """One product to k x c_out channels, then the k shifted slices summed."""
    (b, t, _), (c_out, c_in, k) = x.shape, conv.weight.shape
    w = conv.weight.permute(2, 0, 1).reshape(k * c_out, c_in)  # [j * c_out + o, i]
    z = F.pad(F.linear(x, w).view(b, t, k, c_out), (0, 0, 0, 0, k // 2, k // 2))
    y = z[:, 0:t, 0]
    for j in range(1, k):
        y = y + z[:, j : j + t, j]
    (y + conv.bias).sum().backward()


print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())
torch.manual_seed(0)
for b, t in [(40, 26), (150, 27)]:
    conv = TimeConv1d(256, 256, 3, padding=1)
    x = torch.randn(b, t, 256, requires_grad=True)
    forms = {f.__name__: partial(f, conv, x) for f in (cat_linear, conv1d, linear_shift)}
    for _ in range(2):
        ms = interleaved_ms(forms, repeats=30, warmup=5, device=x.device)
        print(b, t, "  ".join(f"{name} {v:.3f} ms" for name, v in ms.items()))
