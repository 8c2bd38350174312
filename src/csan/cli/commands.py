"""What each ``csan`` command does: a few lines each, calling the layers below (see csan.cli)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from csan.errors import CsanError
from csan.textio import (
    STDIO,
    check_output_file,
    iter_line_chunks,
    read_text_lines,
    write_text_lines,
)

if TYPE_CHECKING:
    from csan.config import Config

__all__ = [
    "cmd_ablate",
    "cmd_analyze",
    "cmd_attention",
    "cmd_average",
    "cmd_bench",
    "cmd_compare",
    "cmd_evaluate",
    "cmd_info",
    "cmd_plot",
    "cmd_stn",
    "cmd_train",
    "cmd_translate",
]


def _overrides(args: argparse.Namespace) -> list[str]:
    """The ``--set`` items, and ``--data-dir`` as ``data.data_dir``."""
    overrides = list(args.overrides)
    if getattr(args, "data_dir", None):
        overrides.append(f"data.data_dir={args.data_dir}")
    return overrides


def _load_cfg(args: argparse.Namespace):
    from csan.config import load_config

    try:
        return load_config(args.config, _overrides(args))
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

    Example (4 steps on a corpus of 3 sentence pairs in a folder of one's own, then the test split
    scored with the final model; untrained, so its BLEU is noise):
        >>> from unittest import mock
        >>> from csan.cli.parser import build_parser
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus()
        >>> args = build_parser().parse_args(
        ...     ["train", "--config", "tiny", "--data-dir", str(d), "--out", str(d / "run"),
        ...      "--no-progress", "--set", "data.vocab_size=300", "--set", "train.max_steps=4",
        ...      "--set", "train.evaluate_test=true", "--set", "train.threads=1"])
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     cmd_train(args)  # doctest: +ELLIPSIS
        machine: ...
        training stopped: max_steps=4
        ...
        test2016 BLEU = ... (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...)
        0
        >>> sorted(p.name for p in (d / "run").iterdir())  # doctest: +NORMALIZE_WHITESPACE
        ['.lock', 'checkpoints', 'config.yaml', 'model', 'results.json',
         'test2016.hyp', 'test2016.json']
    """
    from csan.training.trainer import train

    cfg = _load_cfg(args)
    result = train(cfg, args.out, progress=not args.no_progress, force=args.force)
    for name, test in result.tests.items():
        print(f"{name} BLEU = {test['bleu']:.2f} ({test['signature']})")
    if result.interrupted_by:  # checkpoint saved; the shell convention for "killed by a signal"
        import signal

        return 128 + int(signal.Signals[result.interrupted_by])
    return 0


def _translator(args: argparse.Namespace):
    import torch

    from csan.decoding import Translator
    from csan.machine import pick_device

    device = pick_device(args.device, setting="--device")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    _keep_freed_memory()
    return Translator.from_dir(args.model, device=device)


