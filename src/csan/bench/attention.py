"""Attention benchmark: csan's kernels against one band-masked SDPA call (O(T^2)).

Run it as ``csan bench attention [--lengths ...] [--device ...] [--out DIR]`` (or
``python -m csan.bench.attention``); results go to ``<out>/attention-<device>-<date>.{json,md}`` with the machine
(:func:`csan.machine.machine_info`) and the harness (:func:`harness`).

Backends: ``sdpa`` is the reference every ratio divides by: one
``torch.nn.functional.scaled_dot_product_attention`` call with a boolean band mask built once, outside the
timed region; for head window ``N > 1`` it is the dense 2D-CSAN formulation (``csan.kernels.dense``): the
keys and values of each head's ``N`` neighbouring heads (wrapped) gathered into one key axis of ``N*T``
(the gather is timed: it is part of the maths) under one (T, N*T) mask. ``dense`` is csan's dense kernel,
``blocked`` the O(T*M) kernel in PyTorch operations, ``native`` the O(T*M) kernel in native code
(:mod:`csan.kernels.native`: CPU, N = 1; the blocked kernel for N > 1), ``flex`` flex attention (CUDA),
``auto`` what ``local_attention`` picks.
``benchmarks/plain_attention.py`` times ``auto`` against the same ``sdpa`` the way a user's script does.

What is measured, per (case, time, head window, backend):

- ``forward_ms``: median wall time of an inference forward (``torch.no_grad``), after warm-up runs.
- ``train_ms``: median wall time of forward + ``out.sum().backward()`` (gradients of q, k, v; the output
  gradient is the expanded, stride-0 tensor that ``.sum()`` gives, as in most user code).
  The backends of one case are timed interleaved: each round runs every backend once, in an order that
  rotates from round to round, so a slow spell of the machine does not land on one backend only.
- ``peak_mib``: the peak of live tensor memory during one forward + backward, above what was live before
  it (inputs and the sdpa mask excluded; the output and the three gradients included). CPU: every
  allocation and free the PyTorch CPU allocator reports to ``torch.profiler`` (``profile_memory=True``),
  replayed in time order; CUDA: ``torch.cuda.max_memory_allocated``. Allocator caches and the Python heap
  are not counted.
- ``workspace_mib``: ``peak_mib`` minus the three gradients, which every backend must hold at once at
  its end: the memory a kernel needs beyond its inputs and gradients. The output counts as workspace
  while it lives: ``.sum()`` needs it only in the forward, and a kernel that keeps it for its backward
  holds it by its own choice. (Until 2026-11-26 the output was subtracted as well; once the blocked
  kernel stopped keeping its output, its peak fell below output + gradients and that gave 0.)

Cases: ``long`` sweeps ``lengths`` at ``batch``; ``sentence`` is a batch of 64 x 32 tokens. The O(T^2)
backends (sdpa, dense) are skipped ("oom-skipped") when their memory, extrapolated as T^2 from the
previous length, would pass 8 GiB.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from csan.bench.attention_table import format_row, markdown_table
from csan.bench.timing import interleaved_ms, peak_bytes
from csan.functional import local_attention
from csan.host import HostMeter, report_steal
from csan.kernels import native
from csan.kernels.blocked import blocked_local_attention
from csan.kernels.dense import dense_local_attention
from csan.kernels.flex import flex_available, flex_local_attention
from csan.machine import machine_info, pick_device

__all__ = [
    "DEFAULT_LENGTHS",
    "harness",
    "machine_info",
    "main",
    "run_attention_bench",
    "sdpa_reference",
    "write_results",
]

DEFAULT_LENGTHS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SENTENCE = (64, 32)  # (batch, time) of the "sentence" case
MAX_DENSE_BYTES = 8 * 2**30
QUADRATIC = ("sdpa", "dense")  # O(T^2) memory: skipped when too big
MIB = 2**20

Kernel = Callable[..., Tensor]


def _kernels(device: torch.device) -> dict[str, Kernel | None]:
    """Backend name -> kernel with the ``local_attention`` keyword signature (None: unavailable)."""
    kernels: dict[str, Kernel | None] = {
        "sdpa": sdpa_reference,
        "dense": dense_local_attention,
        "blocked": blocked_local_attention,
        "flex": flex_local_attention if flex_available(device) else None,
        "native": (
            functools.partial(local_attention, backend="native")
            if device.type == "cpu" and native.available()
            else None
        ),
    }
    kernels["auto"] = lambda q, k, v, **kw: local_attention(q, k, v, backend="auto", **kw)
    return kernels


def sdpa_reference(q: Tensor, k: Tensor, v: Tensor, *, window: int, head_window: int = 1) -> Tensor:
    """One band-masked SDPA call; its mask and head index come from :func:`_sdpa_masks`, built once
    per shape (outside the timed region once warmed up), as a user would prebuild them.

    Example:
        >>> q = torch.randn(1, 4, 9, 8)
        >>> sdpa_reference(q, q, q, window=3, head_window=3).shape
        torch.Size([1, 4, 9, 8])
    """
    batch, heads, time_, d_h = q.shape
    band, index = _sdpa_masks(time_, heads, window, head_window, q.device)
    if (
        index is not None
    ):  # (b, h, N, T, d_h) -> (b, h, N*T, d_h): slot s of head h is head index[h, s]
        k = k[:, index].reshape(batch, heads, head_window * time_, d_h)
        v = v[:, index].reshape(batch, heads, head_window * time_, d_h)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=band)


@functools.lru_cache(maxsize=4)
def _sdpa_masks(
    time_: int, heads: int, window: int, head_window: int, device: torch.device
) -> tuple[Tensor, Tensor | None]:
    """(T, N*T) bool band mask (the band repeated per head slot) and the (H, N) wrapped head index."""
    i = torch.arange(time_, device=device)
    band = (i[None, :] - i[:, None]).abs() <= window // 2  # (T, T)
    if head_window == 1:
        return band, None
    n = head_window // 2
    index = (
        torch.arange(heads, device=device)[:, None] + torch.arange(-n, n + 1, device=device)
    ) % heads
    return band.repeat(1, head_window), index


def harness(
    device: torch.device, *, threads_set: bool, repeats: int, warmup: int
) -> dict[str, Any]:
    """What the bench sets and how it times: written with every result, so that a reader can rerun it
    (or ``benchmarks/plain_attention.py``) under the same conditions.

    Example:
        >>> harness(torch.device("cpu"), threads_set=False, repeats=7, warmup=2)["gradients"]
        'out.sum().backward() (expanded stride-0 output gradient)'
    """
    threads = torch.get_num_threads()
    thp = os.environ.get("THP_MEM_ALLOC_ENABLE", "")
    return {
        "threads": f"{threads} ({'set by --threads' if threads_set else 'PyTorch default'})",
        "THP_MEM_ALLOC_ENABLE": (
            f"{thp!r} (huge pages for PyTorch's large CPU tensors; the csan CLI sets 1 unless set)"
            if thp
            else "unset (PyTorch's default allocator)"
        ),
        "gradients": "out.sum().backward() (expanded stride-0 output gradient)",
        "reference": "sdpa: one band-masked scaled_dot_product_attention, mask built once outside "
        "the timed region (N > 1: neighbouring heads' keys gathered into one N*T key axis, timed)",
        "timing": f"median of {repeats} interleaved rounds after {warmup} warm-up rounds",
        "memory": "torch.profiler CPU allocator events"
        if device.type == "cpu"
        else "torch.cuda.max_memory_allocated",
    }


def _measure(
    kernels: dict[str, Kernel],
    *,
    batch: int,
    time_: int,
    heads: int,
    head_dim: int,
    options: dict[str, Any],
    device: torch.device,
    repeats: int,
    warmup: int,
    memory: bool,
) -> dict[str, dict[str, Any]]:
    """Forward and forward+backward times of every kernel on the same inputs, timed interleaved, and
    (``memory``) each one's peak and workspace. Returns backend name -> measurements."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    shape = (batch, heads, time_, head_dim)
    q, k, v = (torch.randn(shape, generator=gen).to(device).requires_grad_() for _ in range(3))

    def forward(kernel: Kernel) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                kernel(q, k, v, **options)

        return run

    def train(kernel: Kernel) -> Callable[[], None]:
        def run() -> None:
            kernel(q, k, v, **options).sum().backward()
            q.grad = k.grad = v.grad = None

        return run

    runs = {"repeats": repeats, "warmup": warmup, "device": device}
    fwd = interleaved_ms({name: forward(kn) for name, kn in kernels.items()}, **runs)
    fwd_bwd = interleaved_ms({name: train(kn) for name, kn in kernels.items()}, **runs)
    gradients = 3 * q.numel() * q.element_size()  # live together when the backward ends
    rows: dict[str, dict[str, Any]] = {}
    for name, kernel in kernels.items():
        row: dict[str, Any] = {"forward_ms": fwd[name], "train_ms": fwd_bwd[name]}
        if memory:
            peak = peak_bytes(train(kernel), device)
            if peak < gradients:
                raise RuntimeError(
                    f"{name}: a peak of {peak} bytes is below its three gradients' {gradients}: "
                    "the memory measurement missed allocations"
                )
            row["peak_mib"] = peak / MIB
            row["workspace_mib"] = (peak - gradients) / MIB
        rows[name] = row
    return rows


