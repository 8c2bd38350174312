"""Per-shape masks and head indices of the kernels, built once and cached.

Notation (SPEC.md): q (batch, heads, t_q, d_h); k, v (batch, heads, t_k, d_h), ``t_q <= t_k`` (the queries
are the last ``t_q`` positions); window ``M`` (odd), head window ``N`` (odd).

The band of a window, the head neighbours of 2D-CSAN and the dense kernel's (t_q, N*t_k) mask depend on
the shape and the options only, not on the data; building them on every call costs a user's process a
few allocations and kernel launches per call, which at sentence length is several percent of a whole
attention call. They are kept in small LRU caches keyed by shape, options and device.

The cached tensors are shared between calls: **never modify them in place** (every kernel here only
reads them; combine them out of place, ``band & other``). Masks of more than :data:`MAX_CACHED_ELEMENTS`
elements are built afresh on each call (a 16k x 16k band would pin 256 MiB; at that size the attention
itself dwarfs building the mask). :func:`clear_caches` empties the caches. Under ``torch.compile`` the
masks are built directly: the compiled graph builds them itself, and Dynamo would otherwise trace
through (and warn about) the ``lru_cache`` wrappers.

Example:
    >>> a = band(3, 3, window=3, causal=False, device=torch.device("cpu"))
    >>> a is band(3, 3, window=3, causal=False, device=torch.device("cpu"))
    True
    >>> a.int().tolist()
    [[1, 1, 0], [1, 1, 1], [0, 1, 1]]
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

__all__ = ["MAX_CACHED_ELEMENTS", "band", "clear_caches", "dense_mask", "head_neighbours"]

MAX_CACHED_ELEMENTS = (
    2**20
)  # masks up to 1 Mi bools (1 MiB) are cached, larger ones rebuilt per call
_CACHE_ENTRIES = 64  # per cache: sentence lengths of a training run, a few long-sequence shapes


def _use_cache(elements: int) -> bool:
    """Whether a mask of ``elements`` entries goes through a cache: when it is small, and not under
    ``torch.compile``, whose graph builds it (Dynamo would trace through the cache and warn)."""
    return elements <= MAX_CACHED_ELEMENTS and not torch.compiler.is_compiling()


def build_band(t_q: int, t_k: int, *, window: int, causal: bool, device: torch.device) -> Tensor:
    """A fresh (t_q, t_k) bool band: key ``j`` inside query ``i``'s window (``i = t_k - t_q + row``).

    Symmetric: ``|i - j| <= (window - 1) / 2``; causal: ``i - window < j <= i``. Built with ``triu`` /
    ``tril`` on bools: t_q * t_k bytes, no index tensors.

    Example:
        >>> build_band(2, 4, window=3, causal=True, device=torch.device("cpu")).int().tolist()
        [[1, 1, 1, 0], [0, 1, 1, 1]]
    """
    shift = t_k - t_q  # row r is position shift + r; key j - r = shift + (j - i)
    lower, upper = (
        (shift - window + 1, shift) if causal else (shift - window // 2, shift + window // 2)
    )
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).triu(lower).tril(upper)


@functools.lru_cache(maxsize=_CACHE_ENTRIES)
def _band(t_q: int, t_k: int, window: int, causal: bool, device: torch.device) -> Tensor:
    return build_band(t_q, t_k, window=window, causal=causal, device=device)


def band(t_q: int, t_k: int, *, window: int, causal: bool, device: torch.device) -> Tensor:
    """The (t_q, t_k) band of :func:`build_band`, cached when small (shared: read only).

    Example:
        >>> band(2, 3, window=3, causal=False, device=torch.device("cpu")).int().tolist()
        [[1, 1, 1], [0, 1, 1]]
    """
    if not _use_cache(t_q * t_k):
        return build_band(t_q, t_k, window=window, causal=causal, device=device)
    return _band(t_q, t_k, window, causal, torch.device(device))


def build_head_neighbours(
    heads: int, head_window: int, head_boundary: str, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Fresh ``(index, exists)``, both (heads, head_window): slot ``s`` of head ``h`` reads head
    ``index[h, s]`` (offset ``s - n``); ``exists`` is False for slots past the edge under ``"clip"``
    (their ``index`` is a valid placeholder that must be masked out).

    Example:
        >>> index, exists = build_head_neighbours(4, 3, "clip", torch.device("cpu"))
        >>> index[0].tolist(), exists[0].tolist()
        ([0, 0, 1], [False, True, True])
    """
    n = head_window // 2
    raw = torch.arange(heads, device=device)[:, None] + torch.arange(-n, n + 1, device=device)
    if head_boundary == "wrap":
        return raw % heads, torch.ones_like(raw, dtype=torch.bool)
    return raw.clamp(0, heads - 1), (raw >= 0) & (raw < heads)


