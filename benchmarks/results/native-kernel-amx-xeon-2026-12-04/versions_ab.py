"""Versions of csan.kernels.native (from git) and the blocked kernel, forward + .sum().backward().

    python versions_ab.py ROUNDS COMMIT [COMMIT ...]    # from the repository root

1 x 8 x 4096, d_h 64, window 11, N = 1, torch's default threads. Each round runs, for every variant
in an order that rotates, one band-masked SDPA call (as the plain script does between csan's calls)
and then the variant twice: the first call is timed "after SDPA", the second "after itself". Each
version's native.py and native.cpp are taken from git into a temporary folder and imported from
there (each builds its own library, named by its source's hash, in $CSAN_CACHE/native).
"""

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from csan.kernels.blocked import blocked_local_attention


def load(commit: str):
    folder = Path(tempfile.mkdtemp(prefix=f"native-{commit}-"))
    for name in ("native.py", "native.cpp"):
        text = subprocess.run(
            ["git", "show", f"{commit}:src/csan/kernels/{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (folder / name).write_text(text)
    spec = importlib.util.spec_from_file_location(f"native_{commit}", folder / "native.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert module.available(), commit
    return module


rounds, commits = int(sys.argv[1]), sys.argv[2:]
torch.manual_seed(0)
T = 4096
q, k, v = (torch.randn(1, 8, T, 64, requires_grad=True) for _ in range(3))
i = torch.arange(T)
band = (i[:, None] - i[None, :]).abs() <= 5
variants = {c: load(c).native_local_attention for c in commits}
variants["blocked"] = blocked_local_attention


def step(fn):
    for x in (q, k, v):
        x.grad = None
    start = time.perf_counter()
    fn(q, k, v, window=11).sum().backward()
    return (time.perf_counter() - start) * 1e3


def sdpa():
    F.scaled_dot_product_attention(q, k, v, attn_mask=band).sum().backward()


times = {(name, when): [] for name in variants for when in ("after SDPA", "after itself")}
names = list(variants)
for r in range(rounds + 2):
    for name in names[r % len(names) :] + names[: r % len(names)]:
        sdpa()
        cold = step(variants[name])
        warm = step(variants[name])
        if r >= 2:  # two warm-up rounds
            times[(name, "after SDPA")].append(cold)
            times[(name, "after itself")].append(warm)
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {rounds} rounds")
for (name, when), values in times.items():
    print(f"{name:>10} {when:>13}: {statistics.median(values):7.2f} ms (min {min(values):.2f})")
