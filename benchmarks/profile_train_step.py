"""Profile the trainer's own training step: where the time of one update goes, op by op.

    python benchmarks/profile_train_step.py --label after --out benchmarks/results
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/profile_train_step.py ...

It builds the real ``csan.training.trainer.Trainer`` of a preset (default ``multi30k-small``, with
``--set`` overrides) and calls its ``train_step`` on the first batches of epoch 1: the same autocast,
compilation, loss and optimizer as ``csan train``. ``--warmup`` steps run first (compilation), then
``--steps`` are timed (median) and ``--profile-steps`` more run under ``torch.profiler``. The table
(top ops by self CPU time) and the machine go to ``<out>/profile-<label>-<date>.{md,json}``.

It only uses what every version of csan's trainer has, so the same script profiles an older checkout
(``PYTHONPATH=old/src python benchmarks/profile_train_step.py --label before ...``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


def machine_record() -> dict:
    try:
        from csan.machine import machine_info

        return machine_info("cpu")
    except ImportError:  # an older checkout: what torch itself says
        return {
            "capability": torch.backends.cpu.get_cpu_capability(),
            "native_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="multi30k-small")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--steps", type=int, default=8, help="timed steps (median)")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--rows", type=int, default=25)
    p.add_argument("--label", required=True, help="names the result files (before, after, ...)")
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args()

    from csan.config import load_config
    from csan.training.trainer import Trainer

    cfg = load_config(args.config, [*args.overrides, "train.evaluate_test=false"])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp) / "run", progress=False)
        # ``train_step`` since the trainer's split; ``_train_step`` in the trees it compares against
        step = getattr(trainer, "train_step", None) or trainer._train_step
        batches = trainer.data.sampler.batches(1)
        need = args.warmup + args.steps + args.profile_steps
        groups = [[trainer.data.batch(idx)] for idx in batches[:need]]
        for group in groups[: args.warmup]:
            step(group)
        times, tokens = [], 0
        for group in groups[args.warmup : args.warmup + args.steps]:
            t0 = time.perf_counter()
            step(group)
            times.append(time.perf_counter() - t0)
            tokens += group[0].tgt_tokens
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for group in groups[args.warmup + args.steps :]:
                step(group)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows)
    median_ms = 1e3 * statistics.median(times)
    tok_s = tokens / sum(times)
    machine = machine_record()
    mode = getattr(getattr(trainer, "runtime", None), "mode", None) or (
        f"cpu_bf16={cfg.train.cpu_bf16}, compile={cfg.train.compile}"
    )
    head = (
        f"# Training step profile: {args.label}\n\n"
        f"config {args.config} {' '.join(args.overrides)}; mode {mode}; capability "
        f"{machine.get('capability')}, native bf16 {machine.get('native_bf16')}, "
        f"{machine.get('threads')} threads, torch {torch.__version__}\n\n"
        f"median step {median_ms:.1f} ms over {len(times)} steps; {tok_s:,.0f} target tokens/s; "
        f"profile of {args.profile_steps} more steps (self CPU time, all ops):\n"
    )
    print(head)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"profile-{args.label}-{dt.date.today():%Y-%m-%d}"
    stem.with_suffix(".md").write_text(head + "\n```\n" + table + "\n```\n", encoding="utf-8")
    record = {
        "label": args.label,
        "config": args.config,
        "overrides": args.overrides,
        "mode": mode,
        "median_step_ms": round(median_ms, 1),
        "tokens_per_s": round(tok_s, 1),
        "step_ms": [round(1e3 * t, 1) for t in times],
        "machine": machine,
    }
    stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"saved {stem}.md and .json")


if __name__ == "__main__":
    main()