@functools.lru_cache(maxsize=_CACHE_ENTRIES)
def _head_neighbours(
    heads: int, head_window: int, head_boundary: str, device: torch.device
) -> tuple[Tensor, Tensor]:
    return build_head_neighbours(heads, head_window, head_boundary, device)


def head_neighbours(
    heads: int, head_window: int, head_boundary: str, device: torch.device
) -> tuple[Tensor, Tensor]:
    """:func:`build_head_neighbours`, cached (shared: read only).

    Example:
        >>> index, exists = head_neighbours(4, 3, "wrap", torch.device("cpu"))
        >>> index[0].tolist(), bool(exists.all())
        ([3, 0, 1], True)
    """
    if not _use_cache(heads * head_window):
        return build_head_neighbours(heads, head_window, head_boundary, device)
    return _head_neighbours(heads, head_window, head_boundary, torch.device(device))


def all_heads_exist(head_window: int, head_boundary: str) -> bool:
    """Whether every slot of every head exists (``"wrap"``, or a single slot), without a device sync.

    Example:
        >>> all_heads_exist(3, "clip"), all_heads_exist(1, "clip"), all_heads_exist(3, "wrap")
        (False, True, True)
    """
    return head_boundary == "wrap" or head_window == 1


def _build_dense_mask(
    t_q: int, t_k: int, window: int, causal: bool, heads: int, head_window: int, head_boundary: str,
    device: torch.device,
) -> Tensor:  # fmt: skip
    allowed = band(t_q, t_k, window=window, causal=causal, device=device)  # (t_q, t_k)
    if head_window == 1:
        return allowed[None, None]  # (1, 1, t_q, t_k)
    if all_heads_exist(
        head_window, head_boundary
    ):  # the band once per slot, the same for each head
        return allowed.repeat(1, head_window)[None, None]  # (1, 1, t_q, N*t_k)
    _, exists = head_neighbours(heads, head_window, head_boundary, device)
    slots = allowed[None, :, None, :] & exists[:, None, :, None]  # (heads, t_q, N, t_k)
    return slots.reshape(heads, t_q, head_window * t_k)[None]  # (1, heads, t_q, N*t_k)


@functools.lru_cache(maxsize=_CACHE_ENTRIES)
def _dense_mask(*args: object) -> Tensor:
    return _build_dense_mask(*args)  # type: ignore[arg-type]


def dense_mask(
    t_q: int,
    t_k: int,
    *,
    window: int,
    causal: bool,
    heads: int,
    head_window: int,
    head_boundary: str,
    device: torch.device,
) -> Tensor:
    """The keys the dense kernel lets each query read, padding aside: (1, 1 or heads, t_q, N*t_k) bool,
    key column ``s * t_k + j`` being position ``j`` of slot ``s`` (head ``index[h, s]``). Every row has at
    least one allowed key (its own position in its own head). Cached when small (shared: read only).

    Example:
        >>> m = dense_mask(2, 2, window=1, causal=False, heads=2, head_window=1, head_boundary="wrap",
        ...                device=torch.device("cpu"))
        >>> m.shape, m[0, 0].int().tolist()
        (torch.Size([1, 1, 2, 2]), [[1, 0], [0, 1]])
    """
    args = (t_q, t_k, window, causal, heads, head_window, head_boundary, torch.device(device))
    copies = head_window * (1 if all_heads_exist(head_window, head_boundary) else heads)
    if not _use_cache(t_q * t_k * copies):
        return _build_dense_mask(*args)
    return _dense_mask(*args)


def clear_caches() -> None:
    """Forget every cached mask and index (e.g. to free device memory).

    Example:
        >>> clear_caches()
    """
    for cache in (_band, _head_neighbours, _dense_mask):
        cache.cache_clear()
