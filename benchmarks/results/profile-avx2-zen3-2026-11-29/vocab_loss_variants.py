"""The vocabulary projection and its loss, forward and backward (1,020 x 256 -> 8,000): as the
trainer computes it, chunked over rows with the gradients made in the forward, and through numpy's
OpenBLAS.

    python benchmarks/results/profile-avx2-zen3-2026-11-29/vocab_loss_variants.py
"""

import torch

from csan.bench.train import median_step
from csan.training.loss import label_smoothed_nll

torch.manual_seed(0)
N, d, V, eps = 1020, 256, 8000, 0.1
W = (torch.randn(V, d) * d**-0.5).requires_grad_()
h0 = torch.randn(N, d)
t = torch.randint(0, V, (N,))


def ref():
    h = h0.clone().requires_grad_()
    loss, _nll = label_smoothed_nll(
        torch.nn.functional.linear(h, W), t, epsilon=eps, ignore_index=None
    )
    loss.backward()
    return loss, h.grad


def fused(chunk):
    def f():
        gh = torch.empty(N, d)
        gW = torch.zeros(V, d)
        tot = torch.zeros(())
        for s in range(0, N, chunk):
            hc = h0[s : s + chunk]
            tc = t[s : s + chunk]
            z = hc @ W.detach().t()
            zmax = z.amax(-1, keepdim=True)
            p = torch.softmax(z, -1)
            lse = zmax.squeeze(-1) - p.amax(-1).log()
            nll = lse - z.gather(-1, tc[:, None]).squeeze(-1)
            loss = (1 - eps) * nll + eps * (lse - z.mean(-1))
            tot += loss.sum()
            p.sub_(eps / V)
            p.scatter_add_(-1, tc[:, None], torch.full((hc.size(0), 1), eps - 1.0))
            torch.mm(p, W.detach(), out=gh[s : s + chunk])
            gW.addmm_(p.t(), hc)
        return tot, gh

    return f


def bench(f, n=11):
    return median_step(f, warmup=3, repeats=n) * 1e3


l0, g0 = ref()
for c in (64, 128, 256, 512, 1020):
    l1, g1 = fused(c)()
    assert torch.allclose(l0, l1, rtol=1e-4), (l0, l1)
    assert torch.allclose(g0, g1, atol=1e-5), (g0 - g1).abs().max()
W.grad = None
print(f"ref {bench(ref):.1f} ms")
for c in (64, 128, 256, 512, 1020):
    print(f"fused chunk {c}: {bench(fused(c)):.1f} ms")
print(f"ref {bench(ref):.1f} ms")


class NpLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.from_numpy(x.detach().numpy() @ w.detach().numpy().T)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gn = g.contiguous().numpy()
        return torch.from_numpy(gn @ w.detach().numpy()), torch.from_numpy(
            gn.T @ x.detach().numpy()
        )


def npref():
    h = h0.clone().requires_grad_()
    loss, _nll = label_smoothed_nll(NpLinear.apply(h, W), t, epsilon=eps, ignore_index=None)
    loss.backward()
    return loss, h.grad


l1, g1 = npref()
assert torch.allclose(g0, g1, atol=1e-5)
for _ in range(3):
    W.grad = None
    print(f"ref {bench(ref):.1f} ms   numpy/openblas {bench(npref):.1f} ms")
