"""The ``csan`` command line: train, translate, evaluate, info, average, bench.

User mistakes (a bad file, an unknown option) print one line ``csan: error: ...`` and exit with
status 2; no traceback.
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
    return load_config(args.config, overrides)


def cmd_train(args: argparse.Namespace) -> int:
    from csan.training.trainer import train

    cfg = _load_cfg(args)
    result = train(cfg, args.out, progress=not args.no_progress)
    if result.test:
        print(
            f"{result.test['split']} BLEU = {result.test['bleu']:.2f} ({result.test['signature']})"
        )
    return 0


def _read_input(path: str | None) -> list[str]:
    from csan.evaluation.bleu import read_text

    if path is None or path == "-":
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            raise CsanError(f"<stdin>:{line}: invalid UTF-8 (byte {e.start})") from None
        # as read_text: only "\n" (with an optional "\r" before it) ends a line; str.splitlines
        # would also split at U+2028, U+0085, form feeds, ... and break the one-line-per-line rule
        lines = text.removeprefix("\ufeff").split("\n")
        if lines[-1] == "":
            lines.pop()
        return [line.removesuffix("\r") for line in lines]
    return read_text(path)


def _write_output(path: str | None, lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from csan.checkpoint import atomic_write_text

    atomic_write_text(Path(path), text)


def _translate(args: argparse.Namespace, lines: list[str]) -> list[str]:
    import torch

    from csan.checkpoint import load_model_dir
    from csan.data import SubwordModel
    from csan.decoding.translate import translate_lines
    from csan.training.trainer import pick_device

    device = pick_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_model_dir(args.model, device=device)
    dc = loaded.config.decode
    return translate_lines(
        loaded.model,
        SubwordModel.from_bytes(loaded.spm_bytes),
        lines,
        beam=args.beam if args.beam is not None else dc.beam,
        lenpen=args.lenpen if args.lenpen is not None else dc.lenpen,
        max_tokens=args.max_tokens or dc.max_tokens,
        max_len_a=dc.max_len_a,
        max_len_b=dc.max_len_b,
        device=device,
    )


def _decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model folder, or a run folder (uses its model/)")
    p.add_argument("--beam", type=int, help="beam size (default: the model's, 4); 1 = greedy")
    p.add_argument("--lenpen", type=float, help="length penalty alpha (default 0.6)")
    p.add_argument("--max-tokens", type=int, default=0, help="source tokens per batch")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")


def cmd_translate(args: argparse.Namespace) -> int:
    lines = _read_input(args.input)
    _write_output(args.output, _translate(args, lines))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from csan.evaluation.bleu import read_text, score

    refs = read_text(args.ref)
    if args.hyp:
        hyps = read_text(args.hyp)
    else:
        if not args.src:
            raise CsanError("evaluate: give --src (to translate) or --hyp (translations)")
        src = read_text(args.src)
        if len(src) != len(refs):
            raise CsanError(f"{args.src} has {len(src)} lines but {args.ref} has {len(refs)}")
        hyps = _translate(args, src)
        if args.output:
            _write_output(args.output, hyps)
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
        from csan.checkpoint import load_model_dir

        loaded = load_model_dir(args.model)
        model, cfg = loaded.model, loaded.config
    else:
        from csan.models import build_model

        cfg = _load_cfg(args)
        model = build_model(cfg.model, cfg.data.vocab_size)
    print(parameter_table(model, cfg))
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from csan.checkpoint import (
        average_checkpoints,
        load_model_dir,
        save_model_dir,
        write_folder_atomically,
    )

    if args.last < 1:
        raise CsanError(f"average: --last must be >= 1, got {args.last}")
    root = Path(args.run) / "checkpoints"
    steps = sorted(p for p in root.glob("step_*") if p.is_dir() and "." not in p.name)
    if not steps:
        raise CsanError(f"{root}: no checkpoints to average")
    chosen = steps[-args.last :]
    loaded = load_model_dir(chosen[-1])
    average_checkpoints(loaded.model, chosen)
    how = f"average of {', '.join(p.name for p in chosen)}"
    write_folder_atomically(
        Path(args.out),
        lambda tmp: save_model_dir(
            tmp, loaded.model, loaded.config, loaded.spm_bytes, made_from=how
        ),
    )
    print(f"wrote {args.out} ({how})")
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    import csan.attention

    print("self-attention: " + ", ".join(csan.attention.available()))
    print("cross-attention: " + ", ".join(csan.attention.available_cross()))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.what == "attention":
        from csan.bench import main as bench_main

        return int(bench_main(args.rest) or 0)
    from csan.bench_nmt import main as nmt_bench_main

    return int(nmt_bench_main([args.what, *args.rest]) or 0)


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

    p = sub.add_parser("info", help="parameter count per component")
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
    p.add_argument("what", choices=["attention", "train", "translate"])
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options of that benchmark (--help)")
    p.set_defaults(func=cmd_bench)
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
