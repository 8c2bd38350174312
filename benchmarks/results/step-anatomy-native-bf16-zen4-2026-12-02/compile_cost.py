"""What ``torch.compile`` costs the main job before its first step, with an empty and a filled cache.

    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) sh -c 'python compile_cost.py; python compile_cost.py'

The trainer of ``multi30k-small`` (bf16 + compile where the CPU has native bf16) runs 40 steps on the
first batches of epoch 1. Printed: the seconds until the first step is done, the median of the last
10 steps, and Dynamo's own compile-time summary (its largest phases). Run it twice with the same new
``TORCHINDUCTOR_CACHE_DIR``: the first run compiles from nothing (a user's first ``csan train``), the
second finds inductor's kernels in the cache.
"""

import statistics
import sys
import time
from pathlib import Path

from torch._dynamo.utils import compile_times

# the trainer of multi30k-small on its first batches of epoch 1, in a temporary run folder
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "profile-avx2-zen3-2026-11-29"))
from _preset import preset_trainer

with preset_trainer(40, []) as (trainer, groups):
    times = []
    for g in groups:
        t0 = time.perf_counter()
        trainer.train_step(g)
        times.append(time.perf_counter() - t0)
    print(f"mode {trainer.runtime.mode}")
print(
    f"first step {times[0]:.1f} s; steps 2-40 {sum(times[1:]):.1f} s; median of the last 10 "
    f"{1e3 * statistics.median(times[-10:]):.0f} ms"
)
names, values = compile_times(repr="csv", aggregate=True)
rows = sorted(zip(names, values), key=lambda nv: -float(nv[1]))
print("largest compile phases (s):", ", ".join(f"{n} {float(v):.1f}" for n, v in rows[:8]))
