"""Attention maths as plain functions: validation here, the arithmetic in :mod:`csan.kernels`.

Notation (SPEC.md): q, k, v are (batch, heads, time, d_h); ``key_padding_mask`` is (batch, time) bool, True
at padding; logits are ``q_i . k_j / sqrt(d_h)``; a query row with no allowed key outputs zeros.

Example:
    >>> import torch
    >>> q = torch.randn(2, 4, 9, 8)
    >>> local_attention(q, q, q, window=3, head_window=3).shape
    torch.Size([2, 4, 9, 8])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from csan.kernels import native
from csan.kernels.blocked import blocked_local_attention
from csan.kernels.checks import HEAD_BOUNDARIES, check_local_attention, check_local_options
from csan.kernels.dense import dense_local_attention, masked_attention
from csan.kernels.native import native_local_attention
from csan.kernels.reference import reference_local_attention

__all__ = [
    "BACKENDS",
    "HEAD_BOUNDARIES",
    "attention_mask",
    "check_local_options",
    "choose_backend",
    "local_attention",
    "masked_attention",
    "masked_softmax",
]

BACKENDS = ("auto", "dense", "reference", "blocked", "native", "flex")
# "auto" on the CPU: the native kernel wherever it can do the call (csan.kernels.native; at 64 x 32
# tokens 1.3x (N=1) and 3.3x (N=3) as fast as one masked SDPA call, Intel Xeon 2026-12-04), else the
# blocked O(T*M) kernel from this many positions on, dense below.
BLOCKED_MIN_TIME = 128  # measured crossover on a 2-core CPU (benchmarks/results): ~96-128 at M=11
BLOCKED_MIN_WINDOWS = 8  # ... and about 8 windows long (M=31 crosses at ~192-256)


def choose_backend(time: int, window: int, device: torch.device) -> str:
    """The kernel ``backend="auto"`` uses for a sequence of ``time`` positions where the native
    kernel does not take the call (off the CPU; with padding, dropout or bf16; without a compiler).

    Dense (one masked SDPA, O(T^2)) unless the tensors are on the CPU
    and the sequence is long: ``time >= max(BLOCKED_MIN_TIME, BLOCKED_MIN_WINDOWS * window)`` (crossovers
    measured with ``csan bench attention`` on a 2-core CPU; on CUDA dense until measured there).

    Example:
        >>> choose_backend(30, 11, torch.device("cpu"))
        'dense'
    """
    long_sequence = time >= max(BLOCKED_MIN_TIME, BLOCKED_MIN_WINDOWS * window)
    if long_sequence and device.type == "cpu":
        return "blocked"
    return "dense"


def local_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    window: int,
    head_window: int = 1,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    head_boundary: str = "wrap",
    dropout_p: float = 0.0,
    backend: str = "auto",
) -> Tensor:
    """1D-CSAN (``head_window=1``) and 2D-CSAN attention, as SPEC.md defines them.

    Query ``i`` of head ``h`` reads the keys at positions ``|i - j| <= (window-1)/2`` (causal:
    ``i - window < j <= i``) of heads ``h-n .. h+n`` (``n = (head_window-1)/2``; ``"wrap"`` takes heads
    modulo H, ``"clip"`` drops heads past the edge), never padding keys, with one softmax over all slots;
    values come from the same slots. Scale ``1/sqrt(d_h)``. A query with no allowed key outputs zeros.

    Args:
        q: (batch, heads, t_q, d_h). ``t_q == t_k``, except with ``causal=True`` where ``t_q < t_k`` is
            allowed: the queries are then the last ``t_q`` positions (cached decoding).
        k, v: (batch, heads, t_k, d_h).
        window: M, odd, >= 1. ``M >= 2T - 1`` equals full attention.
        head_window: N, odd, ``1 <= N <= heads``; 1 is 1D-CSAN.
        key_padding_mask: (batch, t_k) bool, True at padding, or None.
        causal: restrict to keys at or before the query.
        head_boundary: ``"wrap"`` or ``"clip"``.
        dropout_p: dropout on the attention weights (pass 0 in evaluation).
        backend: ``"auto"`` (see :func:`choose_backend`), ``"dense"``, ``"reference"`` (slow, from the
            definition), ``"blocked"`` (the O(T*M) kernel in PyTorch operations), ``"native"`` (the
            O(T*M) kernel in native code, :mod:`csan.kernels.native`: CPU, float32/64, one head
            window, no padding or dropout; the blocked kernel for other calls) or ``"flex"``
            (FlexAttention, CUDA only, no dropout: a ``ValueError`` elsewhere). On the CPU ``"auto"``
            takes the native kernel for every call it can do, at any length (not under
            ``torch.compile``: there the kernels it can trace). Blocked,
            native and flex use dense where they cannot do the call: cached queries, fewer than the
            keys.

    Returns:
        (batch, heads, t_q, d_h).

    Example:
        >>> q = torch.randn(1, 2, 5, 4)
        >>> wide = local_attention(q, q, q, window=9)
        >>> torch.allclose(wide, torch.nn.functional.scaled_dot_product_attention(q, q, q), atol=1e-6)
        True
    """
    check_local_attention(
        q,
        k,
        v,
        key_padding_mask,
        window=window,
        head_window=head_window,
        head_boundary=head_boundary,
        dropout_p=dropout_p,
        fewer_queries=causal,
    )
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    options = {
        "window": window,
        "head_window": head_window,
        "key_padding_mask": key_padding_mask,
        "causal": causal,
        "head_boundary": head_boundary,
    }
    explicit = backend == "native"
    if backend == "auto":  # the native kernel wherever it can do the call, at any length, except
        # under torch.compile, which gets the PyTorch kernels it can trace and fuse
        eager_cpu = q.device.type == "cpu" and not torch.compiler.is_compiling()
        backend = "native" if eager_cpu else choose_backend(k.size(2), window, q.device)
    if backend == "reference":
        return reference_local_attention(q, k, v, dropout_p=dropout_p, **options)
    if backend == "flex":
        _check_flex(q.device, dropout_p)
    same_length = q.size(2) == k.size(2)
    if backend == "native" and same_length:
        if _native_can(q, explicit, dropout_p=dropout_p, **options):
            return native_local_attention(
                q,
                k,
                v,
                window=window,
                head_window=head_window,
                causal=causal,
                head_boundary=head_boundary,
            )
        backend = "blocked" if explicit else choose_backend(k.size(2), window, q.device)
    if backend == "blocked" and same_length:
        return blocked_local_attention(q, k, v, dropout_p=dropout_p, **options)
    if backend == "flex" and same_length:
        from csan.kernels.flex import flex_local_attention  # torch.compile machinery: on demand

        return flex_local_attention(q, k, v, **options)
    return dense_local_attention(q, k, v, dropout_p=dropout_p, **options)


def _native_can(
    q: Tensor,
    explicit: bool,
    *,
    window: int,
    head_window: int,
    key_padding_mask: Tensor | None,
    dropout_p: float,
    **_: object,
) -> bool:
    """Whether the native kernel takes a call the blocked kernel would otherwise take: where
    :func:`csan.kernels.native.supports` it and the library builds. ``backend="native"`` on a call
    it supports, without the library, is a ``ValueError`` that says why."""
    if not native.supports(
        q,
        head_window=head_window,
        padded=key_padding_mask is not None,
        dropout_p=dropout_p,
        window=window,
    ):
        return False
    if native.available():
        return True
    if explicit:
        raise ValueError(
            "backend='native': the native kernel could not be built or was turned off "
            "(CSAN_NATIVE=0; it needs a C++ compiler on the PATH, see csan.kernels.native). "
            "Use backend='auto' or 'blocked'."
        )
    return False


def _check_flex(device: torch.device, dropout_p: float) -> None:
    """Raise ``ValueError`` unless ``backend="flex"`` can run: CUDA, a PyTorch with flex, no dropout."""
    from csan.kernels.flex import flex_available

    if not flex_available(device):
        raise ValueError(
            f"backend='flex' needs a CUDA device and PyTorch >= 2.5 (flex attention); the tensors "
            f"are on {device} (torch {torch.__version__}). Use backend='auto', 'dense' or 'blocked'."
        )
    if dropout_p > 0.0:
        raise ValueError(f"backend='flex' has no attention dropout; got dropout_p={dropout_p!r}")


def attention_mask(
    t_q: int,
    t_k: int,
    *,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    device: torch.device | None = None,
) -> Tensor | None:
    """Bool mask (batch or 1, 1, t_q, t_k) of the keys each query may read; None when all.

    Causal with ``t_q < t_k``: the queries are the last ``t_q`` positions.

    Example:
        >>> attention_mask(2, 3, causal=True)[0, 0].int().tolist()
        [[1, 1, 0], [1, 1, 1]]
    """
    allowed = None
    if causal:
        allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q)[None, None]
    if key_padding_mask is not None:
        keys = ~key_padding_mask[:, None, None, :]  # (batch, 1, 1, t_k)
        allowed = keys if allowed is None else allowed & keys
    return allowed


def masked_softmax(scores: Tensor, allowed: Tensor | None, *, dropout_p: float = 0.0) -> Tensor:
    """Softmax over the last axis restricted to ``allowed`` (broadcastable bool); empty rows give zeros.

    Example:
        >>> masked_softmax(torch.zeros(2, 2), torch.tensor([[True, True], [False, False]])).tolist()
        [[0.5, 0.5], [0.0, 0.0]]
    """
    if allowed is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        has_key = allowed.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(~has_key, 0.0)
        weights = torch.softmax(scores, dim=-1).masked_fill(~has_key, 0.0)
    return F.dropout(weights, p=dropout_p) if dropout_p > 0.0 else weights
