"""The matrix products of three training steps of the preset, by input shape (torch.profiler).

CSAN_DATA=../shared/data python benchmarks/results/profile-avx2-zen3-2026-11-29/mm_shapes.py
"""

import tempfile
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

from csan.config import load_config
from csan.training.trainer import Trainer

cfg = load_config("multi30k-small", ["train.evaluate_test=false"])
with tempfile.TemporaryDirectory() as tmp:
    tr = Trainer(cfg, Path(tmp) / "run", progress=False)
    b = tr.data.sampler.batches(1)
    groups = [[tr.data.batch(i)] for i in b[:10]]
    for g in groups[:4]:
        tr.train_step(g)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for g in groups[4:7]:
            tr.train_step(g)
    for g in groups[4:7]:
        print(g[0].src.shape if hasattr(g[0], "src") else g[0])
ka = prof.key_averages(group_by_input_shape=True)
rows = [e for e in ka if e.key in ("aten::mm", "aten::addmm")]
rows.sort(key=lambda e: -e.self_cpu_time_total)
tot = 0
for e in rows[:40]:
    tot += e.self_cpu_time_total
    print(f"{e.key:12s} {e.count:4d} {e.self_cpu_time_total / 1e3:9.1f} ms  {e.input_shapes}")
