import statistics
import time

import torch
import torch.nn.functional as F

torch.manual_seed(0)
d, N = 256, 1020
h = torch.randn(N, d)
sizes = [5317, 5320, 5376, 5632, 6144, 8000]
Ws = {n: torch.randn(n, d) for n in sizes}
G = {n: torch.randn(N, n) for n in sizes}
res = {n: {"fwd": [], "dx": [], "dW": []} for n in sizes}
for r in range(12):
    for n in sizes:
        W = Ws[n]
        g = G[n]
        t0 = time.perf_counter()
        F.linear(h, W)
        t1 = time.perf_counter()
        g.mm(W)
        t2 = time.perf_counter()
        g.t().mm(h)
        t3 = time.perf_counter()
        if r:
            res[n]["fwd"].append(t1 - t0)
            res[n]["dx"].append(t2 - t1)
            res[n]["dW"].append(t3 - t2)
for n in sizes:
    m = {k: statistics.median(v) * 1e3 for k, v in res[n].items()}
    gf = 3 * 2 * N * d * n / (sum(m.values()) / 1e3) / 1e9
    print(
        n,
        " ".join(f"{k} {v:.1f}" for k, v in m.items()),
        f"sum {sum(m.values()):.1f} ms, {gf:.0f} GF/s",
    )
