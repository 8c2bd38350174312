"""The memory part alone: read q, k, v (8 MiB each) and write four fresh 8 MiB tensors, timed right
after a band-masked SDPA call (forward + backward) and right after the same memory work."""

import statistics
import time

import torch
import torch.nn.functional as F

gen = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 8, 4096, 64, generator=gen).requires_grad_() for _ in range(3))
i = torch.arange(4096)
band = (i[None] - i[:, None]).abs() <= 5


def sdpa() -> None:
    F.scaled_dot_product_attention(q, k, v, attn_mask=band).sum().backward()
    for x in (q, k, v):
        x.grad = None


def memory() -> None:
    with torch.no_grad():
        for x in (q, k, v):
            x.sum().item()
        for buffer in [torch.empty_like(q) for _ in range(4)]:
            buffer.fill_(1.0)


sdpa()
for label, before in (("after sdpa", sdpa), ("after the same memory work", memory)):
    times = []
    for _ in range(7):
        before()
        start = time.perf_counter()
        memory()
        times.append(1e3 * (time.perf_counter() - start))
    print(
        f"{label}: read q, k, v and write 4 fresh 8 MiB tensors: {statistics.median(times):.2f} ms"
    )
