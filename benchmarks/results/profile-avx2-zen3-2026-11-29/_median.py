"""The timing every script here shares: ``warmup`` calls, then the median of ``n`` timed calls."""

import statistics
import time


def median_seconds(f, *, n: int, warmup: int) -> float:
    for _ in range(warmup):
        f()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
