"""The row path's backward, one process, plain-script harness (benchmarks/plain_attention.py):
``add`` (56147fc: one (n, S, D) product per slot, then ceil(S/B) strided in-place adds) against
``baddbmm`` (each part accumulated by ``baddbmm_`` straight into its strided view), at the chunk
sizes given, against one masked SDPA call.

    git apply benchmarks/results/avx2-zen3-2026-11-25/rows-accumulate/baddbmm.patch
    python benchmarks/results/avx2-zen3-2026-11-25/rows-accumulate/accumulate_ab.py OLD_SRC \
        [--chunks 1536,2048,3072] [--n 1,3]

``baddbmm`` is the working tree's ``_Rows.backward`` (so the patch must be applied: the change was
rejected and is not in the tree), ``add`` that of the checkout whose ``src`` is ``OLD_SRC``.
Output of 2026-11-25 (Zen 3, 2 threads): ``accumulate-ab.txt``.
"""

import importlib.util
import sys
from pathlib import Path

import torch

sys.path.insert(0, "benchmarks")
import plain_attention as pa

import csan.kernels.blocked as blocked
from csan.functional import local_attention

spec = importlib.util.spec_from_file_location(
    "blocked_old", Path(sys.argv[1]) / "csan/kernels/blocked.py"
)
blocked_old = importlib.util.module_from_spec(spec)
sys.modules["blocked_old"] = blocked_old  # dataclasses look their module up there
spec.loader.exec_module(blocked_old)
BACKWARD = {"add": blocked_old._Rows.backward, "baddbmm": blocked._Rows.backward}


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


chunks = [int(c) for c in arg("--chunks", "1536,2048,3072").split(",")]
ns = [int(n) for n in arg("--n", "1,3").split(",")]


def variant(fn, backward, rows):
    def run():
        old = blocked._Rows.backward, blocked._ROW_CHUNK_ROWS
        blocked._Rows.backward, blocked._ROW_CHUNK_ROWS = BACKWARD[backward], rows
        try:
            fn()
        finally:
            blocked._Rows.backward, blocked._ROW_CHUNK_ROWS = old

    return run


print(
    f"torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}, "
    f"threads {torch.get_num_threads()}; median of 7 after 2 warm-up rounds, interleaved"
)
print(
    "| batch x time | N | backward | chunk rows | ms | sdpa ms | sdpa/this time | ws MiB | sdpa ws MiB | sdpa/this ws |"
)
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for n in ns:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((1, 8, 4096, 64), generator=gen).requires_grad_() for _ in range(3))
    base = pa.train_step(
        lambda n=n, q=q, k=k, v=v: local_attention(q, k, v, window=11, head_window=n), (q, k, v)
    )
    fns = {"sdpa": pa.train_step(pa.sdpa_call(q, k, v, n), (q, k, v))}
    for c in chunks:
        for bw in BACKWARD:
            fns[(bw, c)] = variant(base, bw, c)
    med = pa.interleaved_medians(fns, repeats=7, warmup=2)
    ws = {name: pa.workspace_mib(pa.peak_mib(f), q) for name, f in fns.items()}
    for name in fns:
        if name == "sdpa":
            continue
        bw, c = name
        print(
            f"| 1 x 4096 | {n} | {bw} | {c} | {med[name]:.2f} | {med['sdpa']:.2f} | "
            f"{med['sdpa'] / med[name]:.1f}x | {ws[name]:.2f} | {ws['sdpa']:.1f} | "
            f"{ws['sdpa'] / ws[name]:.1f}x |",
            flush=True,
        )
