"""Local attention on CUDA with ``torch.nn.attention.flex_attention`` and a sparse block mask.

Notation (SPEC.md): q, k, v (batch, heads, time, d_h); window ``M`` (odd), head window ``N`` (odd);
``key_padding_mask`` (batch, time) bool, True at padding.

1D-CSAN is a ``mask_mod`` (the band, the padding) whose block mask skips every 128x128 tile outside the
band, so the fused kernel does O(T*M) work. 2D-CSAN gathers the ``N`` neighbouring heads' keys and values
into one key axis of length ``N*T`` (slot ``s`` holds head ``h + s - n``), so one softmax runs over all
``N x M`` slots; the mask adds "the head exists" for ``head_boundary="clip"``.

Meant for CUDA: there the call is compiled (``torch.compile``) into one fused kernel. On the CPU it runs
unfused and forward-only (PyTorch has no CPU backward for flex attention): useful to test the masks, not
for speed. Importing this module never fails; :func:`flex_available` says whether the kernel can run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from csan.kernels.dense import head_neighbours

__all__ = ["flex_available", "flex_local_attention"]

try:  # PyTorch >= 2.5
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError:  # pragma: no cover - old PyTorch
    BlockMask = create_block_mask = flex_attention = None


def flex_available(device: torch.device | str = "cuda") -> bool:
    """Whether the fused flex kernel can run on ``device`` (CUDA and a PyTorch that has it).

    Example:
        >>> flex_available("cpu")
        False
    """
    device = torch.device(device)
    return flex_attention is not None and device.type == "cuda" and torch.cuda.is_available()


@functools.cache
def _compiled() -> Callable[..., Tensor]:
    return torch.compile(flex_attention)  # recompiles for new shapes, then goes dynamic


def flex_local_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    window: int,
    head_window: int = 1,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    head_boundary: str = "wrap",
) -> Tensor:
    """1D/2D-CSAN attention by flex attention; same contract as ``csan.functional.local_attention``.

    Options are not validated here (``csan.functional`` does it). A query with no allowed key gives zeros.

    Example:
        >>> q = torch.randn(1, 4, 20, 8)
        >>> flex_local_attention(q, q, q, window=5, head_window=3).shape
        torch.Size([1, 4, 20, 8])
    """
    if flex_attention is None:
        raise RuntimeError(f"flex attention needs PyTorch >= 2.5, this is {torch.__version__}")
    batch, heads, time, d_h = q.shape
    slots = head_window
    index, exists = head_neighbours(heads, head_window, head_boundary, q.device)
    if slots > 1:  # (b, h, N, T, d_h) -> (b, h, N*T, d_h): slot s of head h is head index[h, s]
        k = k[:, index].reshape(batch, heads, slots * time, d_h)
        v = v[:, index].reshape(batch, heads, slots * time, d_h)
    left, right = (window - 1, 0) if causal else (window // 2, window // 2)
    clipped = exists if slots > 1 and head_boundary == "clip" else None  # else every head exists
    block_mask = _block_mask(
        batch, time, left, right, clipped, key_padding_mask, heads, slots, q.device
    )
    attend = _compiled() if q.is_cuda else flex_attention
    return attend(q, k, v, block_mask=block_mask, scale=d_h**-0.5)


def _block_mask(
    batch: int,
    time: int,
    left: int,
    right: int,
    exists: Tensor | None,
    pad: Tensor | None,
    heads: int,
    slots: int,
    device: torch.device,
) -> BlockMask:
    """The sparse block mask of the band (``left`` before, ``right`` after), the padding and, where
    ``exists`` (heads, slots) is given (``head_boundary="clip"``), the missing heads; key position
    ``s*T + j`` is slot ``s``, position ``j``.

    Every scalar the mask reads (T, the band's bounds) is a tensor, not a Python int: the compiled
    kernel then takes them as inputs. As ints, dynamo turns them into symbols when they change between
    calls (a second window, a second length), and inductor cannot lower a ``mask_mod`` that reads a
    symbol (PyTorch 2.11-2.13: "'ShapeAsConstantBuffer' object has no attribute 'dtype'"). On CUDA
    the mask is built by a compiled ``create_block_mask``, which never holds a (B, H, T, N*T) tensor.
    """
    scalars = torch.tensor([time, left, right], device=device)

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        slot, j = kv_idx // scalars[0], kv_idx % scalars[0]
        offset = j - q_idx
        allowed = (offset >= -scalars[1]) & (offset <= scalars[2])
        if exists is not None:
            allowed = allowed & exists[h, slot]
        if pad is not None:
            allowed = allowed & ~pad[b, j]
        return allowed

    return create_block_mask(
        mask_mod,
        None if pad is None else batch,
        heads,
        time,
        slots * time,
        device=device,
        BLOCK_SIZE=128,
        _compile=device.type == "cuda",
    )
