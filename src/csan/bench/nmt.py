"""``csan bench train|translate|variants``: the translation system's benchmarks, one parser.

Results are printed as a table and written, with the machine, to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from csan.bench.train import run_train_bench
from csan.bench.translate import run_translate_bench
from csan.bench.variants import run_variant_bench, variant_table
from csan.host import HostMeter, report_steal, steal_note
from csan.machine import describe_machine, machine_info

__all__ = ["main"]


def _save(
    kind: str, payload: dict[str, Any], table: str, out: Path, *, host: dict[str, Any]
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y-%m-%d")
    payload = {"machine": machine_info(torch.device("cpu"), **host), **payload}
    path = out / f"{kind}-cpu-{stamp}"
    path.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    note = steal_note(host["host_steal"])
    header = (
        f"Machine: {describe_machine().summary()}; torch {torch.__version__}"
        + (f"; {note} during the measurement" if note else "")
        + ".\n\n"
    )
    path.with_suffix(".md").write_text(header + table + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``csan bench train|translate|variants ...``.

    Example (translation speed of an untrained tiny model, greedy, on two sentences):
        >>> import tempfile
        >>> from csan.toy import toy_model
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = toy_model(d)
        >>> _ = (d / "src.en").write_text("a dog runs .\\na dog .\\n")
        >>> main(["translate", "--model", str(d), "--src", str(d / "src.en"), "--beam", "1",
        ...       "--out", str(d / "results")])  # doctest: +ELLIPSIS
        | sentences | beam | model load (s) | translate (s) | sentences/s |
        |---:|---:|---:|---:|---:|
        | 2 | 1 | ... |
        saved .../results/translate-cpu-... and .../results/translate-cpu-....md
        0
        >>> saved = json.loads(next((d / "results").glob("*.json")).read_text())
        >>> saved["sentences"], saved["beam"], "machine" in saved
        (2, 1, True)
    """
    p = argparse.ArgumentParser(prog="csan bench", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["train", "translate", "variants"])
    p.add_argument(
        "--config",
        help="preset or YAML (train: default multi30k-small; variants: default compare-multi30k)",
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--steps", type=int, help="timed steps per system (train: default 20; variants: 30)"
    )
    p.add_argument("--warmup", type=int, default=5, help="untimed first updates (variants)")
    p.add_argument(
        "--variants",
        default="table1",
        help="rows as in csan compare: names or groups (variants; default table1)",
    )
    p.add_argument("--model", help="model folder (translate)")
    p.add_argument("--src", help="source file (translate)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--out", default="benchmarks/results", help="results folder")
    args = p.parse_args(argv)
    meter = HostMeter()  # the host's steal and product rate, kept with the machine record
    if args.what == "train":
        config = args.config or "multi30k-small"
        rows = run_train_bench(config, steps=args.steps or 20, overrides=args.overrides)
        lines = [
            "| system | params | median step (ms) | target tokens/s | speed vs torch.nn.Transformer |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['system']} | {r['params']:,} | {r['median_step_ms']} | {r['tokens_per_s']:,.0f} "
            f"| {r['relative_to_torch']:.2f}x |"
            for r in rows
        ]
        table = "\n".join(lines)
        kind, payload = "train", {"config": config, "overrides": args.overrides, "rows": rows}
    elif args.what == "variants":
        config = args.config or "compare-multi30k"
        rows = run_variant_bench(
            config,
            variants=[v for v in args.variants.split(",") if v.strip()],
            steps=args.steps or 30,
            warmup=args.warmup,
            overrides=args.overrides,
        )
        table = variant_table(rows)
        payload = {
            "config": config,
            "overrides": args.overrides,
            "variants": args.variants,
            "warmup": args.warmup,
            "rows": rows,
        }
        kind = f"variants-{Path(config).stem}"
    else:
        if not (args.model and args.src):
            p.error("translate needs --model and --src")
        r = run_translate_bench(args.model, args.src, beam=args.beam)
        table = (
            f"| sentences | beam | model load (s) | translate (s) | sentences/s |\n|---:|---:|---:|---:|---:|\n"
            f"| {r['sentences']} | {r['beam']} | {r['load_seconds']} | {r['translate_seconds']} "
            f"| {r['sentences_per_s']} |"
        )
        kind, payload = "translate", r
    host = meter.record()
    path = _save(kind, payload, table, Path(args.out), host=host)
    print(table)
    report_steal(host["host_steal"], "the figures are below this CPU's own")
    print(f"saved {path}.json and {path}.md")
    return 0
