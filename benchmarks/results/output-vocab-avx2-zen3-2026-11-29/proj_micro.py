import statistics
import time

import torch
import torch.nn.functional as F

from csan.training.loss import label_smoothed_nll

torch.manual_seed(0)
V, d, N = 8000, 256, 1020
W = torch.nn.Parameter(torch.randn(V, d) * 0.06)
ids = torch.sort(torch.randperm(V)[:5320]).values
h0 = torch.randn(N, d)
tgt = ids[torch.randint(0, 5320, (N,))]
index = torch.zeros(V, dtype=torch.long)
index[ids] = torch.arange(5320)


def full():
    h = h0.clone().requires_grad_()
    loss, _ = label_smoothed_nll(F.linear(h, W), tgt, epsilon=0.1, ignore_index=None)
    loss.backward()


def target():
    h = h0.clone().requires_grad_()
    loss, _ = label_smoothed_nll(
        F.linear(h, W.index_select(0, ids)), index[tgt], epsilon=0.1, ignore_index=None
    )
    loss.backward()


def fwd_only_full():
    with torch.no_grad():
        F.linear(h0, W)


def fwd_only_target():
    with torch.no_grad():
        F.linear(h0, W.index_select(0, ids))


for f in (full, target):
    f()
    f()
res = {f.__name__: [] for f in (full, target, fwd_only_full, fwd_only_target)}
for _ in range(15):
    for f in (full, target, fwd_only_full, fwd_only_target):
        W.grad = None
        t0 = time.perf_counter()
        f()
        res[f.__name__].append((time.perf_counter() - t0) * 1e3)
for k, v in res.items():
    print(f"{k}: median {statistics.median(v):.1f} ms, min {min(v):.1f}")
