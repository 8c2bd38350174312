"""The preset's float32 step on three fixed batches, six times each: the fastest time of each (the
A/B of an environment variable or a ``--set``-style override, one process each, alternated).

    for e in X=1 MKL_ENABLE_INSTRUCTIONS=AVX2; do env $e python .../step_ab.py; done
    python .../step_ab.py model.encoder_attention=vanilla
"""

import os
import sys
import time

from _preset import preset_trainer

with preset_trainer(6, sys.argv[1:]) as (trainer, groups):
    for group in groups[:3]:
        trainer.train_step(group)
    per = {i: [] for i in range(3, 6)}
    for _ in range(6):
        for i in per:
            t0 = time.perf_counter()
            trainer.train_step(groups[i])
            per[i].append(time.perf_counter() - t0)
mins = [min(v) * 1e3 for v in per.values()]
env = [
    f"{k}={os.environ[k]}"
    for k in ("MKL_ENABLE_INSTRUCTIONS", "OMP_WAIT_POLICY")
    if k in os.environ
]
print(" ".join(env) or "default", *sys.argv[1:], "min per batch ms:", " ".join(f"{m:.1f}" for m in mins),
      f"sum {sum(mins):.1f}")  # fmt: skip
