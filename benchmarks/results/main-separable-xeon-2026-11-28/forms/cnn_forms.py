"""ConvThenAttention(256, 4 heads) forward + backward at about one 1,024-token batch, timed side by side:
1 full conv sublayer (the preset), 2 full, 2 separable (shifted-sum depthwise), 2 separable with the
depthwise part as F.conv1d(groups=c). interleaved_ms: 5 warm-up rounds, median of 40, order rotating."""

from functools import partial

import torch
import torch.nn.functional as F

import csan.kernels.conv as kc
from csan.attention.cnn import ConvThenAttention
from csan.bench.timing import interleaved_ms


def grouped_forward(self, x):
    k = self.kernel
    u = F.conv1d(x.transpose(1, 2), self.depthwise, padding=k // 2, groups=x.size(-1)).transpose(
        1, 2
    )
    return self.pointwise(u)


class Grouped(kc.SeparableTimeConv1d):
    forward = grouped_forward


def step(m, x, mask):
    m(x, mask).sum().backward()


print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())
torch.manual_seed(0)
for b, t in [(40, 26), (150, 27)]:
    x = torch.randn(b, t, 256, requires_grad=True)
    mask = torch.zeros(b, t, dtype=torch.bool)
    mask[::3, -4:] = True
    mods = {
        "c1": ConvThenAttention(d_model=256, heads=4, conv_layers=1),
        "c2": ConvThenAttention(d_model=256, heads=4, conv_layers=2),
        "c2sep": ConvThenAttention(d_model=256, heads=4, conv_layers=2, separable=True),
    }
    g = ConvThenAttention(d_model=256, heads=4, conv_layers=2, separable=True)
    for c in g.convs:
        c.__class__ = Grouped
    mods["c2sep-grouped"] = g
    fns = {n: partial(step, m, x, mask) for n, m in mods.items()}
    for _ in range(2):
        ms = interleaved_ms(fns, repeats=40, warmup=5, device=x.device)
        print(b, t, "  ".join(f"{n} {v:.2f} ms" for n, v in ms.items()), flush=True)