def _translate(args: argparse.Namespace, lines: list[str]) -> list[str]:
    return _translator(args).translate(
        lines, beam=args.beam, lenpen=args.lenpen, max_tokens=args.max_tokens
    )


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate lines; to stdout, each chunk of input is answered as it arrives (streaming).

    Example (an untrained tiny model; one line out per line in, written to a file):
        >>> from csan.cli.parser import build_parser
        >>> from csan.toy import toy_model
        >>> d = toy_model().parent
        >>> _ = (d / "in.en").write_text("a dog runs .\\n\\na dog .\\n")
        >>> args = build_parser().parse_args(["translate", "--model", str(d / "model"),
        ...     "--beam", "1", "--device", "cpu", "--input", str(d / "in.en"),
        ...     "--output", str(d / "out.de")])
        >>> cmd_translate(args), len((d / "out.de").read_text().splitlines())
        (0, 3)
    """
    check_output_file(args.output)
    if args.output in STDIO:  # a stream: answer each line (or what is there) as it comes
        translator = _translator(args)
        if args.buffer_lines < 1:
            raise CsanError(f"--buffer-lines {args.buffer_lines}: must be at least 1")
        for chunk in iter_line_chunks(args.input, max_lines=args.buffer_lines):
            out = translator.translate(
                chunk, beam=args.beam, lenpen=args.lenpen, max_tokens=args.max_tokens
            )
            write_text_lines(None, out)
        return 0
    lines = read_text_lines(args.input)  # a file: all or nothing, written atomically
    write_text_lines(args.output, _translate(args, lines))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``csan evaluate``: sacreBLEU and chrF of translations (``--hyp``), or of a model's
    translations of ``--src`` (``--model``), against ``--ref``.

    Example (translations given: the model is not read):
        >>> import tempfile
        >>> from pathlib import Path
        >>> from csan.cli.parser import build_parser
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "ref.de").write_text("ein Hund rennt im Park .\\nzwei Katzen schlafen .\\n")
        >>> _ = (d / "hyp.de").write_text("ein Hund rennt im Park .\\nzwei Katzen schlafen .\\n")
        >>> args = build_parser().parse_args(["evaluate", "--model", str(d),
        ...     "--hyp", str(d / "hyp.de"), "--ref", str(d / "ref.de")])
        >>> cmd_evaluate(args)  # doctest: +ELLIPSIS
        BLEU = 100.00  chrF = 100.00
        BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 10 ref_len = 10)
        signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...
        0
    """
    from csan.evaluation.bleu import score

    check_output_file(args.output)
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
    """``csan info``: the presets, or the machine, the mode ``auto`` picks on it and the parameters
    per component of a config (or of a trained model folder).

    Example:
        >>> from csan.cli.parser import build_parser
        >>> args = build_parser().parse_args(["info", "--config", "tiny",
        ...                                   "--set", "train.device=cpu"])
        >>> cmd_info(args)  # doctest: +ELLIPSIS
        machine: ...
        mode on cpu: float32 eager: float32 (train.cpu_bf16=false); compile off (...)
        softmax: the whole vocabulary (model.output_vocab=full)
        host: a 1024x256 @ 256x1024 product at ... GFLOP/s in float32...
        native attention kernel: ...
        arch transformer; encoder attention 'vanilla', decoder 'vanilla', cross 'vanilla'
        component                           parameters
        src_embed                               64,000
        ...
        total                                  231,680
        0
    """
    from csan.config import presets
    from csan.info import parameter_table
    from csan.kernels.native import describe as native_kernel_line

    if args.presets:
        print("\n".join(presets()))
        return 0
    if args.model:
        from csan.decoding import load_model

        loaded = load_model(args.model)
        model, cfg = loaded.model, loaded.config
        lines, _ = _machine_lines(cfg)
    else:
        from csan.models import build_model

        # the model a run of this config trains on this machine (its float32 settings included)
        lines, cfg = _machine_lines(_load_cfg(args))
        model = build_model(cfg.model, cfg.data.vocab_size)
    print(lines)
    print(_host_line())
    print(native_kernel_line())
    print(parameter_table(model, cfg))
    return 0


def _host_line() -> str:
    """How fast this host's CPU runs one fixed product now (:mod:`csan.host`), the figure a run
    keeps as ``machine.host_products``: the same chip's products ran 1.7-4x slower on some days."""
    from csan.host import product_rates

    rates = product_rates()
    bf16 = f", {rates['bf16_gflops']:,.0f} in bf16" if "bf16_gflops" in rates else ""
    return (
        f"host: a 1024x256 @ 256x1024 product at {rates['float32_gflops']:,.0f} GFLOP/s in float32"
        f"{bf16} (a run keeps this as machine.host_products)"
    )


def _machine_lines(cfg: Config) -> tuple[str, Config]:
    """What this machine has and what ``train.cpu_bf16`` / ``train.compile``, the config's
    ``float32`` settings and ``model.output_vocab`` choose on it, and why; and ``cfg`` so settled."""
    from csan.machine import choose_runtime, describe_machine, pick_device
    from csan.training.prepare import settle_for_runtime

    tc = cfg.train
    device = pick_device(tc.device)
    choice = choose_runtime(tc.cpu_bf16, tc.compile, device=device, cuda_bf16=tc.bf16, warn=False)
    settled, float32_why, why = settle_for_runtime(cfg, choice)
    softmax = settled.model.output_vocab
    lines = [
        f"machine: {describe_machine().summary()}",
        f"mode on {device}: {choice.mode}: {'; '.join(choice.reasons)}",
        *([float32_why] if float32_why else []),
        f"softmax: {'the target side' if softmax == 'target' else 'the whole vocabulary'} ({why})",
    ]
    return "\n".join(lines), settled


