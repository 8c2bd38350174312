"""Timing and memory primitives the benchmarks share: interleaved medians and peak live bytes."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["interleaved_ms", "peak_bytes", "sync"]


def sync(device: torch.device) -> None:
    """Wait until ``device`` has run the work queued on it (CUDA); nothing to wait for on the CPU.

    Example:
        >>> y = torch.ones(2, 3) @ torch.ones(3, 2)
        >>> sync(y.device)  # on CUDA: the product is done before a clock is read
        >>> y.sum().item()
        12.0
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved_ms(
    fns: dict[str, Callable[[], object]], *, repeats: int, warmup: int, device: torch.device
) -> dict[str, float]:
    """Median wall time (ms) of each function, timed in rounds: every round runs each function once,
    the order rotating from round to round, so that all of them see the same machine state (a slow
    spell of a shared machine lands on every backend, not on one).

    Example:
        >>> calls = []
        >>> fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
        >>> ms = interleaved_ms(fns, repeats=3, warmup=1, device=torch.device("cpu"))
        >>> sorted(ms), calls  # one warmup round, then the order rotates round by round
        (['a', 'b'], ['a', 'b', 'a', 'b', 'b', 'a', 'a', 'b'])
    """
    names = list(fns)
    if not names:
        return {}
    for _ in range(warmup):
        for name in names:
            fns[name]()
    sync(device)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            fns[name]()
            sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(ts) for name, ts in times.items()}


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak live tensor bytes while ``fn`` runs, above the bytes live when it starts.

    Example (on the CPU: a million float32 zeros, then a million ones and their negation at once):
        >>> cpu = torch.device("cpu")
        >>> peak_bytes(lambda: torch.zeros(1000, 1000), cpu)
        4000000
        >>> peak_bytes(lambda: torch.ones(1000, 1000).neg(), cpu)
        8000000
    """
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        fn()
        sync(device)
        return torch.cuda.max_memory_allocated(device) - start
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for event in events:
        live += event.nbytes()  # negative for a free
        peak = max(peak, live)
    return peak
