"""The blocked kernel of an older blocked.py against the installed one, forward + .sum().backward().

    python after_sdpa_ab.py N ROUNDS OLD_BLOCKED_PY          # each csan call right after an SDPA call
    python after_sdpa_ab.py N ROUNDS OLD_BLOCKED_PY warm     # each csan call right after a csan call

1 x 8 x 4096, d_h 64, window 11, torch's default threads; the variants' order rotates every round.
The SDPA call is the plain script's N=1 band-masked one (for N=3 its ratio means nothing).
"""

import importlib.util
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from csan.kernels import blocked as new


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


n_heads, rounds, old_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
warm = len(sys.argv) > 4 and sys.argv[4] == "warm"
mods = {"old": load(old_path, "blocked_old"), "HEAD": new}
gen = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 8, 4096, 64, generator=gen).requires_grad_() for _ in range(3))
i = torch.arange(4096)
band = (i[None] - i[:, None]).abs() <= 5


def step(f) -> None:
    f().sum().backward()
    for x in (q, k, v):
        x.grad = None


fns = {
    name: (lambda m=m: m.blocked_local_attention(q, k, v, window=11, head_window=n_heads))
    for name, m in mods.items()
}
sdpa = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=band)  # noqa: E731
for _ in range(2):
    for f in (*fns.values(), sdpa):
        step(f)
times: dict = {name: [] for name in (*fns, "sdpa")}
names = list(fns)
for r in range(rounds):
    for name in names[r % 2 :] + names[: r % 2]:
        if not warm:
            start = time.perf_counter()
            step(sdpa)
            times["sdpa"].append(1e3 * (time.perf_counter() - start))
        start = time.perf_counter()
        step(fns[name])
        times[name].append(1e3 * (time.perf_counter() - start))
ref = statistics.median(times["sdpa"]) if times["sdpa"] else float("nan")
for name, ts in times.items():
    mid = statistics.median(ts)
    print(f"N={n_heads} {name:5s} median {mid:8.2f} ms  sdpa/this {ref / mid:6.2f}x")
