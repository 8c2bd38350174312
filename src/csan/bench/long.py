"""Long inputs: an encoder with CSAN layers trained on 8k+ token documents, blocked vs dense kernels.

``csan bench long``: documents are runs of consecutive newstest2014 sentences (English side), cut
into subwords with a SentencePiece model learned on them, ``--length`` tokens each. A Transformer
encoder whose every layer is ``csan1d`` or ``csan2d`` (window 11) is trained with a denoising
objective (15% of the tokens replaced by UNK, predict the originals through the tied output layer).
Each kernel runs in its own subprocess, so its peak resident memory (``ru_maxrss``) is its own; a
kernel whose step passes ``--step-timeout`` seconds or whose process dies is reported as such. The
subprocess runs under an address-space cap (``--memory-limit-gb``, ``RLIMIT_AS``), so a kernel that
needs more fails there with an allocation error ("out of memory") instead of pushing the machine into
swap or the kernel's OOM killer.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from csan.host import HostMeter

__all__ = ["main", "train_long"]


def _documents(
    length: int, count: int, vocab: int, lines: Sequence[str] | None = None
) -> tuple[Any, int]:
    import torch

    from csan.data import SubwordModel, read_lines, resolve_data_dir

    source = "the text given"
    if lines is None:
        source = "newstest2014"
        lines = read_lines(resolve_data_dir("newstest2014") / "newstest2014.en")
    spm = SubwordModel.train(lines, vocab_size=vocab)
    ids = [t for seq in spm.encode(lines) for t in [*seq, spm.eos_id]]
    need = length * count
    if len(ids) < need:
        raise SystemExit(f"{source} has {len(ids)} tokens, fewer than {need}")
    return torch.tensor(ids[:need]).view(count, length), len(spm)


def train_long(
    *,
    variant: str,
    backend: str,
    length: int,
    steps: int,
    layers: int,
    d_model: int,
    heads: int,
    head_window: int,
    lines: Sequence[str] | None = None,
    vocab_size: int = 4000,
) -> dict[str, Any]:
    """Train the long-input encoder for ``steps`` steps; time per step and loss.

    Each step's document is ``length`` consecutive subword tokens of ``lines`` (default:
    newstest2014's English side, found or downloaded as :func:`csan.data.resolve_data_dir` does),
    cut by a SentencePiece model of ``vocab_size`` pieces learned on them. Each step prints a JSON
    line to stderr.

    Example (2 steps of a 1-layer csan1d encoder on 64-token documents of a toy text):
        >>> import contextlib, io
        >>> from csan.toy import TOY_PAIRS
        >>> text = [en for en, _ in TOY_PAIRS] * 40
        >>> with contextlib.redirect_stderr(io.StringIO()):
        ...     r = train_long(variant="csan1d", backend="blocked", length=64, steps=2, layers=1,
        ...                    d_model=32, heads=4, head_window=3, lines=text, vocab_size=300)
        >>> r["status"], r["length"], len(r["losses"]), r["median_step_s"] > 0
        ('ok', 64, 2, True)
    """
    import torch
    import torch.nn.functional as F

    from csan.config import ModelConfig
    from csan.models.transformer import Transformer

    torch.manual_seed(0)
    docs, vocab = _documents(length, steps, vocab_size, lines)
    options: dict[str, Any] = {"window": 11, "backend": backend}
    if variant == "csan2d":
        options["head_window"] = head_window
    cfg = ModelConfig(
        d_model=d_model,
        heads=heads,
        ffn_dim=4 * d_model,
        encoder_layers=layers,
        decoder_layers=1,
        dropout=0.1,
        max_positions=length,
        encoder_attention=variant,
        attention_options={variant: options},
    )
    model = Transformer(cfg, vocab)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    times, losses = [], []
    for step in range(steps):
        tokens = docs[step : step + 1]  # (1, length)
        noisy = tokens.masked_fill(torch.rand(tokens.shape) < 0.15, 1)
        t0 = time.perf_counter()
        opt.zero_grad()
        h = model.encode(noisy).out  # (1, length, d_model)
        loss = F.cross_entropy(model.project(h).view(-1, vocab), tokens.view(-1))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(round(loss.item(), 4))
        print(
            json.dumps({"step": step + 1, "seconds": round(times[-1], 3), "loss": losses[-1]}),
            file=sys.stderr,
            flush=True,
        )
    return {
        "variant": variant,
        "backend": backend,
        "length": length,
        "steps": steps,
        "median_step_s": round(sorted(times)[len(times) // 2], 3),
        "losses": losses,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "status": "ok",
    }


# what an allocation refused under RLIMIT_AS looks like (PyTorch's CPU allocator, Python)
_OOM_MESSAGES = ("can't allocate memory", "DefaultCPUAllocator", "MemoryError", "out of memory")


def _cap_memory(gib: float) -> None:
    """Cap this process's address space at ``gib`` GiB (0: no cap)."""
    if gib > 0:
        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _run_child(args: argparse.Namespace, backend: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "csan.bench.long",
        "--child",
        "--backend",
        backend,
        "--variant",
        args.variant,
        "--length",
        str(args.length),
        "--steps",
        str(args.steps),
        "--layers",
        str(args.layers),
        "--d-model",
        str(args.d_model),
        "--heads",
        str(args.heads),
        "--head-window",
        str(args.head_window),
        "--memory-limit-gb",
        str(args.memory_limit_gb),
    ]
    timeout = args.step_timeout * args.steps + 120
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {
            "variant": args.variant,
            "backend": backend,
            "length": args.length,
            "status": f"timeout (> {timeout} s for {args.steps} steps)",
        }
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        oom = any(s in proc.stderr for s in _OOM_MESSAGES)
        asked = re.search(r"tried to allocate (\d+) bytes", proc.stderr)
        need = f", one allocation of {int(asked.group(1)) / 2**30:.1f} GiB refused" if asked else ""
        status = (
            f"out of memory (cap {args.memory_limit_gb:g} GiB{need})"
            if oom
            else f"failed (exit {proc.returncode}: {tail[:120]})"
        )
        return {
            "variant": args.variant,
            "backend": backend,
            "length": args.length,
            "status": status,
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    """``csan bench long``: each kernel in its own capped process, then the table, kept in ``--out``.

    Example (needs newstest2014, found or downloaded as :func:`csan.data.resolve_data_dir` does;
    two 2,048-token steps per kernel, seconds)::

        main(["--length", "2048", "--steps", "2", "--layers", "1", "--d-model", "64",
              "--out", "runs/long"])  # 0; prints the table, keeps runs/long/long-csan1d-2048-*
    """
    p = argparse.ArgumentParser(prog="csan bench long", description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", default="csan1d", choices=["csan1d", "csan2d"])
    p.add_argument("--length", type=int, default=8192, help="tokens per document")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-window", type=int, default=3)
    p.add_argument("--backends", default="blocked,dense")
    p.add_argument(
        "--step-timeout", type=float, default=120.0, help="seconds per step before giving up"
    )
    p.add_argument(
        "--memory-limit-gb",
        type=float,
        default=16.0,
        help="address-space cap of each kernel's process, GiB (0: none); past it the kernel is "
        "reported out of memory",
    )
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", default="blocked", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _cap_memory(args.memory_limit_gb)
        print(
            json.dumps(
                train_long(
                    variant=args.variant,
                    backend=args.backend,
                    length=args.length,
                    steps=args.steps,
                    layers=args.layers,
                    d_model=args.d_model,
                    heads=args.heads,
                    head_window=args.head_window,
                )
            )
        )
        return 0
    meter = HostMeter()  # the host's steal (machine-wide: the children's too) and product rate
    rows = [_run_child(args, b) for b in args.backends.split(",")]
    host = meter.record()
    lines = [
        "| variant | kernel | tokens | median step (s) | peak RSS (MiB) | loss first -> last | status |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        losses = r.get("losses")
        trend = f"{losses[0]} -> {losses[-1]}" if losses else "-"
        lines.append(
            f"| {r['variant']} | {r['backend']} | {r['length']} | {r.get('median_step_s', '-')} "
            f"| {r.get('peak_rss_mib', '-')} | {trend} | {r['status']} |"
        )
    table = "\n".join(lines)
    print(table)
    import datetime as dt

    import torch

    from csan.machine import machine_info

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"long-{args.variant}-{args.length}-cpu-{dt.datetime.now():%Y-%m-%d}"
    payload = {
        "machine": machine_info(torch.device("cpu"), **host),
        "args": vars(args),
        "rows": rows,
    }
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    stem.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
    print(f"saved {stem}.json and {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
