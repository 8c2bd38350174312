"""The preset's float32 step on three fixed batches, six times each: the fastest time of each (the
A/B of an environment variable, one process each, alternated).

    for e in X=1 MKL_ENABLE_INSTRUCTIONS=AVX2; do env $e python .../step_ab.py; done
"""

import os
import sys
import tempfile
import time
from pathlib import Path

from csan.config import load_config
from csan.training.trainer import Trainer

cfg = load_config("multi30k-small", ["train.evaluate_test=false", *sys.argv[1:]])
with tempfile.TemporaryDirectory() as tmp:
    tr = Trainer(cfg, Path(tmp) / "run", progress=False)
    b = tr.data.sampler.batches(1)
    groups = [[tr.data.batch(i)] for i in b[:6]]
    for g in groups[:3]:
        tr.train_step(g)
    per = {i: [] for i in range(3, 6)}
    for _ in range(6):
        for i in range(3, 6):
            t0 = time.perf_counter()
            tr.train_step(groups[i])
            per[i].append(time.perf_counter() - t0)
    mins = [min(v) * 1e3 for v in per.values()]
    print(
        os.environ.get("MKL_ENABLE_INSTRUCTIONS", "default"),
        " ".join(sys.argv[1:]),
        "min per batch ms:",
        " ".join(f"{m:.1f}" for m in mins),
        f"sum {sum(mins):.1f}",
    )
