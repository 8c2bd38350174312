"""csan's local attention as a user's own script times it: no csan bench helpers, no settings changed.

    python benchmarks/plain_attention.py                 # prints the table
    python benchmarks/plain_attention.py --out DIR       # ... and writes plain-attention-<date>.{json,md}

What it does, and all it does: ``import csan.functional``, PyTorch's default threads and allocator
(no ``THP_MEM_ALLOC_ENABLE``, no ``torch.set_num_threads``), gradients by ``out.sum().backward()`` (so the
output gradient is a stride-0 expanded tensor, as in most user code). Each case times, interleaved in one
process (every round runs both, the order alternating), the median of 7 rounds after 2 warm-up rounds of

- ``csan``: ``local_attention(q, k, v, window=11, head_window=N)`` forward + ``.sum().backward()``;
- ``sdpa``: one band-masked ``torch.nn.functional.scaled_dot_product_attention`` call, forward +
  ``.sum().backward()``, its boolean mask built once, outside the timed region. For ``N > 1`` it is the
  dense 2D-CSAN formulation of ``csan.kernels.dense``: the keys and values of each head's N neighbouring
  heads (wrapped) gathered into one key axis of N*T positions (the gather is timed, it is part of the
  maths), and one (T, N*T) band mask.

Memory: the peak of live tensor bytes during one forward + backward above those live before it (inputs and
the prebuilt mask excluded; the output and the three gradients included), from the allocations and frees
PyTorch's CPU allocator reports to ``torch.profiler`` (``profile_memory=True``), replayed in time order;
the workspace is that peak less the three gradients, which both must hold at once at the end, as in
``csan bench attention`` (the output counts while it lives: ``.sum()`` needs it in the forward only, and a
kernel that keeps it for its backward holds it by its own choice).

The host: ``/proc/stat`` is read before the first case and after the last (:mod:`csan.host`), and
the share of the CPU time the hypervisor took is kept with the machine (``host_steal``) and named
when it is 5% or more; the host's product rate is taken after the last case (``host_products``),
so nothing runs before the cases that a user's process would not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from csan.functional import local_attention

HEADS, HEAD_DIM, WINDOW = 8, 64, 11
CASES = [  # (case, batch, time, head window)
    ("long", 1, 4096, 1),
    ("long", 1, 4096, 3),
    ("sentence", 64, 32, 1),
    ("sentence", 64, 32, 3),
]
MIB = 2**20


def sdpa_call(q, k, v, head_window: int):
    """One band-masked SDPA call (forward + backward), its mask and head index built here, once."""
    batch, heads, t, d = q.shape
    i = torch.arange(t)
    band = (i[None, :] - i[:, None]).abs() <= WINDOW // 2  # (T, T) bool
    if head_window == 1:
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=band)
    n = head_window // 2
    index = (torch.arange(heads)[:, None] + torch.arange(-n, n + 1)) % heads  # (H, N), wrapped
    mask = band.repeat(1, head_window)  # (T, N*T): slot s, key j -> column s*T + j

    def call():
        keys = k[:, index].reshape(batch, heads, head_window * t, d)  # (b, h, N*T, d)
        values = v[:, index].reshape(batch, heads, head_window * t, d)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)

    return call


def csan_call(q, k, v, head_window: int):
    return lambda: local_attention(q, k, v, window=WINDOW, head_window=head_window)


def train_step(forward, inputs):
    def run():
        forward().sum().backward()
        for x in inputs:
            x.grad = None

    return run


def peak_mib(fn) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()  # negative for a free
        peak = max(peak, live)
    return peak / MIB


def interleaved_medians(fns: dict, *, repeats: int, warmup: int) -> dict:
    """Median milliseconds of each call: ``warmup`` rounds, then ``repeats`` rounds that call every
    function once, in an order reversed every other round."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict = {name: [] for name in fns}
    for r in range(repeats):
        for name in list(fns)[:: 1 if r % 2 == 0 else -1]:
            start = time.perf_counter()
            fns[name]()
            times[name].append(1e3 * (time.perf_counter() - start))
    return {name: statistics.median(ts) for name, ts in times.items()}


