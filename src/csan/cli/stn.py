"""``csan stn``: the distorted-MNIST table of spatial transformer networks (see csan.experiments.stn)."""

from __future__ import annotations

import argparse
import shlex

__all__ = ["add_stn_command", "cmd_stn"]


def cmd_stn(args: argparse.Namespace) -> int:
    """Train rows x distortions x seeds on distorted MNIST (finished runs skipped, the others resumed)
    and write table.md, results.csv, summary.json, machine.json, transforms-*.png and curves.png."""
    from csan.experiments.stn import run_stn, stn_config

    cfg = stn_config(args.preset, list(args.overrides))
    sets = [item for kv in args.overrides for item in ("--set", kv)]
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    command = shlex.join(["csan", "stn", "--preset", args.preset, *sets, *data, "--out", args.out])
    run_stn(
        cfg,
        args.out,
        preset=args.preset,
        data_dir=args.data_dir,
        train=not args.report_only,
        command=command,
    )
    return 0


def add_stn_command(sub: argparse._SubParsersAction) -> None:
    """Register ``csan stn`` and its options on the top-level subparsers (imports nothing heavy)."""
    p = sub.add_parser(
        "stn",
        help="spatial transformers on distorted MNIST: the STN paper's Table 1 (table.md, PNGs)",
        description=cmd_stn.__doc__,
    )
    p.add_argument(
        "--preset",
        default="mnist",
        help="mnist (the whole table, a few hours on 2 cores), smoke (RTS, one seed: minutes), tiny",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set epochs=5 --set distortions=R,RTS (repeatable)",
    )
    p.add_argument(
        "--data-dir",
        help="folder with the four MNIST files (default: $CSAN_DATA/mnist, else download)",
    )
    p.add_argument(
        "--out", required=True, help="output folder (runs/ inside; finished runs skipped)"
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write the table from the runs that finished",
    )
    p.set_defaults(func=cmd_stn)