def run_attention_bench(
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    *,
    window: int = 11,
    head_windows: Sequence[int] = (1, 3),
    heads: int = 8,
    head_dim: int = 64,
    batch: int = 1,
    device: str | torch.device = "cpu",
    repeats: int = 7,
    warmup: int = 2,
    backends: Sequence[str] = ("sdpa", "dense", "blocked", "native", "flex", "auto"),
    sentence: bool = True,
    memory: bool = True,
    max_dense_bytes: int = MAX_DENSE_BYTES,
    log: Callable[[str], None] | None = print,
) -> list[dict[str, Any]]:
    """Time (and measure memory of) every backend on every case; returns one dict per measurement.

    Each row: ``case`` ("long" or "sentence"), ``backend``, ``batch``, ``time``, ``heads``, ``head_dim``,
    ``window``, ``head_window``, ``status`` ("ok", "oom-skipped", "unavailable") and, when ok,
    ``forward_ms``, ``train_ms``, ``peak_mib``, ``workspace_mib`` (see the module docstring).

    Example:
        >>> rows = run_attention_bench([64], head_windows=(1,), repeats=1, sentence=False, log=None,
        ...                            backends=("sdpa", "dense", "blocked", "flex", "auto"))
        >>> sorted(r["backend"] for r in rows if r["status"] == "ok")
        ['auto', 'blocked', 'dense', 'sdpa']
    """
    device = torch.device(device)
    kernels = _kernels(device)
    cases = [("long", batch, t) for t in lengths]
    if sentence:
        cases.append(("sentence", *SENTENCE))
    rows = []
    # (backend, batch, N) -> (time, peak bytes) of the O(T^2) backends
    quadratic_peak: dict[tuple[str, int, int], tuple[int, float]] = {}
    for case, b, t in cases:
        for n in head_windows:
            options = {"window": window, "head_window": n}
            group: list[dict[str, Any]] = []
            timed: dict[str, Kernel] = {}
            for name in backends:
                row: dict[str, Any] = {
                    "case": case, "backend": name, "batch": b, "time": t, "heads": heads,
                    "head_dim": head_dim, "window": window, "head_window": n, "status": "ok",
                }  # fmt: skip
                kernel = kernels.get(name)
                if kernel is None:
                    row["status"] = "unavailable"
                elif name in QUADRATIC and _dense_too_big(
                    quadratic_peak.get((name, b, n)), t, max_dense_bytes
                ):
                    row["status"] = "oom-skipped"
                else:
                    timed[name] = kernel
                group.append(row)
            sizes = {"batch": b, "time_": t, "heads": heads, "head_dim": head_dim}
            runs = {"repeats": repeats, "warmup": warmup, "memory": memory}
            measured = _measure(timed, options=options, device=device, **sizes, **runs)
            for row in group:
                row.update(measured.get(row["backend"], {}))
                if row["backend"] in QUADRATIC and "peak_mib" in row:
                    quadratic_peak[(row["backend"], b, n)] = (t, row["peak_mib"] * MIB)
                rows.append(row)
                if log is not None:
                    log(format_row(row))
    return rows


