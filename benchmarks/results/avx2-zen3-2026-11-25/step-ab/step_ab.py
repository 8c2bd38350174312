"""The training step with the previous loss and dropout against the current ones, in one process.

    OMP_NUM_THREADS=1 CSAN_DATA=../shared/data python step_ab.py OLD_SRC --rounds 24 --out DIR

``OLD_SRC`` is the ``src`` folder of a checkout before the change (56147fc); its
``csan/models/ops.py`` and ``csan/training/loss.py`` are loaded beside the current ones. One
``multi30k-small`` trainer (one thread) takes every step: each round times the same batch once with
the old dropout and loss and once with the new (the order alternating between rounds), so the
machine's drift, which moves separate processes by +-5% here, falls on both sides alike. Prints the
median step of each and the median of the per-round ratios; writes them, with the machine, to
``DIR/step-ab.{md,json}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch

import csan.models.ops as ops_new
import csan.models.transformer as transformer
import csan.training.loss as loss_new
from csan.config import load_config
from csan.machine import machine_info
from csan.training.trainer import Trainer


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old_src", type=Path)
    p.add_argument("--rounds", type=int, default=24)
    p.add_argument("--out", type=Path, default=Path("."))
    args = p.parse_args()
    ops_old = load("ops_old", args.old_src / "csan/models/ops.py")
    loss_old = load("loss_old", args.old_src / "csan/training/loss.py")
    variants = {
        "old": (ops_old.dropout, loss_old._SmoothedNLL),
        "new": (ops_new.dropout, loss_new._SmoothedNLL),
    }
    cfg = load_config("multi30k-small", ["train.threads=1", "train.evaluate_test=false"])
    times: dict[str, list[float]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp) / "run", progress=False)
        batches = trainer.data.sampler.batches(1)
        for r in range(args.rounds + 1):  # round 0 warms up
            batch = trainer.data.batch(batches[r])
            for name in list(variants) if r % 2 == 0 else list(variants)[::-1]:
                transformer.dropout, loss_new._SmoothedNLL = variants[name]
                t0 = time.perf_counter()
                trainer.train_step([batch])
                if r:
                    times[name].append(time.perf_counter() - t0)
    ratios = [o / n for o, n in zip(times["old"], times["new"], strict=True)]
    machine = machine_info("cpu")
    lines = [
        "# Training step A/B in one process: old (56147fc) and new loss and dropout\n",
        f"`multi30k-small`, one thread, {args.rounds} rounds (the same batch for both in a round), "
        f"torch {torch.__version__}; machine: {machine.get('cpu')} ({machine.get('cpu_core')}), capability "
        f"{machine.get('capability')}, native bf16 {machine.get('native_bf16')}.\n",
        "| variant | median step (ms) | mean step (ms) |",
        "|---|---:|---:|",
    ]
    for name, ts in times.items():
        lines.append(
            f"| {name} | {1e3 * statistics.median(ts):.1f} | {1e3 * statistics.mean(ts):.1f} |"
        )
    lines.append(
        f"\nPer-round old/new: median {statistics.median(ratios):.3f}, "
        f"{sum(x > 1 for x in ratios)} of {len(ratios)} rounds faster with the new code."
    )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "step-ab.md").write_text(text, encoding="utf-8")
    record = {
        "rounds": args.rounds,
        "step_s": {k: [round(t, 4) for t in v] for k, v in times.items()},
        "ratio_median": round(statistics.median(ratios), 4),
        "machine": machine,
    }
    (args.out / "step-ab.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
