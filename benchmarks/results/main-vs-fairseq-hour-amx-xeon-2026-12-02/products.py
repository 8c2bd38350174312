import statistics, time, torch
from csan.machine import describe_machine
print(describe_machine().summary())
a = torch.randn(4096, 256); b = torch.randn(256, 1024)
for dt in (torch.float32, torch.bfloat16):
    x, y = a.to(dt), b.to(dt)
    for _ in range(5): x @ y
    ts = []
    for _ in range(20):
        t = time.perf_counter(); x @ y; ts.append(time.perf_counter() - t)
    print(f"{dt}: 4096x256 @ 256x1024 median of 20: {statistics.median(ts)*1e3:.2f} ms")
