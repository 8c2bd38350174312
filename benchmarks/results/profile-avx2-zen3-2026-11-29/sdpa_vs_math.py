"""Attention at the main job's batch shapes, forward and backward: SDPA (flash on CPU), SDPA's math
backend, and the same by hand (matmul, softmax, matmul).

    python benchmarks/results/profile-avx2-zen3-2026-11-29/sdpa_vs_math.py
"""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from csan.bench.train import median_step


def bench(f, n=21):
    return median_step(f, warmup=5, repeats=n) * 1e3


def compare(B, T, S):
    q = torch.randn(B, 4, T, 64, requires_grad=True)
    k = torch.randn(B, 4, S, 64, requires_grad=True)
    v = torch.randn(B, 4, S, 64, requires_grad=True)
    mask = torch.zeros(B, 1, 1, S, dtype=torch.bool)
    mask[:, :, :, -2:] = True
    am = torch.zeros(B, 1, 1, S).masked_fill(mask, float("-inf"))

    def flash():
        F.scaled_dot_product_attention(q, k, v, attn_mask=am).sum().backward()

    def causal():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    def math():
        s = (q @ k.transpose(-1, -2)) * 0.125 + am
        (torch.softmax(s, -1) @ v).sum().backward()

    def mathc():
        s = (q @ k.transpose(-1, -2)) * 0.125
        s = s.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        (torch.softmax(s, -1) @ v).sum().backward()

    with sdpa_kernel([SDPBackend.MATH]):
        m2 = bench(flash)
    print(
        f"B{B} T{T}: sdpa-mask {bench(flash):.2f} ms, sdpa-math-backend {m2:.2f}, "
        f"hand math {bench(math):.2f} | causal sdpa {bench(causal):.2f}, hand {bench(mathc):.2f}"
    )


for shape in ((78, 13, 13), (33, 31, 31), (78, 13, 12), (128, 8, 8)):
    compare(*shape)
