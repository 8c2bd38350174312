"""Small building blocks shared by the models.

:func:`dropout` is a faster CPU dropout: PyTorch's draws a float Bernoulli per element, which on a
2-core CPU costs more than the layer's matmuls; this one draws one random byte per element (four from
each 32-bit draw) and keeps it when ``byte >= round(p * 256)``. The drop probability is therefore ``p`` rounded to a multiple of
1/256 (0.3 -> 77/256 = 0.3008), and kept values are scaled by ``256 / (256 - round(p * 256))`` so the
expectation is unchanged. On CUDA it is ``torch.nn.functional.dropout``.

Under ``torch.compile`` on CPU the random bytes come from the custom op ``csan::fill_random_bytes_`` (the
same 32-bit draws, run as an extern call), and the compare, scale and multiply stay in the graph, where
inductor fuses them with the residual add and layer norm. Left to inductor, ``F.dropout`` draws each
element with its own generated random number code: a bf16 training step of ``multi30k-small`` at
1,024 tokens on a 2-core Zen 4 took 274 ms, and 255 ms with this (medians of five alternated
processes; 221 ms in one run with no dropout at all;
``benchmarks/results/dropout-compiled-zen4-2026-11-27/``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["dropout", "fill_random_bytes_", "relu"]


def _draw_bytes(n: int, device: torch.device) -> Tensor:
    """``n`` uniform random bytes from the global generator, four from each 32-bit draw."""
    # 32 random bits make 4 bytes: a tenth of the time of drawing uint8 values one by one
    bits = torch.empty((n + 3) // 4, dtype=torch.int32, device=device)
    bits.random_(-(2**31), 2**31)
    return bits.view(torch.uint8)[:n]


@torch.library.custom_op(
    "csan::fill_random_bytes_", mutates_args=("out",), tags=(torch.Tag.nondeterministic_seeded,)
)
def fill_random_bytes_(out: Tensor) -> None:
    """Fill the ``uint8`` tensor ``out`` with uniform random bytes, the draws eager dropout makes.

    A custom op so that a compiled graph calls it as one opaque kernel. It writes into ``out``
    rather than returning a tensor: a mutation is never merged with another call on equal inputs
    (the compiler's common-subexpression pass would merge two functional calls, and with them two
    dropout masks), and the tag keeps the partitioner from recomputing it in the backward.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> b = torch.empty(2, 3, dtype=torch.uint8)
        >>> fill_random_bytes_(b)
        >>> _ = torch.manual_seed(0)
        >>> bool(torch.equal(b.flatten(), _draw_bytes(6, b.device)))
        True
    """
    if out.is_contiguous() and out.numel() % 4 == 0 and out.storage_offset() % 4 == 0:
        out.view(-1).view(torch.int32).random_(-(2**31), 2**31)  # in place: no copy
    else:
        out.copy_(_draw_bytes(out.numel(), out.device).view(out.shape))


class _ByteDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, threshold: int) -> Tensor:
        # compared straight into x's dtype: a boolean mask and a cast would be two more passes
        # (random bytes -> bool -> float took 1.6x as long on AVX2)
        mask = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        torch.ge(_draw_bytes(x.numel(), x.device).view(x.shape), threshold, out=mask)
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
    if x.device.type != "cpu":
        return F.dropout(x, p, training)
    threshold = round(p * 256)
    if threshold <= 0:
        return x
    if threshold >= 256:
        return torch.zeros_like(x)
    if torch.compiler.is_compiling():
        # traced: the keep mask is arithmetic on the bytes (1 where byte >= threshold, else 0), not
        # a comparison: inductor's CPU code stores booleans slowly, and a comparison made the
        # partitioner save one per dropout (2 ms each at 1,024 x 256; the bytes are saved instead)
        bytes_ = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
        torch.ops.csan.fill_random_bytes_(bytes_)
        keep = (bytes_.to(x.dtype) - (threshold - 1)).clamp(0, 1)
        return x * (keep * (256.0 / (256 - threshold)))
    return _ByteDropout.apply(x, threshold)


class _ReluFromOutput(torch.autograd.Function):
    """ReLU whose backward reads its output: ``grad * sign(y)``, no boolean mask saved.

    Compiled, ``F.relu``'s backward made inductor store a boolean mask of the feed-forward
    activations in the forward, and its generated code writes booleans slowly on CPU (about 3 ms for
    1M elements, against 0.1 ms for the ReLU itself; a 1,024-token ``multi30k-small`` step has six).
    Without activation dropout (the presets) the output is what ``fc2``'s weight gradient saves
    anyway, and for ``y >= 0`` ``sign(y)`` is the ReLU's derivative (0 at 0, as ``F.relu``'s).
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.relu(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return grad * torch.sign(y)


def relu(x: Tensor) -> Tensor:
    """``F.relu``; compiled, with its derivative taken from its output (see ``_ReluFromOutput``).

    Example:
        >>> relu(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0., 0., 2.])
    """
    return _ReluFromOutput.apply(x) if torch.compiler.is_compiling() else F.relu(x)
