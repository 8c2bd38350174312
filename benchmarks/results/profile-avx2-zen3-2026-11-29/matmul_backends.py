"""GF/s of the training step's largest matrix products: MKL (torch), OpenBLAS (numpy), oneDNN.

python benchmarks/results/profile-avx2-zen3-2026-11-29/matmul_backends.py
"""

import torch

from csan.bench.train import median_step

SHAPES = [(1020, 256, 8000), (1014, 8000, 256), (8000, 1014, 256), (1020, 256, 1024),
          (1020, 1024, 256), (256, 1020, 1024), (1020, 256, 768), (1020, 256, 256)]  # fmt: skip


def bench(f, n=15):
    return median_step(f, warmup=3, repeats=n)


for m, k, n in SHAPES:
    a, b = torch.randn(m, k), torch.randn(k, n)
    w, an, bn = b.t().contiguous(), a.numpy(), b.numpy()
    gflop = 2 * m * k * n / 1e9
    mkl = gflop / bench(lambda a=a, b=b: a @ b)
    openblas = gflop / bench(lambda an=an, bn=bn: an @ bn)
    onednn = gflop / bench(
        lambda a=a, w=w: torch.ops.mkldnn._linear_pointwise(a, w, None, "none", [], "")
    )
    print(f"{m}x{k}x{n}: mkl {mkl:6.1f} GF/s | numpy {openblas:6.1f} | onednn {onednn:6.1f}")
