"""A 4096x256 @ 256x1024 product in float32 and in bf16: median of 20 after 5 warm-up calls."""

import statistics
import time

import torch

from csan.machine import describe_machine

print(describe_machine().summary())
a, b = torch.randn(4096, 256), torch.randn(256, 1024)
for dtype in (torch.float32, torch.bfloat16):
    x, y = a.to(dtype), b.to(dtype)
    for _ in range(5):
        x @ y
    times = []
    for _ in range(20):
        start = time.perf_counter()
        x @ y
        times.append(time.perf_counter() - start)
    print(f"{dtype}: 4096x256 @ 256x1024 median of 20: {statistics.median(times) * 1e3:.2f} ms")
