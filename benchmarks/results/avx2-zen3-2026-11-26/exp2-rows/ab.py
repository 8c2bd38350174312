"""The kernel of the working tree (``new``) against an older ``blocked.py`` (``old``), one process,
interleaved, with the plain-script harness (benchmarks/plain_attention.py), against one masked SDPA
call. Session 26: base-2 logits with ``exp2`` (57fadf8), then the row path's layout, its read of a
gradient constant in time and whole-row chunks (c764088).

    git show d6006b3:src/csan/kernels/blocked.py > /tmp/blocked_d6006b3.py
    python benchmarks/results/avx2-zen3-2026-11-26/exp2-rows/ab.py /tmp/blocked_d6006b3.py \
        [--n 1,3] [--repeats 15] [--cases 1x4096,64x32]

Outputs of 2026-11-26 (Zen 3, 2 threads): ``ab-*.txt``.
"""

import importlib.util
import sys

import torch

sys.path.insert(0, "benchmarks")
import plain_attention as pa

import csan.kernels.blocked as blocked


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


spec = importlib.util.spec_from_file_location("blocked_old", sys.argv[1])
old = importlib.util.module_from_spec(spec)
sys.modules["blocked_old"] = old
spec.loader.exec_module(old)


def kernel(module, q, k, v, n):
    return lambda: module.blocked_local_attention(q, k, v, window=11, head_window=n)


ns = [int(n) for n in arg("--n", "1,3").split(",")]
repeats = int(arg("--repeats", "15"))
cases = [tuple(map(int, c.split("x"))) for c in arg("--cases", "1x4096").split(",")]
print(
    f"torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}, "
    f"threads {torch.get_num_threads()}; median of {repeats} after 2 warm-up rounds, interleaved"
)
print(
    "| batch x time | N | old ms | new ms | old/new | sdpa ms | sdpa/new | old ws MiB | new ws MiB | sdpa ws MiB |"
)
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for batch, t in cases:
    for n in ns:
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn((batch, 8, t, 64), generator=gen).requires_grad_() for _ in range(3))
        fns = {
            "old": pa.train_step(kernel(old, q, k, v, n), (q, k, v)),
            "new": pa.train_step(kernel(blocked, q, k, v, n), (q, k, v)),
            "sdpa": pa.train_step(pa.sdpa_call(q, k, v, n), (q, k, v)),
        }
        med = pa.interleaved_medians(fns, repeats=repeats, warmup=2)
        ws = {name: pa.workspace_mib(pa.peak_mib(f), q) for name, f in fns.items()}
        print(
            f"| {batch} x {t} | {n} | {med['old']:.2f} | {med['new']:.2f} "
            f"| {med['old'] / med['new']:.3f}x | {med['sdpa']:.2f} | {med['sdpa'] / med['new']:.1f}x "
            f"| {ws['old']:.2f} | {ws['new']:.2f} | {ws['sdpa']:.1f} |",
            flush=True,
        )