def cmd_average(args: argparse.Namespace) -> int:
    """``csan average``: the mean of the last ``--last`` checkpoints of a run, as a model folder.

    As the run's own final model, it leaves out the checkpoints written only to resume from (a
    signal's, the ``train.checkpoint_minutes`` timer's) unless the run has no other.

    Example (a 4-step run of a 3-pair corpus, checkpointed every 2 steps):
        >>> from csan.cli.parser import build_parser
        >>> from csan.toy import toy_run
        >>> run = toy_run()  # doctest: +ELLIPSIS
        machine: ...
        >>> args = build_parser().parse_args(["average", "--run", str(run), "--last", "2",
        ...                                   "--out", str(run.parent / "averaged")])
        >>> cmd_average(args)  # doctest: +ELLIPSIS
        wrote .../averaged (average of step_00000002, step_00000004)
        0
        >>> sorted(p.name for p in (run.parent / "averaged").iterdir())
        ['config.json', 'model.safetensors', 'spm.model']
    """
    from csan.checkpoint import (
        average_model_dirs,
        check_model_output,
        is_unplanned,
        step_folders,
    )

    if args.last < 1:
        raise CsanError(f"average: --last must be >= 1, got {args.last}")
    every = step_folders(Path(args.run))
    if not every:
        raise CsanError(f"{Path(args.run) / 'checkpoints'}: no checkpoints to average")
    check_model_output(Path(args.out), force=args.force, protect=Path(args.run))
    chosen = ([p for p in every if not is_unplanned(p)] or every)[-args.last :]
    how = f"average of {', '.join(p.name for p in chosen)}"
    average_model_dirs(chosen, Path(args.out), made_from=how)
    skipped = [p.name for p in every[every.index(chosen[0]) :] if p not in chosen]
    note = f"; left out, written only to resume from: {', '.join(skipped)}" if skipped else ""
    print(f"wrote {args.out} ({how}{note})")
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    """``csan attention``: the self- and cross-attention variants a config may name.

    Example:
        >>> from csan.cli.parser import build_parser
        >>> cmd_attention(build_parser().parse_args(["attention"]))  # doctest: +ELLIPSIS
        self-attention: ...csan1d, csan2d, ...vanilla...
        cross-attention: ...vanilla...
        0
    """
    import csan.attention

    print("self-attention: " + ", ".join(csan.attention.available()))
    print("cross-attention: " + ", ".join(csan.attention.available_cross()))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """``csan bench``: run one benchmark (``attention``, ``long``, ``train``, ``translate`` or
    ``variants``) with the options after its name; print its table and save it.

    Example (translation speed of an untrained tiny model, greedy, on two sentences):
        >>> from csan.cli.parser import build_parser
        >>> from csan.toy import toy_model
        >>> d = toy_model().parent
        >>> _ = (d / "src.en").write_text("a dog runs .\\na dog .\\n")
        >>> args = build_parser().parse_args(["bench", "translate", "--model", str(d / "model"),
        ...     "--src", str(d / "src.en"), "--beam", "1", "--out", str(d / "results")])
        >>> cmd_bench(args)  # doctest: +ELLIPSIS
        | sentences | beam | model load (s) | translate (s) | sentences/s |
        |---:|---:|---:|---:|---:|
        | 2 | 1 | ... |
        saved .../results/translate-cpu-... and .../results/translate-cpu-....md
        0
    """
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


def _experiment_command(
    args: argparse.Namespace, *parts: str, config_flag: str = "--config"
) -> str:
    """The command line an experiment records with its results (``config_flag``: ``--preset`` for
    ``csan stn``)."""
    import shlex

    sets = [item for kv in args.overrides for item in ("--set", kv)]
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    return shlex.join(["csan", *parts, config_flag, args.config, *sets, *data, "--out", args.out])


