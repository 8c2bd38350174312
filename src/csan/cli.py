"""The ``csan`` command line: train, translate, evaluate, info, average, bench, and the experiments
(compare, ablate, analyze, plot).

User mistakes (a bad file, an unknown option) print one line ``csan: error: ...`` and exit with
status 2; no traceback. ``csan train`` stopped by SIGINT or SIGTERM saves a checkpoint and exits with
128 + the signal's number (130, 143); the same command resumes it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from csan.errors import CsanError
from csan.textio import read_text_lines, write_text_lines

__all__ = ["main"]


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        default="multi30k-small",
        metavar="PRESET|FILE.yaml",
        help="preset name (see `csan info --presets`) or YAML file (default: multi30k-small)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field by dotted key, e.g. --set train.lr=5e-4 (repeatable)",
    )
    p.add_argument(
        "--data-dir", help="folder with <split>.<lang> files (default: $CSAN_DATA/<dataset>)"
    )


def _load_cfg(args: argparse.Namespace):
    from csan.config import load_config

    overrides = list(args.overrides)
    if getattr(args, "data_dir", None):
        overrides.append(f"data.data_dir={args.data_dir}")
    try:
        return load_config(args.config, overrides)
    except UnicodeDecodeError as e:
        raise CsanError(f"{args.config}: not UTF-8 text (byte {e.start})") from None


def _keep_freed_memory() -> None:
    """Reuse freed memory instead of faulting fresh pages in (``csan.machine.keep_freed_memory``)."""
    from csan.machine import keep_freed_memory

    keep_freed_memory()


def cmd_train(args: argparse.Namespace) -> int:
    """Train a model, or resume the run in --out from its last checkpoint.

    SIGINT/SIGTERM: checkpoint, then exit with 130/143 (run the same command to resume); kill -9
    loses at most the steps since the last checkpoint. Several processes: torchrun --nproc_per_node N
    -m csan train ... (N processes with train.max_tokens T each step like one with update_freq=N).
    """
    from csan.training.trainer import train

    cfg = _load_cfg(args)
    result = train(cfg, args.out, progress=not args.no_progress)
    if result.test:
        print(
            f"{result.test['split']} BLEU = {result.test['bleu']:.2f} ({result.test['signature']})"
        )
    if result.interrupted_by:  # checkpoint saved; the shell convention for "killed by a signal"
        import signal

        return 128 + int(signal.Signals[result.interrupted_by])
    return 0


def _check_output(path: str | None) -> None:
    """Fail before any work when ``--output`` cannot be written (a folder, a missing parent)."""
    if path is None or path == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise CsanError(f"{target}: is a directory, expected an output file")
    if not target.parent.is_dir():
        raise CsanError(f"{target}: no such folder {target.parent}")


def _translate(args: argparse.Namespace, lines: list[str]) -> list[str]:
    import torch

    from csan.decoding import Translator
    from csan.machine import pick_device

    device = pick_device(args.device, setting="--device")
    if args.threads:
        torch.set_num_threads(args.threads)
    _keep_freed_memory()
    translator = Translator.from_dir(args.model, device=device)
    return translator.translate(
        lines, beam=args.beam, lenpen=args.lenpen, max_tokens=args.max_tokens
    )


def _decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model folder, or a run folder (uses its model/)")
    p.add_argument("--beam", type=int, help="beam size (default: the model's, 4); 1 = greedy")
    p.add_argument("--lenpen", type=float, help="length penalty alpha (default 0.6)")
    p.add_argument("--max-tokens", type=int, help="source tokens per batch (default: the model's)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")


def cmd_translate(args: argparse.Namespace) -> int:
    _check_output(args.output)
    lines = read_text_lines(args.input)
    write_text_lines(args.output, _translate(args, lines))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from csan.evaluation.bleu import score

    _check_output(args.output)
    refs = read_text_lines(args.ref)
    if args.hyp:
        hyps = read_text_lines(args.hyp)
    else:
        if not args.src:
            raise CsanError("evaluate: give --src (to translate) or --hyp (translations)")
        src = read_text_lines(args.src)
        if len(src) != len(refs):
            raise CsanError(f"{args.src} has {len(src)} lines but {args.ref} has {len(refs)}")
        hyps = _translate(args, src)
        if args.output:
            write_text_lines(args.output, hyps)
    s = score(hyps, refs)
    if args.json:
        print(json.dumps(s.to_dict()))
    else:
        print(f"BLEU = {s.bleu:.2f}  chrF = {s.chrf:.2f}")
        print(s.bleu_details)
        print(f"signature: {s.signature}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from csan.config import presets
    from csan.info import parameter_table

    if args.presets:
        print("\n".join(presets()))
        return 0
    if args.model:
        from csan.decoding import load_model

        loaded = load_model(args.model)
        model, cfg = loaded.model, loaded.config
    else:
        from csan.models import build_model

        cfg = _load_cfg(args)
        model = build_model(cfg.model, cfg.data.vocab_size)
    print(_machine_lines(cfg))
    print(parameter_table(model, cfg))
    return 0


def _machine_lines(cfg) -> str:
    """What this machine has and what ``train.cpu_bf16`` / ``train.compile`` choose on it, and why."""
    from csan.machine import choose_runtime, describe_machine, pick_device

    tc = cfg.train
    device = pick_device(tc.device)
    choice = choose_runtime(tc.cpu_bf16, tc.compile, device=device, cuda_bf16=tc.bf16, warn=False)
    return (
        f"machine: {describe_machine().summary()}\n"
        f"mode on {device}: {choice.mode}: {'; '.join(choice.reasons)}"
    )


def cmd_average(args: argparse.Namespace) -> int:
    from csan.checkpoint import average_model_dirs, step_folders

    if args.last < 1:
        raise CsanError(f"average: --last must be >= 1, got {args.last}")
    steps = step_folders(Path(args.run))
    if not steps:
        raise CsanError(f"{Path(args.run) / 'checkpoints'}: no checkpoints to average")
    chosen = steps[-args.last :]
    how = f"average of {', '.join(p.name for p in chosen)}"
    average_model_dirs(chosen, Path(args.out), made_from=how)
    print(f"wrote {args.out} ({how})")
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    import csan.attention

    print("self-attention: " + ", ".join(csan.attention.available()))
    print("cross-attention: " + ", ".join(csan.attention.available_cross()))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.what in ("attention", "long") and "torch" not in sys.modules:
        # Transparent huge pages for PyTorch's CPU tensors (read once, before the first allocation):
        # without them, touching the fresh 32-128 MiB outputs and gradients at 16k tokens costs tens of
        # page faults per MiB, a time that grows faster than the kernels' own work. Both backends get
        # it; the setting is recorded with the results; THP_MEM_ALLOC_ENABLE=0 turns it off.
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    _keep_freed_memory()
    if args.what == "attention":
        from csan.bench.attention import main as bench_main

        return int(bench_main(args.rest) or 0)
    if args.what == "long":
        from csan.bench.long import main as long_main

        return int(long_main(args.rest) or 0)
    from csan.bench.nmt import main as nmt_bench_main

    return int(nmt_bench_main([args.what, *args.rest]) or 0)


def _int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CsanError(f"{what} {text!r}: expected comma-separated integers, e.g. 1,2,3") from None
    if not values:
        raise CsanError(f"{what}: no values given")
    return values


def _experiment_command(args: argparse.Namespace, *parts: str) -> str:
    import shlex

    sets = [item for kv in args.overrides for item in ("--set", kv)]
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    return shlex.join(["csan", *parts, "--config", args.config, *sets, *data, "--out", args.out])


def cmd_compare(args: argparse.Namespace) -> int:
    """Train variants x seeds and write the paper's Table 1 layout (table.md, results.csv, bleu.png)."""
    from csan.experiments.compare import run_compare

    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    run_compare(
        args.config,
        [v for v in args.variants.split(",") if v.strip()],
        _int_list(args.seeds, "--seeds"),
        args.out,
        overrides=overrides,
        progress=not args.no_progress,
        command=_experiment_command(
            args,
            "compare",
            "--variants",
            args.variants,
            "--seeds",
            args.seeds,
            *(["--tag", args.tag] if args.tag else []),
        ),
        train=not args.report_only,
        tag=args.tag,
        title=args.title,
    )
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    """Validation BLEU over window M (csan1d) or head window N (csan2d): paper Fig. 2."""
    from csan.experiments.ablate import run_ablation

    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    run_ablation(
        args.config,
        args.variant,
        args.out,
        seeds=_int_list(args.seeds, "--seeds"),
        values=_int_list(args.values, "--values") if args.values else None,
        overrides=overrides,
        progress=not args.no_progress,
        command=_experiment_command(args, "ablate", "--variant", args.variant),
    )
    return 0


