"""Small building blocks shared by the models.

:func:`dropout` is a faster CPU dropout: PyTorch's draws a float Bernoulli per element, which on a
2-core CPU costs more than the layer's matmuls; this one draws one random byte per element (four from
each 32-bit draw) and keeps it when ``byte >= round(p * 256)``. The drop probability is therefore ``p`` rounded to a multiple of
1/256 (0.3 -> 77/256 = 0.3008), and kept values are scaled by ``256 / (256 - round(p * 256))`` so the
expectation is unchanged. On CUDA it is ``torch.nn.functional.dropout``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["dropout"]


class _ByteDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, threshold: int) -> Tensor:
        n = x.numel()
        # 32 random bits make 4 bytes: a tenth of the time of drawing uint8 values one by one
        bits = torch.empty((n + 3) // 4, dtype=torch.int32, device=x.device)
        bits.random_(-(2**31), 2**31)
        # compared straight into x's dtype: a boolean mask and a cast would be two more passes
        # (random bytes -> bool -> float took 1.6x as long on AVX2)
        mask = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        torch.ge(bits.view(torch.uint8)[:n].view(x.shape), threshold, out=mask)
        mask.mul_(256.0 / (256 - threshold))  # 0, or the scale of kept values
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (mask,) = ctx.saved_tensors
        return grad * mask, None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout with drop probability ``p`` (rounded to 1/256 on CPU, see the module docstring).

    Example:
        >>> x = torch.ones(1000, 100)
        >>> y = dropout(x, 0.3, True)
        >>> 0.28 < float((y == 0).float().mean()) < 0.32, abs(float(y.mean()) - 1) < 0.02
        (True, True)
        >>> bool(torch.equal(dropout(x, 0.3, False), x))
        True
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        return F.dropout(x, p, training)
    threshold = round(p * 256)
    if threshold <= 0:
        return x
    if threshold >= 256:
        return torch.zeros_like(x)
    return _ByteDropout.apply(x, threshold)
