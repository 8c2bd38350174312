"""Attention at sentence length inside its projections, forward and backward, one thread: SDPA against
hand-written forms and SDPA's math backend."""

import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.set_num_threads(1)
torch.manual_seed(0)
B, T, H, D = 256, 16, 4, 64
dm = H * D
qkv = torch.nn.Linear(dm, 3 * dm)
out = torch.nn.Linear(dm, dm)
x = torch.randn(B, T, dm, requires_grad=True)
pad = torch.zeros(B, T, dtype=torch.bool)
pad[:128, -3:] = True


def split(t):
    return t.view(B, T, H, D).transpose(1, 2)


def merge(t):
    return t.transpose(1, 2).reshape(B, T, dm)


def flash(q, k, v, causal):
    if causal:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])


tri = torch.ones(T, T, dtype=torch.bool).triu(1)


def hand(q, k, v, causal):
    s = torch.matmul(q, k.transpose(-1, -2)).mul_(D**-0.5)
    m = tri if causal else pad[:, None, None, :]
    s = s.masked_fill(m, float("-inf"))
    return torch.matmul(torch.softmax(s, -1), v)


def hand2(q, k, v, causal):
    # additive bias, baddbmm with scale, 3D
    qq = q.reshape(B * H, T, D)
    kk = k.reshape(B * H, T, D)
    vv = v.reshape(B * H, T, D)
    bias = (
        (torch.zeros(T, T).masked_fill(tri, float("-inf"))).expand(B * H, T, T)
        if causal
        else torch.zeros(B, 1, 1, T)
        .masked_fill(pad[:, None, None, :], float("-inf"))
        .expand(B, H, T, T)
        .reshape(B * H, T, T)
    )
    s = torch.baddbmm(bias, qq, kk.transpose(1, 2), alpha=D**-0.5)
    return torch.bmm(torch.softmax(s, -1), vv).view(B, H, T, D)


def step(f, causal):
    q, k, v = qkv(x).chunk(3, -1)
    y = out(merge(f(split(q), split(k), split(v), causal)))
    y.sum().backward()


res = {}
names = ["flash", "hand", "hand2", "math"]
for causal in (False, True):
    for r in range(9):
        for n in names:
            f = {"flash": flash, "hand": hand, "hand2": hand2, "math": flash}[n]
            t = time.perf_counter()
            if n == "math":
                with sdpa_kernel(SDPBackend.MATH):
                    step(f, causal)
            else:
                step(f, causal)
            if r >= 2:
                res.setdefault((causal, n), []).append(time.perf_counter() - t)
for (c, n), v in res.items():
    print("causal" if c else "pad", n, f"{statistics.median(v) * 1e3:.1f} ms")
