"""The shortest sequence that takes the row path: tiles only (``_ROW_MIN_TIME`` above the length)
against the row path (``_ROW_MIN_TIME = 1``), one process, interleaved, median of 11, after c764088.

    python benchmarks/results/avx2-zen3-2026-11-26/exp2-rows/rows_min_ab.py 1x512,8x512,1x1024

Output of 2026-11-26 (Zen 3, 2 threads): ``rows-min-ab.txt``.
"""

import statistics
import sys
import time

import torch

import csan.kernels.blocked as blocked

shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[1].split(",")]
print(
    f"torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}, "
    f"threads {torch.get_num_threads()}; 8 heads of 64, window 11, .sum().backward(); "
    "median of 11 after one warm-up, interleaved"
)
for n in (1, 3):
    for batch, t in shapes:
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn((batch, 8, t, 64), generator=gen).requires_grad_() for _ in range(3))

        def run(min_time, q=q, k=k, v=v, n=n):
            saved = blocked._ROW_MIN_TIME
            blocked._ROW_MIN_TIME = min_time
            try:
                out = blocked.blocked_local_attention(q, k, v, window=11, head_window=n)
                out.sum().backward()
            finally:
                blocked._ROW_MIN_TIME = saved
            for x in (q, k, v):
                x.grad = None

        variants = {"tiles": t + 1, "rows": 1}
        for value in variants.values():
            run(value)
        times = {name: [] for name in variants}
        for r in range(11):
            for name in list(variants)[:: 1 if r % 2 else -1]:
                start = time.perf_counter()
                run(variants[name])
                times[name].append(time.perf_counter() - start)
        tiles, rows = (statistics.median(times[name]) * 1e3 for name in variants)
        print(
            f"N={n} {batch} x {t}: tiles {tiles:.2f} ms, row path {rows:.2f} ms, "
            f"{tiles / rows:.3f}x",
            flush=True,
        )
