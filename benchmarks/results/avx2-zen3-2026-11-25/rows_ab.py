"""Row path A/B in one process, plain-script harness (benchmarks/plain_attention.py): the blocked
kernel with its row path (new) and without it (the tiles only, as before), against one masked SDPA."""

import sys

import torch

sys.path.insert(0, "benchmarks")
import plain_attention as pa

import csan.kernels.blocked as blocked
from csan.functional import local_attention


def with_rows(on, rows=None):
    def call(fn):
        def run():
            old = blocked._ROW_MIN_TIME, blocked._ROW_CHUNK_ROWS
            blocked._ROW_MIN_TIME = 1 if on else 10**9
            if rows:
                blocked._ROW_CHUNK_ROWS = rows
            try:
                fn()
            finally:
                blocked._ROW_MIN_TIME, blocked._ROW_CHUNK_ROWS = old

        return run

    return call


cases = [
    (1, 4096, n)
    for n in map(
        int, (sys.argv[sys.argv.index("--n") + 1] if "--n" in sys.argv else "1,3").split(",")
    )
] + ([(4, 1024, 1), (16, 1024, 1), (2, 2048, 3), (32, 256, 1)] if "--all" in sys.argv else [])
chunk_sizes = (
    [int(c) for c in sys.argv[sys.argv.index("--chunks") + 1].split(",")]
    if "--chunks" in sys.argv
    else [None]
)
cases = (
    [(4, 1024, 1), (16, 1024, 1), (2, 2048, 3), (32, 256, 1), (8, 512, 3)]
    if "--medium" in sys.argv
    else cases
)
print(f"threads {torch.get_num_threads()}; median of 7 after 2 warm-up rounds, interleaved")
print(
    "| batch x time | N | tiles ms | rows ms (chunk rows) | sdpa ms | tiles/rows | sdpa/rows time | tiles ws MiB | rows ws MiB | sdpa ws MiB |"
)
print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
for batch, t, n in cases:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((batch, 8, t, 64), generator=gen).requires_grad_() for _ in range(3))
    base = pa.train_step(
        lambda q=q, k=k, v=v, n=n: local_attention(
            q, k, v, window=11, head_window=n, backend="blocked"
        ),
        (q, k, v),
    )
    fns = {
        "tiles": with_rows(False)(base),
        "sdpa": pa.train_step(pa.sdpa_call(q, k, v, n), (q, k, v)),
    }
    for c in chunk_sizes:
        fns[f"rows{c or ''}"] = with_rows(True, c)(base)
    med = pa.interleaved_medians(fns, repeats=7, warmup=2)
    ws = {name: pa.workspace_mib(pa.peak_mib(f), q) for name, f in fns.items()}
    for name in fns:
        if not name.startswith("rows"):
            continue
        print(
            f"| {batch} x {t} | {n} | {med['tiles']:.2f} | {med[name]:.2f} ({name[4:] or blocked._ROW_CHUNK_ROWS}) | {med['sdpa']:.2f} | "
            f"{med['tiles'] / med[name]:.2f}x | {med['sdpa'] / med[name]:.1f}x | {ws['tiles']:.1f} | {ws[name]:.1f} | {ws['sdpa']:.1f} |",
            flush=True,
        )
