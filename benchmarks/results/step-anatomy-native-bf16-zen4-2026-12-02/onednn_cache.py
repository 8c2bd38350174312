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
import tempfile
import time
from pathlib import Path

from csan.config import load_config
from csan.training.trainer import Trainer

cfg = load_config("multi30k-small", ["train.evaluate_test=false"])
with tempfile.TemporaryDirectory() as tmp:
    tr = Trainer(cfg, Path(tmp) / "run", progress=False)
    gs = [[tr.data.batch(i)] for i in tr.data.sampler.batches(1)[:220]]
    for g in gs[:20]:
        tr.train_step(g)
    t, tok = [], 0
    for g in gs[20:120]:
        s = time.perf_counter()
        tr.train_step(g)
        t.append(time.perf_counter() - s)
        tok += g[0].tgt_tokens
    t2 = []
    for g in gs[20:120]:
        s = time.perf_counter()
        tr.train_step(g)
        t2.append(time.perf_counter() - s)
new, again = 1e3 * statistics.median(t), 1e3 * statistics.median(t2)
print(
    os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "default"),
    f"new batches: median {new:.1f} ms, {tok / sum(t):.0f} tok/s | "
    f"same batches again: median {again:.1f} ms, {tok / sum(t2):.0f} tok/s",
    flush=True,
)