def _named(item: str, default: str) -> tuple[str, str]:
    if "=" in item:
        name, path = item.split("=", 1)
        return name, path
    return default, item


def cmd_analyze(args: argparse.Namespace) -> int:
    """n-gram gaps to a baseline (paper Fig. 3), or validation accuracy per epoch (convergence)."""
    from csan.experiments import analyze

    if args.what == "ngram":
        hyps: dict[str, list[str]] = {}
        for i, item in enumerate([args.baseline, *args.systems]):
            name, path = _named(item, "baseline" if i == 0 else Path(item).stem)
            if name in hyps:
                raise CsanError(f"analyze ngram: system name {name!r} given twice")
            hyps[name] = read_text_lines(path)
        report = analyze.ngram_report(read_text_lines(args.ref), hyps, max_order=args.max_order)
        files = analyze.write_ngram(report, Path(args.out))
    else:
        runs = analyze.convergence_runs(analyze.expand_run_dirs(args.runs))
        files = analyze.write_convergence(
            runs, Path(args.out), thresholds=args.thresholds, relative_to=args.relative_to
        )
    print(Path(files[0]).read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """Heat maps of one sentence's self-attention weights, one per head."""
    from csan.decoding import load_model
    from csan.experiments.attention_maps import plot_attention, sentence_attention

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    amap = sentence_attention(
        load_model(args.model),
        args.sentence,
        layer=args.layer,
        side=args.side,
        target=args.target,
        sum_key_heads=args.sum_key_heads,
    )
    print(
        f"wrote {plot_attention(amap, args.out)} ({amap.side} layer {amap.layer}: {amap.variant})"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    from csan import __version__

    parser = argparse.ArgumentParser(
        prog="csan",
        description="Convolutional self-attention networks: train and run translation models.",
    )
    parser.add_argument("--version", action="version", version=f"csan {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train (or resume) a model", description=cmd_train.__doc__)
    _config_args(p)
    p.add_argument(
        "--out", required=True, help="run folder; one that holds a checkpoint is resumed"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("translate", help="translate raw text, one line out per line in")
    _decode_args(p)
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout), written atomically")
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
    p.add_argument("--last", type=int, default=5, help="how many checkpoints (default 5)")
    p.add_argument("--out", required=True, help="output model folder")
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
        description=cmd_compare.__doc__,
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
    p.add_argument(
        "--out", required=True, help="output folder (runs/ inside; finished runs skipped)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write the table from the runs that finished (the others: not run)",
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
        description=cmd_ablate.__doc__,
    )
    _config_args(p)
    p.add_argument("--variant", required=True, choices=["csan1d", "csan2d"])
    p.add_argument(
        "--values",
        help="windows to try (csan1d default 1,3,...,15 and whole; csan2d head windows 1,3,...,H)",
    )
    p.add_argument("--seeds", default="1", help="comma list of training seeds (default 1)")
    p.add_argument(
        "--out", required=True, help="output folder (runs/ inside; finished runs skipped)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("analyze", help="n-gram gaps (paper Fig. 3) or convergence per epoch")
    what = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    q = what.add_parser("ngram", help="n-gram precision and BLEU-n gaps to a baseline")
    q.add_argument("--ref", required=True, help="reference file")
    q.add_argument("--baseline", required=True, metavar="[NAME=]HYP", help="baseline translations")
    q.add_argument(
        "--systems", nargs="+", required=True, metavar="NAME=HYP", help="systems to compare"
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
        description=cmd_plot.__doc__,
    )
    q.add_argument("--model", required=True, help="model folder, or a run folder (uses its model/)")
    q.add_argument("--sentence", required=True, help="source sentence (raw text)")
    q.add_argument("--layer", type=int, default=0, help="layer, from 0 (default 0)")
    q.add_argument("--side", default="encoder", choices=["encoder", "decoder"])
    q.add_argument("--target", help="decoder side: target text (default: greedy translation)")
    q.add_argument(
        "--sum-key-heads", action="store_true", help="2D-CSAN: sum over key heads, one block"
    )
    q.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    q.add_argument("--out", required=True, help="PNG file")
    q.set_defaults(func=cmd_plot)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``csan`` and ``python -m csan``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("csan").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    try:
        return int(args.func(args) or 0)
    except CsanError as e:
        print(f"csan: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("csan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
