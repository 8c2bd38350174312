"""The loss alone, forward and backward: the checkout's _SmoothedNLL ("old" when run with
PYTHONPATH=<checkout at 56147fc>/src) against the softmax form that landed ("new")."""

import statistics
import time

import torch

from csan.machine import keep_freed_memory
from csan.training.loss import _SmoothedNLL

keep_freed_memory()
torch.set_num_threads(1)


class New(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, target, eps):
        p = torch.softmax(z, -1)
        lse = z.amax(-1) - p.amax(-1).log()
        nll = lse - z.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        out = nll if not eps else nll - eps * (nll - (lse - z.mean(-1)))
        ctx.save_for_backward(p, target)
        ctx.eps = eps
        ctx.mark_non_differentiable(nll)
        return out, nll

    @staticmethod
    def backward(ctx, g, _):
        p, target = ctx.saved_tensors
        eps = ctx.eps
        gc = g.unsqueeze(-1)
        grad = torch.addcmul(gc * (-eps / p.size(-1)), p, gc)
        grad.scatter_add_(-1, target.unsqueeze(-1), gc * (eps - 1.0))
        return grad, None, None


N, V = 3840, 8000
z = torch.randn(N, V) * 3
z.requires_grad_()
t = torch.randint(0, V, (N,))
res = {}
for r in range(9):
    for name, F in (("old", _SmoothedNLL), ("new", New)):
        z.grad = None
        t0 = time.perf_counter()
        loss, nll = F.apply(z, t, 0.1)
        (loss.sum() / 3000).backward()
        if r >= 2:
            res.setdefault(name, []).append(time.perf_counter() - t0)
        if r == 8:
            res[name + "_val"] = (loss.sum().item(), nll.sum().item(), z.grad.clone())
for n in ("old", "new"):
    print(n, f"{statistics.median(res[n]) * 1e3:.1f} ms", res[n + "_val"][:2])
print("grad max diff", (res["old_val"][2] - res["new_val"][2]).abs().max().item())
