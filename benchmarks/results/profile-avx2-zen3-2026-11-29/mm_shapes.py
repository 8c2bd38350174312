"""The matrix products of three training steps of the preset, by input shape (torch.profiler).

CSAN_DATA=../shared/data python benchmarks/results/profile-avx2-zen3-2026-11-29/mm_shapes.py
"""

from _preset import preset_trainer
from torch.profiler import ProfilerActivity, profile

with preset_trainer(7, []) as (trainer, groups):
    for group in groups[:4]:
        trainer.train_step(group)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for group in groups[4:]:
            trainer.train_step(group)
    print("source shapes of the profiled batches:", [tuple(g[0].src.shape) for g in groups[4:]])
rows = [
    e for e in prof.key_averages(group_by_input_shape=True) if e.key in ("aten::mm", "aten::addmm")
]
rows.sort(key=lambda e: -e.self_cpu_time_total)
for e in rows[:40]:
    print(f"{e.key:12s} {e.count:4d} {e.self_cpu_time_total / 1e3:9.1f} ms  {e.input_shapes}")
