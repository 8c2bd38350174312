"""Row-path chunk sizes after the base-2 logits and the key-slot-by-query layout, one process,
interleaved (plain-script harness).

    python benchmarks/results/avx2-zen3-2026-11-26/exp2-rows/chunks_ab.py 2048,4096 1,3

Output of 2026-11-26 (Zen 3, 2 threads): ``chunks-ab.txt``.
"""

import sys

import torch

sys.path.insert(0, "benchmarks")
import plain_attention as pa

import csan.kernels.blocked as blocked


def variant(q, k, v, n, rows):
    def run():
        saved = blocked._ROW_CHUNK_ROWS
        blocked._ROW_CHUNK_ROWS = rows
        try:
            blocked.blocked_local_attention(q, k, v, window=11, head_window=n).sum().backward()
            for x in (q, k, v):
                x.grad = None
        finally:
            blocked._ROW_CHUNK_ROWS = saved

    return run


sizes = [int(c) for c in sys.argv[1].split(",")]
ns = [int(n) for n in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1]
print(
    f"torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}, "
    f"threads {torch.get_num_threads()}; median of 15 after 2 warm-up, interleaved"
)
for n in ns:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((1, 8, 4096, 64), generator=gen).requires_grad_() for _ in range(3))
    fns = {rows: variant(q, k, v, n, rows) for rows in sizes}
    med = pa.interleaved_medians(fns, repeats=15, warmup=2)
    ws = {rows: pa.workspace_mib(pa.peak_mib(f), q) for rows, f in fns.items()}
    base = med[sizes[0]]
    for rows in sizes:
        print(
            f"N={n} rows {rows}: {med[rows]:.2f} ms ({base / med[rows]:.3f}x of {sizes[0]}), "
            f"workspace {ws[rows]:.2f} MiB",
            flush=True,
        )