def cmd_compare(args: argparse.Namespace) -> int:
    """Train variants x seeds and write the paper's Table 1 layout (table.md, results.csv, bleu.png).

    Example (vanilla against 1D-CSAN, one seed, 2 steps each on a toy corpus; then the table again
    from the folder's files alone):
        >>> from unittest import mock
        >>> from csan.cli.parser import build_parser
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus()
        >>> argv = ["compare", "--config", "tiny", "--data-dir", str(d), "--variants",
        ...         "vanilla,csan1d", "--seeds", "1", "--out", str(d / "cmp"), "--no-progress",
        ...         "--set", "data.vocab_size=300", "--set", "train.max_steps=2"]
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     cmd_compare(build_parser().parse_args(argv))  # doctest: +ELLIPSIS
        [1/2] vanilla seed 1: training in .../cmp/runs/vanilla-seed1
        ...
        wrote .../cmp/table.md, .../cmp/results.csv, .../cmp/bleu.png
        0
        >>> table = (d / "cmp" / "table.md").read_text().splitlines()
        >>> [row.split(" | ")[1] for row in table if row[:4] in ("| 1 ", "| 2 ")]
        ['vanilla', 'csan1d']
        >>> sorted(p.name for p in (d / "cmp" / "translations").iterdir())
        ['csan1d-seed1.test2016.hyp.gz', 'vanilla-seed1.test2016.hyp.gz']
        >>> before = (d / "cmp" / "table.md").read_bytes()
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     report = build_parser().parse_args([*argv, "--report-only"])
        ...     cmd_compare(report)  # doctest: +ELLIPSIS
        [1/2] vanilla seed 1: finished before, skipped (...)
        ...
        0
        >>> (d / "cmp" / "table.md").read_bytes() == before
        True
    """
    from csan.experiments.compare import run_compare

    run_compare(
        args.config,
        [v for v in args.variants.split(",") if v.strip()],
        _int_list(args.seeds, "--seeds"),
        args.out,
        overrides=_overrides(args),
        progress=not args.no_progress,
        command=_experiment_command(
            args,
            "compare",
            "--variants",
            args.variants,
            "--seeds",
            args.seeds,
            *(["--tag", args.tag] if args.tag else []),
            *(["--title", args.title] if args.title else []),
            *(["--significance", args.significance] if args.significance != "bs" else []),
        ),
        train=not args.report_only,
        tag=args.tag,
        title=args.title,
        significance=args.significance,
    )
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    """Validation BLEU over window M (csan1d) or head window N (csan2d): paper Fig. 2.

    Each final model translates the validation split (beam search); the translations are kept in
    translations/ and --report-only rescores them.

    Example (windows 1 and 3 against vanilla, 2 steps each on a toy corpus):
        >>> from unittest import mock
        >>> from csan.cli.parser import build_parser
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus()
        >>> argv = ["ablate", "--config", "tiny", "--data-dir", str(d), "--variant", "csan1d",
        ...         "--values", "1,3", "--out", str(d / "sweep"), "--no-progress",
        ...         "--set", "data.vocab_size=300", "--set", "train.max_steps=2"]
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     cmd_ablate(build_parser().parse_args(argv))  # doctest: +ELLIPSIS
        [1/3] vanilla seed 1: training in .../sweep/runs/vanilla-seed1
        ...
        0
        >>> sorted(p.name for p in (d / "sweep").glob("ablation-csan1d.*"))
        ['ablation-csan1d.csv', 'ablation-csan1d.md', 'ablation-csan1d.png']
        >>> sorted(p.name for p in (d / "sweep" / "translations").iterdir())
        ['csan1d-M1-seed1.valid.hyp.gz', 'csan1d-M3-seed1.valid.hyp.gz', 'vanilla-seed1.valid.hyp.gz']
    """
    from csan.experiments.ablate import run_ablation

    run_ablation(
        args.config,
        args.variant,
        args.out,
        seeds=_int_list(args.seeds, "--seeds"),
        values=_int_list(args.values, "--values") if args.values else None,
        overrides=_overrides(args),
        progress=not args.no_progress,
        command=_experiment_command(args, "ablate", "--variant", args.variant),
        train=not args.report_only,
    )
    return 0


def cmd_stn(args: argparse.Namespace) -> int:
    """Train rows x distortions x seeds on distorted MNIST (finished runs skipped, the others resumed)
    and write table.md, results.csv, summary.json, machine.json, transforms-*.png and curves.png.

    Example (needs the MNIST files, see :func:`csan.spatial.mnist_dir`; the tiny preset, two rows of
    200 training images on RTS, takes seconds)::

        from csan.cli.parser import build_parser
        args = build_parser().parse_args(["stn", "--preset", "tiny", "--out", "runs/stn-tiny"])
        cmd_stn(args)  # 0; runs/stn-tiny/table.md, curves.png, transforms-RTS.png
    """
    from csan.experiments.stn import run_stn, stn_config

    run_stn(
        stn_config(args.config, list(args.overrides)),
        args.out,
        preset=args.config,
        data_dir=args.data_dir,
        train=not args.report_only,
        command=_experiment_command(args, "stn", config_flag="--preset"),
    )
    return 0


