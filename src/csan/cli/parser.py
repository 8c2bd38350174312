"""The ``csan`` argument parser: commands, options and their help."""

from __future__ import annotations

import argparse

from csan.cli.commands import (
    cmd_ablate,
    cmd_analyze,
    cmd_attention,
    cmd_average,
    cmd_bench,
    cmd_compare,
    cmd_evaluate,
    cmd_info,
    cmd_plot,
    cmd_stn,
    cmd_train,
    cmd_translate,
)

__all__ = ["build_parser"]


def _description(command) -> str:
    """A command's ``--help`` text: its docstring without the example.

    Example:
        >>> text = _description(cmd_train)
        >>> text.startswith("Train a model, or resume"), "Example" in text, ">>>" in text
        (True, False, False)
    """
    return (command.__doc__ or "").split("\n\n    Example")[0]


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        default="multi30k-small",
        metavar="PRESET|FILE.yaml",
        help="preset name (see `csan info --presets`) or YAML file (default: multi30k-small)",
    )
    _set_arg(p, "override a config field by dotted key, e.g. --set train.lr=5e-4 (repeatable)")
    p.add_argument(
        "--data-dir", help="folder with <split>.<lang> files (default: $CSAN_DATA/<dataset>)"
    )


def _set_arg(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def _experiment_out_args(p: argparse.ArgumentParser, report_only: str | None = None) -> None:
    """``--out`` of an experiment folder and, with its help text, ``--report-only``."""
    p.add_argument(
        "--out", required=True, help="output folder (runs/ inside; finished runs skipped)"
    )
    if report_only:
        p.add_argument("--report-only", action="store_true", help=report_only)


def _decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model folder, or a run folder (uses its model/)")
    p.add_argument("--beam", type=int, help="beam size (default: the model's, 4); 1 = greedy")
    p.add_argument("--lenpen", type=float, help="length penalty alpha (default: the model's)")
    p.add_argument("--max-tokens", type=int, help="source tokens per batch (default: the model's)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")


def build_parser() -> argparse.ArgumentParser:
    """The ``csan`` parser: one sub-command each, its function in ``func`` (see
    :mod:`csan.cli.commands`).

    Example:
        >>> args = build_parser().parse_args(
        ...     ["train", "--config", "tiny", "--out", "runs/tiny", "--set", "train.lr=0.001"])
        >>> args.command, args.config, args.out, args.overrides, args.func.__name__
        ('train', 'tiny', 'runs/tiny', ['train.lr=0.001'], 'cmd_train')
        >>> build_parser().parse_args(["info"]).config  # the default config
        'multi30k-small'
    """
    from csan import __version__

    parser = argparse.ArgumentParser(
        prog="csan",
        description="Convolutional self-attention networks: train and run translation models.",
    )
    parser.add_argument("--version", action="version", version=f"csan {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "train", help="train (or resume) a model", description=_description(cmd_train)
    )
    _config_args(p)
    p.add_argument(
        "--out", required=True, help="run folder; one that holds a checkpoint is resumed"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="train into a folder that is not a csan run (csan's own file names in it are overwritten)",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (on a terminal) or train lines every train.log_every steps (redirected)",
    )
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("translate", help="translate raw text, one line out per line in")
    _decode_args(p)
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout), written atomically")
    p.add_argument(
        "--buffer-lines",
        type=int,
        default=64,
        help="to stdout, translate at most this many waiting lines at a time (default 64)",
    )
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help="sacreBLEU and chrF of a model (or of translations)")
    _decode_args(p)
    p.add_argument("--src", help="source file to translate")
    p.add_argument("--ref", required=True, help="reference file")
    p.add_argument("--hyp", help="score these translations instead of translating --src")
    p.add_argument("--output", help="also write the translations here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("info", help="the machine, the mode auto picks, parameters per component")
    _config_args(p)
    p.add_argument("--model", help="a trained model folder instead of a config")
    p.add_argument("--presets", action="store_true", help="list the presets")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("average", help="average the last N checkpoints of a run")
    p.add_argument("--run", required=True, help="run folder")
    p.add_argument(
        "--last",
        type=int,
        default=5,
        help="how many checkpoints (default 5; those written only to resume from, a signal's or "
        "the timer's, are left out, as the run's final model leaves them out)",
    )
    p.add_argument("--out", required=True, help="output model folder (new, or a csan model folder)")
    p.add_argument(
        "--force", action="store_true", help="replace --out even if it is not a csan model folder"
    )
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("attention", help="list the attention variants")
    p.set_defaults(func=cmd_attention)

    p = sub.add_parser("bench", help="benchmarks that print tables: attention, train")
    p.add_argument("what", choices=["attention", "long", "train", "translate", "variants"])
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options of that benchmark (--help)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "compare",
        help="train variants x seeds; the paper's Table 1 (table.md, results.csv, bleu.png)",
        description=_description(cmd_compare),
    )
    _config_args(p)
    p.add_argument(
        "--variants",
        required=True,
        help="comma list of variant names (vanilla, rel_pos, neighbor, local_hard, local_soft, block, "
        "cnn, bi_direct, csan1d, csan2d, context-<vector>-<enc|dec|both>, conv_qkv, "
        "conv_qkv_dilated), groups (table1, context, conv) or placements like csan2d@0-1; the first "
        "is the baseline",
    )
    p.add_argument("--seeds", default="1", help="comma list of training seeds (default 1)")
    _experiment_out_args(
        p,
        report_only="train nothing: write the table from the runs that finished, else from the "
        "folder's results.csv and translations/ (a kept table gives the same files byte for byte)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--significance",
        choices=["bs", "ar"],
        default="bs",
        help="sacreBLEU's paired test per seed: bs = paired bootstrap resampling (1,000 resamples, "
        "default), ar = approximate randomization (10,000 trials)",
    )
    p.add_argument(
        "--tag",
        help="suffix of the output files (table-TAG.md, results-TAG.csv, ...): several tables "
        "in one folder share its runs",
    )
    p.add_argument("--title", help="title of table.md")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "ablate",
        help="validation BLEU over window sizes (paper Fig. 2)",
        description=_description(cmd_ablate),
    )
    _config_args(p)
    p.add_argument("--variant", required=True, choices=["csan1d", "csan2d"])
    p.add_argument(
        "--values",
        help="windows to try (csan1d default 1,3,...,15 and whole; csan2d head windows 1,3,...,H)",
    )
    p.add_argument("--seeds", default="1", help="comma list of training seeds (default 1)")
    _experiment_out_args(
        p,
        report_only="train and translate nothing: write the table from the runs that finished, "
        "else from the folder's ablation CSV and translations/ (a kept sweep gives the same files)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("analyze", help="n-gram gaps (paper Fig. 3) or convergence per epoch")
    what = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    q = what.add_parser("ngram", help="n-gram precision and BLEU-n gaps to a baseline")
    q.add_argument("--ref", required=True, help="reference file")
    q.add_argument(
        "--baseline",
        required=True,
        metavar="[NAME=]HYP",
        help="baseline translations (plain or .gz); HYP1,HYP2,... pools several seeds' files, "
        "each scored against --ref",
    )
    q.add_argument(
        "--systems",
        nargs="+",
        required=True,
        metavar="NAME=HYP",
        help="systems to compare (as --baseline; every system pools the same number of files)",
    )
    q.add_argument("--max-order", type=int, default=4, help="largest n (default 4)")
    q.add_argument("--out", required=True, help="output folder (ngram.md, .csv, .png)")
    q.set_defaults(func=cmd_analyze)
    q = what.add_parser(
        "convergence", help="validation token accuracy per epoch, epochs to 0.90/0.95"
    )
    q.add_argument(
        "--runs",
        nargs="+",
        required=True,
        metavar="[NAME=]DIR",
        help="run folders (or a `csan compare` folder: all its runs)",
    )
    q.add_argument(
        "--thresholds", type=float, nargs="+", default=[0.90, 0.95], help="accuracies to reach"
    )
    q.add_argument(
        "--relative-to",
        metavar="NAME",
        help="thresholds as fractions of this run's best validation accuracy (e.g. vanilla-seed1)",
    )
    q.add_argument("--out", required=True, help="output folder (convergence.md, .csv, .png)")
    q.set_defaults(func=cmd_analyze)

    p = sub.add_parser("plot", help="figures from a model: attention heat maps")
    what = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    q = what.add_parser(
        "attention",
        help="one sentence's self-attention weights per head",
        description=_description(cmd_plot),
    )
    q.add_argument("--model", required=True, help="model folder, or a run folder (uses its model/)")
    q.add_argument("--sentence", required=True, help="source sentence (raw text)")
    q.add_argument("--layer", type=int, default=0, help="layer, from 0 (default 0)")
    q.add_argument("--side", default="encoder", choices=["encoder", "decoder"])
    q.add_argument("--target", help="decoder side: target text (default: greedy translation)")
    q.add_argument(
        "--sum-key-heads", action="store_true", help="2D-CSAN: sum over key heads, one block"
    )
    q.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    q.add_argument("--out", required=True, help="PNG file")
    q.set_defaults(func=cmd_plot)

    p = sub.add_parser(
        "stn",
        help="spatial transformers on distorted MNIST: the STN paper's Table 1 (table.md, PNGs)",
        description=_description(cmd_stn),
    )
    p.add_argument(
        "--preset",
        dest="config",
        metavar="PRESET",
        default="mnist",
        help="mnist (the whole table, a few hours on 2 cores), smoke (RTS, one seed: minutes), tiny",
    )
    _set_arg(p, "override a setting, e.g. --set epochs=5 --set distortions=R,RTS (repeatable)")
    p.add_argument(
        "--data-dir",
        help="folder with the four MNIST files (default: $CSAN_DATA/mnist, else download)",
    )
    _experiment_out_args(
        p, report_only="train nothing: write the table from the runs that finished"
    )
    p.set_defaults(func=cmd_stn)
    return parser
