"""Does a larger oneDNN primitive cache make the compiled bf16 step faster? (It did not.)

    for r in 1 2; do for c in default 16384; do
      [ "$c" = default ] || export ONEDNN_PRIMITIVE_CACHE_CAPACITY=$c
      CSAN_DATA=../shared/data python onednn_cache.py; unset ONEDNN_PRIMITIVE_CACHE_CAPACITY
    done; done

Every batch of the main job has its own length, so every product shape is new to oneDNN at first.
The preset's trainer runs 20 untimed steps, then 100 timed steps on new batches, then the same 100
batches again (shapes oneDNN has seen), and prints both medians.
"""

import os
import statistics
import sys
import time
from pathlib import Path

# the trainer of multi30k-small on its first batches of epoch 1, in a temporary run folder
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "profile-avx2-zen3-2026-11-29"))
from _preset import preset_trainer


def timed_steps(trainer, groups) -> list[float]:
    """Seconds of one training step on each group of batches, in order."""
    times = []
    for g in groups:
        t0 = time.perf_counter()
        trainer.train_step(g)
        times.append(time.perf_counter() - t0)
    return times


with preset_trainer(120, []) as (tr, gs):
    timed_steps(tr, gs[:20])
    t = timed_steps(tr, gs[20:])
    t2 = timed_steps(tr, gs[20:])  # the same batches again: shapes oneDNN has seen
tok = sum(g[0].tgt_tokens for g in gs[20:])
new, again = 1e3 * statistics.median(t), 1e3 * statistics.median(t2)
print(
    os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "default"),
    f"new batches: median {new:.1f} ms, {tok / sum(t):.0f} tok/s | "
    f"same batches again: median {again:.1f} ms, {tok / sum(t2):.0f} tok/s",
    flush=True,
)