def _dense_too_big(previous: tuple[int, float] | None, time_: int, limit: int) -> bool:
    """Whether dense at ``time_`` would pass ``limit`` bytes, scaling the last measured peak as T^2."""
    if previous is None:
        return False
    t0, peak0 = previous
    return peak0 * (time_ / t0) ** 2 > limit


def write_results(
    rows: list[dict[str, Any]],
    machine: dict[str, Any],
    out_dir: str | Path,
    *,
    command: str = "",
    harness: dict[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Save ``rows`` as ``attention-<device>-<date>.json`` and ``.md`` in ``out_dir`` with the machine and
    the harness (see :func:`harness`); return both paths.

    Example (the file names carry today's date):
        >>> import tempfile
        >>> row = {"case": "sentence", "batch": 64, "time": 32, "head_window": 1, "backend": "sdpa",
        ...        "status": "ok", "forward_ms": 1.5, "train_ms": 4.0}
        >>> json_path, md_path = write_results([row], {"device": "cpu", "cpu": "AMD EPYC"},
        ...                                    tempfile.mkdtemp(), command="csan bench attention")
        >>> json_path.name, md_path.name  # doctest: +ELLIPSIS
        ('attention-cpu-....json', 'attention-cpu-....md')
        >>> saved = json.loads(json_path.read_text())
        >>> list(saved), saved["rows"] == [row]
        (['date', 'command', 'machine', 'harness', 'rows'], True)
        >>> md_path.read_text().splitlines()[-1]
        '| sentence | 64 x 32 | 1 | sdpa | 1.50 | 4.00 | - | - | 1.0x | - |'
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    stem = f"attention-{machine['device'].split(':')[0]}-{now:%Y-%m-%d}"
    json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    payload = {
        "date": now.isoformat(timespec="seconds"),
        "command": command,
        "machine": machine,
        "harness": harness or {},
    }
    json_path.write_text(json.dumps({**payload, "rows": rows}, indent=2) + "\n")
    header = [f"# Attention benchmark, {payload['date']}", ""]
    if command:
        header += [f"Command: `{command}`", ""]
    header += ["## Machine", ""] + [f"- {key}: {value}" for key, value in machine.items()]
    header += ["", "## Harness", ""] + [
        f"- {key}: {value}" for key, value in (harness or {}).items()
    ]
    backends = "Backends:" + __doc__.split("Backends:", 1)[1].split("What is measured", 1)[0]
    measured = "What is measured" + __doc__.split("What is measured", 1)[1]
    header += ["", backends.strip(), "", measured.strip(), "", "## Results", "", ""]
    md_path.write_text("\n".join(header) + markdown_table(rows))
    return json_path, md_path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="csan bench attention", description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS))
    p.add_argument("--window", type=int, default=11)
    p.add_argument("--head-windows", type=int, nargs="+", default=[1, 3])
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: PyTorch's)")
    p.add_argument(
        "--backends", nargs="+", default=["sdpa", "dense", "blocked", "native", "flex", "auto"]
    )
    p.add_argument("--no-sentence", action="store_true", help="skip the batch 64 x 32 case")
    p.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    p.add_argument("--out", default="benchmarks/results", help="folder for the .json and .md files")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``csan bench attention ...``; prints the table and writes the results files.

    Example (one small case, two backends, one timed repeat; the times depend on the machine):
        >>> import tempfile
        >>> out = tempfile.mkdtemp()
        >>> main(["--lengths", "32", "--head-windows", "1", "--heads", "2", "--head-dim", "8",
        ...       "--repeats", "1", "--warmup", "0", "--backends", "sdpa", "dense",
        ...       "--no-sentence", "--no-memory", "--out", out])  # doctest: +ELLIPSIS
        long     b=1   T=32     N=1 sdpa     fwd ...
        long     b=1   T=32     N=1 dense    fwd ...
        <BLANKLINE>
        | case | batch x time | N | backend | forward ms | fwd+bwd ms | peak MiB | ...
        |---|---|---|---|---:|---:|---:|---:|---:|---:|
        | long | 1 x 32 | 1 | sdpa | ... | 1.0x | - |
        | long | 1 x 32 | 1 | dense | ... | - |
        <BLANKLINE>
        wrote .../attention-cpu-....json and .../attention-cpu-....md
        0
    """
    args = _parser().parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device, setting="--device")
    meter = HostMeter()  # the host's steal and product rate, kept with the machine record
    rows = run_attention_bench(
        args.lengths,
        window=args.window,
        head_windows=args.head_windows,
        heads=args.heads,
        head_dim=args.head_dim,
        batch=args.batch,
        device=device,
        repeats=args.repeats,
        warmup=args.warmup,
        backends=args.backends,
        sentence=not args.no_sentence,
        memory=not args.no_memory,
    )
    print()
    print(markdown_table(rows))
    command = "csan bench attention " + " ".join(sys.argv[1:] if argv is None else argv)
    setup = harness(
        device, threads_set=args.threads is not None, repeats=args.repeats, warmup=args.warmup
    )
    host = meter.record()
    json_path, md_path = write_results(
        rows,
        machine_info(device, **host),
        args.out,
        command=command.strip(),
        harness=setup,
    )
    report_steal(host["host_steal"], "the times are above this CPU's own")
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