def _named(item: str, default: str) -> tuple[str, str]:
    if "=" in item:
        name, path = item.split("=", 1)
        return name, path
    return default, item


def cmd_analyze(args: argparse.Namespace) -> int:
    """n-gram gaps to a baseline (paper Fig. 3), or validation accuracy per epoch (convergence).

    Example (n-gram precisions of two systems' translations against the references):
        >>> import tempfile
        >>> from csan.cli.parser import build_parser
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "ref.de").write_text("ein Hund rennt im Park .\\nzwei Katzen schlafen .\\n")
        >>> _ = (d / "base.de").write_text("ein Hund laeuft im Park .\\nzwei Katzen .\\n")
        >>> _ = (d / "csan.de").write_text("ein Hund rennt im Park .\\nzwei Katzen schlafen .\\n")
        >>> args = build_parser().parse_args(["analyze", "ngram", "--ref", str(d / "ref.de"),
        ...     "--baseline", f"vanilla={d / 'base.de'}", "--systems", f"csan1d={d / 'csan.de'}",
        ...     "--out", str(d / "out")])
        >>> cmd_analyze(args)  # doctest: +ELLIPSIS
        # n-gram analysis against `vanilla` (after Yang et al. 2019, Fig. 3)
        <BLANKLINE>
        | system | measure | n=1 | n=2 | n=3 | n=4 |
        |---|---|---:|---:|---:|---:|
        | vanilla | precision % | 88.89 | 57.14 | 20.00 | 0.00 |
        | vanilla | BLEU-n | 79.54 | 63.77 | 41.75 | 32.28 |
        | csan1d | Δ precision | +11.11 | +42.86 | +80.00 | +100.00 |
        | csan1d | Δ BLEU-n | +20.46 | +36.23 | +58.25 | +67.72 |
        <BLANKLINE>
        Precision: corpus modified n-gram precision of order n (13a tokens). BLEU-n: ...
        <BLANKLINE>
        wrote .../out/ngram.md, .../out/ngram.csv, .../out/ngram.png
        0
    """
    from csan.experiments import analyze

    if args.what == "ngram":
        from csan.experiments.translations import read_translations

        hyps: dict[str, list[str]] = {}
        pooled: dict[str, int] = {}  # name -> how many files (seeds) its translations join
        for i, item in enumerate([args.baseline, *args.systems]):
            name, paths = _named(item, "baseline" if i == 0 else Path(item).stem)
            if name in hyps:
                raise CsanError(f"analyze ngram: system name {name!r} given twice")
            files = [p for p in paths.split(",") if p]
            hyps[name] = [line for path in files for line in read_translations(path)]
            pooled[name] = len(files)
        if len(set(pooled.values())) > 1:
            counts = ", ".join(f"{n}: {k}" for n, k in pooled.items())
            raise CsanError(
                f"analyze ngram: every system needs the same number of files to pool ({counts})"
            )
        refs = read_text_lines(args.ref) * next(iter(pooled.values()))
        report = analyze.ngram_report(refs, hyps, max_order=args.max_order)
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
    """Heat maps of one sentence's self-attention weights, one per head.

    Example (an untrained tiny 1D-CSAN model: its weights are noise, the figure is real):
        >>> import tempfile
        >>> from csan.toy import toy_model
        >>> from csan.cli.parser import build_parser
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = toy_model(d / "model", ["model.encoder_attention=csan1d"])
        >>> args = build_parser().parse_args(["plot", "attention", "--model", str(d / "model"),
        ...     "--sentence", "a dog runs .", "--out", str(d / "map.png")])
        >>> cmd_plot(args)  # doctest: +ELLIPSIS
        wrote .../map.png (encoder layer 0: csan1d...)
        0
        >>> (d / "map.png").read_bytes()[1:4]
        b'PNG'
    """
    from csan.decoding import load_model
    from csan.experiments.attention_maps import plot_attention, sentence_attention

    if args.threads is not None:
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
