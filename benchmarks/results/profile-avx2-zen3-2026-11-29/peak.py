"""One-thread float32 GF/s of a 2048^3 product: torch (MKL) and numpy (OpenBLAS).

OPENBLAS_NUM_THREADS=1 python benchmarks/results/profile-avx2-zen3-2026-11-29/peak.py
"""

import torch

from csan.bench.train import median_step

torch.set_num_threads(1)


def bench(f, n=7):
    return median_step(f, warmup=2, repeats=n)


a = torch.randn(2048, 2048)
b = torch.randn(2048, 2048)
t = bench(lambda: a @ b)
print(f"torch/MKL 1 thread 2048^3: {2 * 2048**3 / t / 1e9:.1f} GF/s")
an, bn = a.numpy(), b.numpy()
t = bench(lambda: an @ bn)
print(f"numpy/OpenBLAS 2048^3 (its threads): {2 * 2048**3 / t / 1e9:.1f} GF/s")
