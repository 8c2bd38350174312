"""``exp`` against ``exp2`` on a logit tile whose masked slots are -inf (the row path's (128, 16, 26)
tile of one chunk before session 26: 16 query rows a block, 26 key slots, 11 of them in the band).

    python benchmarks/results/avx2-zen3-2026-11-26/exp2-rows/exp_ab.py

Output of 2026-11-26 (Zen 3): ``exp-ab.txt``.
"""

import time

import torch


def median_us(fn, calls=300, rounds=7):
    for _ in range(20):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return sorted(times)[rounds // 2]


blocks, block, span, window = 128, 16, 26, 11
blocked = torch.ones(block, span, dtype=torch.bool)
for a in range(block):
    blocked[a, a : a + window] = False  # query a reads slots a .. a + window - 1
finite = -torch.rand(blocks, block, span, generator=torch.Generator().manual_seed(0)) * 10
masked = finite.masked_fill(blocked, float("-inf"))
out = torch.empty_like(finite)
assert torch.equal(
    torch.exp2(masked * torch.log2(torch.tensor(torch.e))) == 0, blocked.expand_as(out)
)
print(
    f"torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}; "
    f"({blocks}, {block}, {span}) float32, {int(blocked.sum())} of {block * span} slots -inf; "
    "median of 7 rounds of 300 calls, microseconds a call"
)
for threads in (2, 1):
    torch.set_num_threads(threads)
    figures = {
        "exp, finite": median_us(lambda: torch.exp(finite, out=out)),
        "exp, -inf slots": median_us(lambda: torch.exp(masked, out=out)),
        "exp2, -inf slots": median_us(lambda: torch.exp2(masked, out=out)),
    }
    print(f"{threads} threads: " + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()))
