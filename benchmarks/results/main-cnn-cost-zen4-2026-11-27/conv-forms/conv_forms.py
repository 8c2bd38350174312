"""One TimeConv1d(256, 256, 3) forward and backward in three forms; median of 30 after 5 warm-up calls.

Run with AVX2 emulated: ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python conv_forms.py
"""

import time

import torch
import torch.nn.functional as F

from csan.kernels.conv import TimeConv1d


def cat_linear(conv: TimeConv1d, x: torch.Tensor) -> None:
    conv(x).sum().backward()  # csan's form: k shifted views side by side, one product


def conv1d(conv: TimeConv1d, x: torch.Tensor) -> None:
    y = F.conv1d(x.transpose(1, 2), conv.weight, conv.bias, padding=1).transpose(1, 2)
    y.sum().backward()


def linear_shift(conv: TimeConv1d, x: torch.Tensor) -> None:
    b, t, _ = x.shape
    w = conv.weight.permute(2, 0, 1).reshape(3 * 256, 256)  # [j * c_out + o, i]
    z = F.pad(F.linear(x, w).view(b, t, 3, 256), (0, 0, 0, 0, 1, 1))
    y = z[:, 0:t, 0] + z[:, 1 : t + 1, 1] + z[:, 2 : t + 2, 2] + conv.bias
    y.sum().backward()


print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())
torch.manual_seed(0)
for b, t in [(40, 26), (150, 27)]:
    conv = TimeConv1d(256, 256, 3, padding=1)
    x = torch.randn(b, t, 256, requires_grad=True)
    forms = [("cat+linear", cat_linear), ("conv1d", conv1d), ("linear+shift", linear_shift)]
    for name, form in forms * 2:
        for _ in range(5):
            form(conv, x)
        times = []
        for _ in range(30):
            start = time.perf_counter()
            form(conv, x)
            times.append(time.perf_counter() - start)
        times.sort()
        print(b, t, name, f"{times[15] * 1e3:.3f} ms")