def workspace_mib(peak: float, q) -> float:
    """The peak (MiB) less the three gradients, which every backend must hold at once at its end."""
    gradients = 3 * q.numel() * q.element_size() / MIB
    if peak < gradients:
        raise RuntimeError(
            f"a peak of {peak:.2f} MiB is below the three gradients' {gradients:.2f}"
        )
    return peak - gradients


def measure(batch: int, t: int, head_window: int, *, repeats: int, warmup: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    shape = (batch, HEADS, t, HEAD_DIM)
    q, k, v = (torch.randn(shape, generator=gen).requires_grad_() for _ in range(3))
    fns = {
        "csan": train_step(csan_call(q, k, v, head_window), (q, k, v)),
        "sdpa": train_step(sdpa_call(q, k, v, head_window), (q, k, v)),
    }
    medians = interleaved_medians(fns, repeats=repeats, warmup=warmup)
    row = {"batch": batch, "time": t, "head_window": head_window}
    for name, fn in fns.items():
        row[f"{name}_ms"] = medians[name]
        row[f"{name}_peak_mib"] = peak_mib(fn)
        row[f"{name}_workspace_mib"] = workspace_mib(row[f"{name}_peak_mib"], q)
    row["speedup"] = row["sdpa_ms"] / row["csan_ms"]
    csan_workspace = row["csan_workspace_mib"]
    row["workspace_ratio"] = (
        row["sdpa_workspace_mib"] / csan_workspace if csan_workspace else math.inf
    )
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| case | batch x time | N | csan ms | sdpa ms | sdpa/csan time | csan peak MiB "
        "| sdpa peak MiB | csan workspace MiB | sdpa workspace MiB | sdpa/csan workspace |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['batch']} x {r['time']} | {r['head_window']} | {r['csan_ms']:.2f} "
            f"| {r['sdpa_ms']:.2f} | {r['speedup']:.2f}x | {r['csan_peak_mib']:.1f} "
            f"| {r['sdpa_peak_mib']:.1f} | {r['csan_workspace_mib']:.1f} "
            f"| {r['sdpa_workspace_mib']:.1f} | {r['workspace_ratio']:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", default=None, help="folder for plain-attention-<date>.{json,md}")
    args = p.parse_args(argv)
    from csan.host import HostMeter, report_steal  # /proc/stat now, the products after the cases

    meter = HostMeter(at_start=False)
    rows = []
    for case, batch, t, n in CASES:
        row = {"case": case, **measure(batch, t, n, repeats=args.repeats, warmup=args.warmup)}
        rows.append(row)
        print(
            f"{case:8} {batch:>2} x {t:<5} N={n}  csan {row['csan_ms']:8.2f} ms  "
            f"sdpa {row['sdpa_ms']:8.2f} ms  ({row['speedup']:.2f}x)  workspace csan "
            f"{row['csan_workspace_mib']:.1f} MiB, sdpa {row['sdpa_workspace_mib']:.1f} MiB "
            f"({row['workspace_ratio']:.1f}x)",
            flush=True,
        )
    host = meter.record()
    print()
    print(table(rows))
    report_steal(host["host_steal"], "the times are above this CPU's own")
    if args.out:
        from csan.machine import machine_info

        command = "python benchmarks/plain_attention.py " + " ".join(sys.argv[1:])
        machine = machine_info("cpu", command=command.strip(), **host)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.timezone.utc)
        stem = out / f"plain-attention-{machine['capability'].lower()}-{now:%Y-%m-%d}"
        payload = {"date": now.isoformat(timespec="seconds"), "machine": machine, "rows": rows}
        stem.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
        head = [f"# Plain-script attention benchmark, {payload['date']}", ""]
        head += [f"- {key}: {value}" for key, value in machine.items()]
        head += ["", __doc__.split("\n\n", 2)[2].strip(), "", ""]
        stem.with_suffix(".md").write_text("\n".join(head) + table(rows))
        print(f"wrote {stem}.json and {stem}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
