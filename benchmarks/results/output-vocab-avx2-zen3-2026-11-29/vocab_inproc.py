"""Two trainers in one process (the preset with model.output_vocab=full, and =target), alternated
step by step on the same 8 batches, 6 rounds: per-round sums, and the median of the per-batch
ratios. Arguments are more ``--set`` items for both (``train.device=cpu train.threads=2`` on a
machine with a GPU)."""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "profile-avx2-zen3-2026-11-29"))
from _preset import preset_trainer

with (
    preset_trainer(10, [*sys.argv[1:], "model.output_vocab=full"]) as (a, groups),
    preset_trainer(10, [*sys.argv[1:], "model.output_vocab=target"]) as (b, _),
):
    print("mode:", a.runtime.mode, "on", a.device, flush=True)
    print("output vocabulary:", len(b.model.output_ids), "of", b.model.vocab_size)
    for g in groups[:2]:
        a.train_step(g)
        b.train_step(g)
    ratios = []
    for r in range(6):
        ta = tb = 0.0
        for g in groups[2:]:
            for t, which in ((a, "a"), (b, "b")) if r % 2 == 0 else ((b, "b"), (a, "a")):
                t0 = time.perf_counter()
                t.train_step(g)
                dt = time.perf_counter() - t0
                if which == "a":
                    ta += dt
                    da = dt
                else:
                    tb += dt
                    db = dt
            ratios.append(db / da)
        print(
            f"round {r + 1}: full {ta * 1e3:.0f} ms, target {tb * 1e3:.0f} ms, target/full {tb / ta:.3f}",
            flush=True,
        )
    print(f"median per-batch target/full over {len(ratios)}: {statistics.median(ratios):.3f}")
