"""Blocked local attention: O(T*M) time and memory, in plain PyTorch (CPU or GPU).

Notation (SPEC.md): q, k, v (batch, heads, time, d_h); window ``M`` (odd), head window ``N`` (odd);
``key_padding_mask`` (batch, time) bool, True at padding. Query ``i`` reads key ``j`` when
``-left <= j - i <= right`` with ``(left, right) = (m, m)``, ``m = (M-1)/2``, or ``(M-1, 0)`` when causal,
of the ``N`` heads around its own (``csan.kernels.masks.head_neighbours``), one softmax over all slots.

Design. Time is cut into query *blocks* of ``B`` positions; a block reads its keys plus a halo of
``left``/``right`` keys, ``S = B + left + right`` key positions, of each of the ``N`` heads, so each block
computes one (B, N*S) logit tile with ``bmm`` and masks the slots outside the band, the sequence, the
padding or (``"clip"``) the existing heads. The blocks are processed in *chunks* of about
``_CHUNK_ROWS`` query rows, so the working memory is bounded and no (T, T) tensor ever exists.

The backward pass is hand-written and recomputes the tiles (as FlashAttention does): only q, k, v and
one (base-2) log-sum-exp per query row are kept for it (none for the row path's rows when N = 1:
there one ``torch.softmax`` gives the weights, in the forward and again in the backward). Dropout
(on the attention weights) draws its mask from a per-chunk seed, so the backward regenerates the
same mask. The output gradient may be any strided tensor: ``out.sum().backward()`` gives an
expanded one (stride 0), on which batched matrix products take a slow path, so each chunk makes its
gradient rows dense first (a chunk's worth, not a full-size copy; the row path reads a gradient that
is constant in time as one dense block). The band masks of a shape are cached
(:func:`_band_blocked`), so a repeated call builds none.

For long sequences (CPU, no padding, no dropout) the *row path* (:class:`_Rows`) takes the blocks whose
keys lie inside the sequence: one (batch, head) row at a time, the queries, keys and values of a run of
blocks are strided views of q, k and v (block ``c`` reads key rows ``[c*B - left, c*B - left + S)``),
so nothing is gathered or copied and a chunk needs less memory per query row, hence larger chunks and
fewer operations; the first and last blocks of each row still go through the tiles. When every head
reads only itself (N = 1) its backward *writes* the key and value gradients of its rows (each block's
first B key rows tile them) instead of adding them into zeros, so those rows are neither zeroed nor
added to; it runs before the tiles, which add their halos on top.

Compared with a "band" of (T, N*M) logits, the tiles waste ``S/M`` of the arithmetic but run as a few
large matrix products. Forward + backward at T=4096, 8 heads of 64, M=11, one CPU thread: band by
``unfold`` + einsum 287 ms, band by M shifted products 113 ms, tiles 39 ms; so tiles it is.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from csan.kernels import masks
from csan.kernels.checks import check_local_attention

__all__ = ["block_size", "blocked_local_attention"]

# Query rows (batch * heads * positions) per chunk: the working memory is about 1.9 KiB per row at d_h=64
# (1.9 MiB; 4.2 MiB with N=3). 1024 rows ran as fast as 4096 at 1 x 8 x 4096 (2-core Zen 5, 2 threads)
# with a quarter of the workspace; 512 was 30% slower (more, smaller operations).
_CHUNK_ROWS = 1024
# The row path (CPU, no padding, no dropout): the *inner* blocks of a (batch, head) row, those whose keys
# all lie inside the sequence, read q, k and v through strided views (block c's keys are rows
# [c*B - left, c*B - left + S) of that head's (time, d_h) matrix), so they gather and copy nothing and a
# chunk holds about 0.4 KiB per query row at N=1 instead of 1.9; the first and last blocks of each row
# still go through the tiles. Query rows per row-path chunk: 4,096, a whole row at 4,096 positions
# (1.6 MiB of workspace at 1 x 8 x 4096, d_h=64, N=1, 3.8 MiB at N=3, by benchmarks/plain_attention.py;
# on a 2-core Zen 3, 1.16x (N=1) and 1.19x (N=3) as fast as 2,048 rows in one process, which had been
# 1.04-1.06x and 1.14-1.18x as fast as 1,536; 3,072 were no faster than 2,048), and the shortest
# sequence that takes the row path: against the tiles, in one process on that Zen 3, the row path was
# 1.02-1.56x as fast at 1,024 and 2,048 positions (batches 1 to 16, N=1 and 3) and 0.83-1.04x at 512
# (benchmarks/results/avx2-zen3-2026-11-26/exp2-rows/rows-min-ab.txt).
_ROW_CHUNK_ROWS = 4096
_ROW_MIN_TIME = 1024
# The logits are kept in base 2 (times log2(e)), so the weights are ``exp2`` of them: on AVX2, ``exp2``
# of a (128, 16, 26) tile whose masked slots are -inf took 21 us against 127 us for ``exp`` (2 threads,
# Zen 3; benchmarks/results/avx2-zen3-2026-11-26/exp2-rows/). FlashAttention does the same. The
# log-sum-exp kept for the backward is base 2 as well.
_LOG2E = math.log2(math.e)
_LN2 = math.log(2.0)


def block_size(time: int, window: int) -> int:
    """Query positions per block: about the halo width, at least 16, at most ``time`` (rounded to 8).

    Example:
        >>> block_size(4096, 11), block_size(20, 11), block_size(4096, 65)
        (16, 16, 64)
    """
    halo = window - 1  # left + right keys around a block
    block = max(16, -(-halo // 8) * 8)
    return max(1, min(block, -(-time // 8) * 8))


@dataclass(frozen=True)
class _Plan:
    """Static shape of one call: how time is cut into blocks and chunks."""

    time: int
    left: int  # a query reads keys back to i - left ...
    right: int  # ... and up to i + right
    halo_left: int  # key positions before a block that it may read: min(left, time - 1)
    halo_right: int
    block: int  # B: query positions per block
    chunk_blocks: int  # blocks per chunk
    scale: float
    dropout_p: float
    seed: int
    # the row path: blocks [lo, hi) of every row it takes ((0, 0): none), and the heads each head reads
    rows: tuple[int, int] = (0, 0)
    sources: tuple[tuple[int, ...], ...] = ()

    @property
    def logit_scale(self) -> float:
        """The factor of ``q . k`` in the (base-2) logits: ``scale * log2(e)``."""
        return self.scale * _LOG2E

    @property
    def span(self) -> int:
        """S: key positions per block."""
        return self.block + self.halo_left + self.halo_right

    @property
    def has_rows(self) -> bool:
        """Whether the row path takes any blocks."""
        return self.rows[1] > self.rows[0]

    @property
    def self_only(self) -> bool:
        """Whether every head of the row path reads only itself (N = 1): its weights then come from
        one softmax (:meth:`_Rows._weights`) and its key and value gradients are written."""
        return all(heads == (h,) for h, heads in enumerate(self.sources))

    @property
    def writes_keys(self) -> bool:
        """Whether the row path *writes* (not adds) the first part of its key and value gradients:
        when it takes blocks and every head reads only itself (N = 1)."""
        return self.has_rows and self.self_only

    def chunks(self) -> list[tuple[int, int]]:
        """(first query position, number of blocks) of every tile chunk (the blocks outside ``rows``)."""
        nblocks = -(-self.time // self.block)
        lo, hi = self.rows
        ranges = [(0, lo), (hi, nblocks)] if self.has_rows else [(0, nblocks)]
        return [
            (c * self.block, min(self.chunk_blocks, end - c))
            for start, end in ranges
            for c in range(start, end, self.chunk_blocks)
        ]


def blocked_local_attention(
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
) -> Tensor:
    """1D/2D-CSAN attention in O(time * window); same contract as ``csan.functional.local_attention``.

    Args:
        q, k, v: (batch, heads, time, d_h), the same time for all three.
        window: M, odd >= 1. head_window: N, odd, ``1 <= N <= heads``.
        key_padding_mask: (batch, time) bool, True at padding, or None.
        causal: keys ``i - M < j <= i`` instead of ``|i - j| <= (M-1)/2``.
        head_boundary: ``"wrap"`` (heads modulo H) or ``"clip"`` (no heads past the edges).
        dropout_p: dropout on the attention weights.

    Returns:
        (batch, heads, time, d_h); rows with no allowed key are zeros. Differentiable in q, k, v (once).

    Example:
        >>> q = torch.randn(2, 4, 100, 8)
        >>> blocked_local_attention(q, q, q, window=11, head_window=3).shape
        torch.Size([2, 4, 100, 8])
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
    )
    batch, heads, time, d_h = q.shape
    if q.numel() == 0:
        return q * 0 + (k.sum() + v.sum()) * 0  # empty, but attached to the graph
    left, right = (window - 1, 0) if causal else (window // 2, window // 2)
    block = block_size(time, window)
    index, exists = masks.head_neighbours(heads, head_window, head_boundary, q.device)
    use_rows = (
        q.device.type == "cpu"
        and key_padding_mask is None
        and dropout_p == 0
        and time >= _ROW_MIN_TIME
        and all(x.stride(-1) == 1 for x in (q, k, v))
    )
    plan = _Plan(
        time=time,
        left=left,
        right=right,
        halo_left=min(left, time - 1),
        halo_right=min(right, time - 1),
        block=block,
        chunk_blocks=max(1, _CHUNK_ROWS // (batch * heads * block)),
        scale=d_h**-0.5,
        dropout_p=float(dropout_p),
        seed=int(torch.randint(2**62, (), device="cpu")) if dropout_p > 0 else 0,
        rows=_inner_blocks(time, left, right, block) if use_rows else (0, 0),
        sources=_sources(index, exists) if use_rows else (),
    )
    if head_window == 1:
        index = None  # every head reads itself only
    if masks.all_heads_exist(head_window, head_boundary):
        exists = None
    return _BlockedAttention.apply(q, k, v, key_padding_mask, plan, index, exists)


class _BlockedAttention(torch.autograd.Function):
    """Forward by tiles, backward by recomputed tiles; saves q, k, v and a log-sum-exp per row."""

    @staticmethod
    def forward(ctx, q, k, v, key_padding_mask, plan, index, exists):  # type: ignore[override]
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
        # (batch, heads, time): the base-2 log-sum-exp of each row's logits
        lse = q.new_empty(q.shape[:3])
        for number, (t0, nblocks) in enumerate(plan.chunks()):
            tiles = _Tiles(q, key_padding_mask, plan, index, exists, t0, nblocks, number)
            tiles.forward(q, k, v, out=out, lse=lse)
        if plan.has_rows:
            _Rows(q, plan).forward(q, k, v, out=out, lse=lse)
        ctx.save_for_backward(q, k, v, lse, key_padding_mask, index, exists)
        ctx.plan = plan
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):  # type: ignore[override]
        q, k, v, lse, key_padding_mask, index, exists = ctx.saved_tensors
        plan = ctx.plan
        dq = torch.empty_like(q, memory_format=torch.contiguous_format)
        # key and value gradients: summed in place over the blocks' overlapping halos, into zeros
        # except where the row path writes first (then only the rows outside its writes are zeroed)
        dk = _gradient_buffer(k, zeroed=not plan.writes_keys)
        dv = _gradient_buffer(v, zeroed=not plan.writes_keys)
        if plan.has_rows:  # before the tiles: it may write where their halos add
            _Rows(q, plan).backward(q, k, v, lse, grad_out, dq=dq, dk=dk, dv=dv)
        for number, (t0, nblocks) in enumerate(plan.chunks()):
            tiles = _Tiles(q, key_padding_mask, plan, index, exists, t0, nblocks, number)
            tiles.backward(q, k, v, lse, grad_out, dq=dq, dk=dk, dv=dv)
        return dq, dk, dv, None, None, None, None


def _gradient_buffer(x: Tensor, *, zeroed: bool) -> Tensor:
    """A dense tensor like ``x`` for its gradient: zeros, or uninitialised where every element is
    written before it is read (which saves a full pass over it)."""
    make = torch.zeros_like if zeroed else torch.empty_like
    return make(x, memory_format=torch.contiguous_format)


def _softmax_backward_(grad: Tensor, weights: Tensor, dim: int | tuple[int, ...]) -> None:
    """``grad`` (dP, the gradient of the softmax weights P) becomes that of the logits, in place:
    ``dS = P * (dP - delta)`` with ``delta = rowsum(P * dP)`` over ``dim``, which equals
    ``rowsum(dO * O)`` (also with dropout, when ``dP`` carries its mask) without reading the output,
    over a row's slots rather than its d_h columns.

    Example:
        >>> z = torch.randn(3, 5, requires_grad=True)
        >>> p, dp = z.softmax(-1), torch.randn(3, 5)
        >>> ds = dp.clone()
        >>> _softmax_backward_(ds, p.detach(), dim=-1)
        >>> torch.allclose(ds, torch.autograd.grad(p, z, dp)[0], atol=1e-6)
        True
    """
    grad.mul_(weights)
    grad.addcmul_(weights, grad.sum(dim=dim, keepdim=True), value=-1)


def _take(x: Tensor, first: int, count: int) -> Tensor:
    """``x[:, :, first : first + count]`` where positions outside ``x`` read its edge rows (they are
    masked). A view when all positions are inside."""
    time = x.size(2)
    if first >= 0 and first + count <= time:
        return x[:, :, first : first + count]
    positions = torch.arange(first, first + count, device=x.device).clamp_(0, time - 1)
    return x.index_select(2, positions)


def _band_blocked(
    time: int,
    t0: int,
    nblocks: int,
    block: int,
    span: int,
    left: int,
    right: int,
    halo_left: int,
    device: torch.device,
) -> Tensor:
    """The blocked slots (1, 1, nblocks, B, 1, S) of the chunk of ``nblocks`` blocks from query ``t0``:
    slot ``r`` of query ``a`` of block ``c`` is key ``j = t0 - halo_left + c*B + r``, blocked unless
    ``-left <= j - i <= right`` (``i = t0 + c*B + a``) and both lie inside the sequence.

    Cached (a few KiB each; shared, read only): all inner chunks (every key inside the sequence) share
    one entry, the first and last chunk of a shape one each, so a call builds no mask at all.
    """
    if t0 >= halo_left and t0 + (nblocks - 1) * block + span - halo_left <= time:
        t0, time = halo_left, (nblocks - 1) * block + span  # an inner chunk: the canonical one
    return _band_slots(time, t0, nblocks, block, span, left, right, halo_left, device)


@functools.lru_cache(maxsize=256)
def _band_slots(
    time: int,
    t0: int,
    nblocks: int,
    block: int,
    span: int,
    left: int,
    right: int,
    halo_left: int,
    device: torch.device,
) -> Tensor:
    i = torch.arange(t0, t0 + nblocks * block, device=device).view(nblocks, block, 1)  # queries
    j = torch.arange(span, device=device) + (i[:, :1] - halo_left)  # (nblocks, 1, S) keys
    offset = j - i  # (nblocks, B, S)
    allowed = (offset >= -left) & (offset <= right) & (i < time) & (j >= 0) & (j < time)
    return ~allowed.view(1, 1, nblocks, block, 1, span)


class _Tiles:
    """One chunk: ``nblocks`` query blocks from position ``t0``, with their keys and masks.

    Tile layout: ``G = batch * heads * nblocks`` tiles; query rows (G, B, d_h); keys and values
    (G, N*S, d_h), slots ordered (head slot, key position); logits (G, B, N*S).
    """

    def __init__(self, q, key_padding_mask, plan, index, exists, t0, nblocks, number):
        self.plan, self.index, self.exists = plan, index, exists
        self.t0, self.nblocks, self.number = t0, nblocks, number
        self.padded = key_padding_mask is not None  # only padding can leave a query with no key
        batch, heads, time, _ = q.shape
        self.shape = (batch, heads)
        b, s = plan.block, plan.span
        # key positions of the chunk: block c reads [c*B, c*B + S) of [first_key, first_key + keys)
        self.first_key, self.key_count = t0 - plan.halo_left, (nblocks - 1) * b + s
        if key_padding_mask is None:  # the band only: the same for every call of this shape
            self.blocked = _band_blocked(
                time, t0, nblocks, b, s, plan.left, plan.right, plan.halo_left, q.device
            )
            return
        keys = torch.arange(self.first_key, self.first_key + self.key_count, device=q.device)
        pad = key_padding_mask.index_select(1, keys.clamp(0, time - 1))  # (batch, L)
        band = _band_blocked(
            time, t0, nblocks, b, s, plan.left, plan.right, plan.halo_left, q.device
        )
        # (batch, 1, nblocks, B, 1, S): broadcast over heads and head slots
        self.blocked = band | pad.unfold(1, s, b)[:, None, :, None, None, :]

    # -- gathering -------------------------------------------------------------------------------
    def query_rows(self, x: Tensor, scale: float | None = None) -> Tensor:
        """x (batch, heads, time, ...) -> (G, B, ...) rows of this chunk (rows past the end: copies),
        times ``scale`` if given (in the same pass as the gather)."""
        rows = _take(x, self.t0, self.nblocks * self.plan.block)  # (batch, heads, n*B, ...)
        if scale is not None:
            rows = rows * scale
        return rows.reshape(-1, self.plan.block, *x.shape[3:])

    def _key_tiles(self, x: Tensor) -> Tensor:
        """x (batch, heads, time, D) -> (G, N*S, D): the keys (or values) of every tile."""
        d = x.size(-1)
        b, s = self.plan.block, self.plan.span
        rows = _take(x, self.first_key, self.key_count).unsqueeze(2)  # (batch, heads, 1, L, D)
        if self.index is not None:  # neighbouring heads: (batch, heads, N, L, D)
            rows = (
                rows.squeeze(2).index_select(1, self.index.flatten()).unflatten(1, self.index.shape)
            )
        slots = rows.size(2)
        tiles = rows.unfold(3, s, b)  # (b, h, N, n, D, S)
        return tiles.permute(0, 1, 3, 2, 5, 4).reshape(-1, slots * s, d)  # (G, N*S, D)

    def put(self, dst: Tensor, src: Tensor) -> None:
        """Write per-row values (G, B, ...) into ``dst`` (batch, heads, time, ...) at this chunk's rows."""
        time = dst.size(2)
        count = min(self.nblocks * self.plan.block, time - self.t0)
        rows = src.view(*self.shape, -1, *dst.shape[3:])[:, :, :count]
        dst[:, :, self.t0 : self.t0 + count] = rows

    def add_keys(self, dst: Tensor, tiles: Tensor, alpha: float = 1.0) -> None:
        """Add per-slot gradients (G, N*S, D) into ``dst`` (batch, heads, time, D): the adjoint of
        :meth:`_key_tiles` (overlapping halos summed, head slots sent back to their heads), times
        ``alpha``.

        Key slot ``p*B + r`` of block ``c`` is position ``first_key + (c + p)*B + r``, so for each part
        ``p`` of a block's ``S`` slots the ``nblocks`` blocks add into one strided view of ``dst``, in
        place. Where that view would cross the sequence's ends (first and last chunk only), the part
        goes through a zeroed temporary and only its rows inside the sequence are added (the others
        hold zeros: their weights are 0).
        """
        batch, heads, time, d = dst.shape
        b, s, n = self.plan.block, self.plan.span, self.nblocks
        slots = tiles.size(1) // s
        tiles = tiles.view(batch, heads, n, slots, s, d)
        for p in range(-(-s // b)):
            width = min(b, s - p * b)
            start = self.first_key + p * b
            inside = start >= 0 and start + n * b <= time
            rows = (
                dst[:, :, start : start + n * b]
                if inside
                else dst.new_zeros(batch, heads, n * b, d)
            )
            target = rows.unflatten(2, (n, b))[:, :, :, :width]
            for slot in range(slots):
                part = tiles[:, :, :, slot, p * b : p * b + width]  # (batch, heads, n, width, D)
                if self.index is None:
                    target.add_(part, alpha=alpha)
                else:  # slot `slot` of head h is head index[h, slot]
                    target.index_add_(1, self.index[:, slot], part, alpha=alpha)
            if not inside:
                lo, hi = max(start, 0), min(start + n * b, time)
                if lo < hi:
                    dst[:, :, lo:hi] += rows[:, :, lo - start : hi - start]

    # -- arithmetic (the tiles are gathered late and dropped early: the working memory is the chunk's)
    def _logits(self, qs: Tensor, keys: Tensor) -> Tensor:
        """Masked base-2 logits (G, B, N*S) of queries scaled by ``logit_scale`` (G, B, D) and keys
        (G, N*S, D)."""
        logits = torch.bmm(qs, keys.transpose(1, 2))
        shaped = logits.view(*self.shape, self.nblocks, self.plan.block, -1, self.plan.span)
        shaped.masked_fill_(self.blocked, float("-inf"))  # (batch, heads, n, B, N, S)
        if self.exists is not None:  # "clip": slots of heads past the edge
            shaped.masked_fill_(~self.exists[None, :, None, None, :, None], float("-inf"))
        return logits

    def _dropout(self, weights: Tensor) -> Tensor:
        """Weights with the chunk's dropout mask applied (the same mask in forward and backward)."""
        p = self.plan.dropout_p
        if p == 0.0:
            return weights
        gen = torch.Generator(device=weights.device).manual_seed(self.plan.seed + self.number)
        keep = torch.rand(weights.shape, generator=gen, device=weights.device) >= p
        return weights * keep / (1.0 - p)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, *, out: Tensor, lse: Tensor) -> None:
        """Write the chunk's output rows into ``out`` and log-sum-exps into ``lse`` (+inf: empty row)."""
        logits = self._logits(self.query_rows(q, self.plan.logit_scale), self._key_tiles(k))
        top = logits.amax(dim=-1, keepdim=True)
        if self.padded:
            top.masked_fill_(top == float("-inf"), 0.0)  # empty rows: keep exp2() at 0, not NaN
        weights = logits.sub_(top).exp2_()
        total = weights.sum(dim=-1, keepdim=True)  # >= 1 unless the row is empty
        rows = torch.bmm(self._dropout(weights), self._key_tiles(v))
        if not self.padded:  # every row reads its own key: no empty rows
            self.put(out, rows.div_(total))
            self.put(lse, total.log2_().add_(top).squeeze(-1))
            return
        self.put(out, rows.div_(total.clamp(min=1.0)))
        self.put(lse, torch.where(total > 0, top + total.log2(), float("inf")).squeeze(-1))

    def backward(self, q, k, v, lse, grad_out, *, dq: Tensor, dk: Tensor, dv: Tensor) -> None:
        """Write the chunk's query gradients into ``dq`` and add its key/value gradients to dk, dv."""
        qs = self.query_rows(q, self.plan.logit_scale)  # (G, B, D)
        keys = self._key_tiles(k)  # (G, N*S, D)
        weights = self._logits(qs, keys).sub_(self.query_rows(lse.unsqueeze(-1))).exp2_()
        g = self.query_rows(grad_out).contiguous()  # (G, B, D); dense even if grad_out is expanded
        dlogits = self._dropout(torch.bmm(g, self._key_tiles(v).transpose(1, 2)))  # dP (G, B, N*S)
        self.add_keys(dv, torch.bmm(self._dropout(weights).transpose(1, 2), g))
        del g
        _softmax_backward_(dlogits, weights, dim=-1)
        del weights
        self.put(dq, torch.bmm(dlogits, keys).mul_(self.plan.scale))
        del keys
        self.add_keys(dk, torch.bmm(dlogits.transpose(1, 2), qs), alpha=_LN2)  # qs holds log2(e)


# -- the row path ----------------------------------------------------------------------------------
def _inner_blocks(time: int, left: int, right: int, block: int) -> tuple[int, int]:
    """Blocks ``[lo, hi)`` whose keys ``[c*B - left, c*B - left + S)`` all lie inside the sequence;
    (0, 0) if none.

    Example:
        >>> _inner_blocks(4096, 5, 5, 16), _inner_blocks(20, 5, 5, 16)
        ((1, 255), (0, 0))
    """
    span = block + left + right
    lo, hi = -(-left // block), (time + left - span) // block + 1
    return (lo, hi) if hi > lo else (0, 0)


def _sources(index: Tensor, exists: Tensor) -> tuple[tuple[int, ...], ...]:
    """For each head, the heads its existing slots read, in slot order, from
    :func:`csan.kernels.masks.head_neighbours` (CPU tensors: the row path is CPU only).

    Example:
        >>> index, exists = masks.head_neighbours(4, 3, "clip", torch.device("cpu"))
        >>> _sources(index, exists)[0], _sources(*masks.head_neighbours(4, 3, "wrap", "cpu"))[0]
        ((0, 1), (3, 0, 1))
    """
    return tuple(
        tuple(h for h, e in zip(heads, there) if e)
        for heads, there in zip(index.tolist(), exists.tolist())
    )


@functools.lru_cache(maxsize=64)
def _row_bias(
    block: int, span: int, left: int, right: int, device: torch.device, dtype: torch.dtype
) -> Tensor:
    """(B, S) additive band mask of an inner block (0 where allowed, -inf elsewhere): the blocked
    slots of :func:`_band_slots` for one block whose keys all lie inside the sequence (cached)."""
    blocked = _band_slots(span, left, 1, block, span, left, right, left, device).view(block, span)
    return torch.zeros(block, span, device=device, dtype=dtype).masked_fill_(blocked, float("-inf"))


def _windows(x: Tensor, first: int, count: int, span: int, block: int) -> Tensor:
    """(count, span, D) overlapping view of the (time, D) matrix ``x``: window ``c`` is its rows
    ``[first + c*block, first + c*block + span)`` (all inside ``x``)."""
    step, col = x.stride()
    return x.as_strided(
        (count, span, x.size(1)), (block * step, step, col), x.storage_offset() + first * step
    )


class _Rows:
    """The inner blocks ``plan.rows`` of every (batch, head) row, in chunks of consecutive blocks.

    A chunk of ``n`` blocks from block ``c0`` of head ``h``: queries (n, B, D) and, for each head
    ``s`` that ``h`` reads, keys and values (n, S, D) are views; logits (slots, n, S, B), key slot by
    query, one softmax over (slots, S). That layout makes the key-side products (logits, value
    gradients, key and value gradients) plain, not transposed: 1.02x (N=1) and 1.02-1.04x (N=3) as
    fast at 1 x 8 x 4096 as (slots, n, B, S) on a 2-core Zen 3. The overlapping windows' key and value
    gradients go in by :meth:`_add_to_windows`.
    """

    def __init__(self, q: Tensor, plan: _Plan):
        self.plan = plan
        bias = _row_bias(plan.block, plan.span, plan.left, plan.right, q.device, q.dtype)
        self.bias = bias.mT.contiguous()  # (S, B): the logits are laid out key slot by query
        self.per = max(1, _ROW_CHUNK_ROWS // plan.block)
        self.write = plan.writes_keys

    def chunks(self) -> list[tuple[slice, int, int]]:
        """(rows of the chunk's queries, first key row, blocks) of every chunk of a row."""
        b, lo, hi = self.plan.block, *self.plan.rows
        chunks = []
        for c0 in range(lo, hi, self.per):
            n = min(self.per, hi - c0)
            chunks.append((slice(c0 * b, (c0 + n) * b), c0 * b - self.plan.left, n))
        return chunks

    def _zero_unwritten(self, grad: Tensor) -> None:
        """Zero the key rows of ``grad`` (batch, heads, time, D) that a writing backward does not
        write: those outside ``[lo*B - left, hi*B - left)``, the first B key rows of its blocks."""
        (lo, hi), b, left = self.plan.rows, self.plan.block, self.plan.left
        grad[:, :, : lo * b - left].zero_()
        grad[:, :, hi * b - left :].zero_()

    def _logits(self, qv: Tensor, keys: list[Tensor]) -> Tensor:
        """Band-masked base-2 logits (slots, n, S, B) of each slot's keys against queries (n, B, D)."""
        logits = qv.new_empty(len(keys), qv.size(0), self.plan.span, qv.size(1))
        for slot, kv in enumerate(keys):
            torch.baddbmm(self.bias, kv, qv.mT, alpha=self.plan.logit_scale, out=logits[slot])
        return logits

    def _weights(self, qv: Tensor, kv: Tensor) -> Tensor:
        """One head slot (N = 1): the softmax weights (1, n, S, B) of keys (n, S, D) against queries
        (n, B, D), by one ``torch.softmax`` over the S key slots of natural-unit logits. Its one fused
        pass took 37.5 us on a (254, 26, 16) tile where ``amax`` over the same slots alone took 57 us
        (and ``sub_``, ``exp2_``, ``sum`` and ``div_`` 55 more) on the Intel Xeon with AMX."""
        logits = torch.baddbmm(self.bias, kv, qv.mT, alpha=self.plan.scale)
        return torch.softmax(logits, dim=1).unsqueeze(0)

    @staticmethod
    def _sum_over_slots(out: Tensor, weights: Tensor, mats: list[Tensor]) -> None:
        """``out = sum_slot weights[slot] @ mats[slot]``, written into ``out`` (a view)."""
        for slot, mat in enumerate(mats):
            if slot == 0:
                torch.bmm(weights[0], mat, out=out)
            else:
                out.baddbmm_(weights[slot], mat)

    def _add_to_windows(self, grad: Tensor, first: int, n: int, lhs: Tensor, rhs: Tensor) -> None:
        """Add ``lhs @ rhs`` ((n, S, B) @ (n, B, D)) into the overlapping (n, S, D) windows of the
        (time, D) matrix ``grad`` from row ``first``: ``ceil(S/B)`` parts of at most B key rows, each
        its own product added into a non-overlapping strided view (one (n, S, D) product sliced into
        the parts held a third more memory and was no faster). With :attr:`write` the first part, whose
        views tile rows ``[first, first + n*B)`` (a dense (n, B, D) view), is written by the product
        itself: no temporary and no add."""
        b, s = self.plan.block, self.plan.span
        for start in range(0, s, b):
            width = min(b, s - start)
            view = _windows(grad, first + start, n, width, b)
            if self.write and start == 0:
                torch.bmm(lhs[:, :width], rhs, out=view)
            else:
                view.add_(torch.bmm(lhs[:, start : start + width], rhs))

    def forward(self, q: Tensor, k: Tensor, v: Tensor, *, out: Tensor, lse: Tensor) -> None:
        b, s = self.plan.block, self.plan.span
        chunks, single = self.chunks(), self.plan.self_only
        for bi in range(q.size(0)):
            for hi, heads in enumerate(self.plan.sources):
                q_row, out_row, lse_row = q[bi, hi], out[bi, hi], lse[bi, hi]
                for rows, first, n in chunks:
                    qv = q_row[rows].unflatten(0, (n, b))
                    keys = [_windows(k[bi, h], first, n, s, b) for h in heads]
                    o = out_row[rows].unflatten(0, (n, b))
                    values = [_windows(v[bi, h], first, n, s, b) for h in heads]
                    if single:  # the backward recomputes the weights the same way: no lse
                        self._sum_over_slots(o, self._weights(qv, keys[0]).mT, values)
                        continue
                    logits = self._logits(qv, keys)
                    top = logits.amax(dim=(0, 2), keepdim=True)
                    weights = logits.sub_(top).exp2_()
                    total = weights.sum(dim=(0, 2), keepdim=True)[0]  # (n, 1, B), >= 1
                    weights.div_(total)  # S slots a row, where the output has D columns
                    self._sum_over_slots(o, weights.mT, values)
                    lse_row[rows] = total.log2_().add_(top[0]).view(-1)

    def backward(self, q, k, v, lse, grad_out, *, dq: Tensor, dk: Tensor, dv: Tensor) -> None:
        """Write the query gradients of the row path's blocks into ``dq`` and add their key and value
        gradients into ``dk``, ``dv``. With :attr:`write` (:attr:`_Plan.writes_keys`; ``dk`` and
        ``dv`` uninitialised) the first B key rows of each block are written, not added, and the
        rows outside them zeroed first; the chunks then run last to first, so a chunk's second part,
        which reaches into the next chunk's rows, is added after that chunk wrote them."""
        b, s, scale = self.plan.block, self.plan.span, self.plan.scale
        chunks, single = self.chunks(), self.plan.self_only
        if self.write:
            self._zero_unwritten(dk)
            self._zero_unwritten(dv)
            chunks.reverse()
        for bi in range(q.size(0)):
            for hi, heads in enumerate(self.plan.sources):
                q_row, lse_row = q[bi, hi], lse[bi, hi]
                g_row, dq_row = grad_out[bi, hi], dq[bi, hi]
                # an output gradient constant in time (stride 0, as from out.sum().backward()):
                # one dense (B, D) block, which the products broadcast over the blocks
                g_block = g_row[:b].contiguous() if g_row.stride(0) == 0 else None
                for rows, first, n in chunks:
                    qv = q_row[rows].unflatten(0, (n, b))
                    keys = [_windows(k[bi, h], first, n, s, b) for h in heads]
                    if single:
                        weights = self._weights(qv, keys[0])
                    else:
                        weights = self._logits(qv, keys)
                        weights.sub_(lse_row[rows].view(1, n, 1, b)).exp2_()
                    if g_block is not None:
                        g = g_block.expand(n, *g_block.shape)  # a batch stride of 0
                    else:  # dense if grad_out is any other strided tensor
                        g = g_row[rows].unflatten(0, (n, b)).contiguous()
                    dlogits = torch.empty_like(weights)
                    for slot, h in enumerate(heads):
                        values = _windows(v[bi, h], first, n, s, b)
                        # dP, times the scale of both query and key gradients (S slots a row, not D)
                        d = dlogits[slot]
                        torch.baddbmm(d, values, g.mT, beta=0, alpha=scale, out=d)
                        self._add_to_windows(dv[bi, h], first, n, weights[slot], g)
                    del g
                    _softmax_backward_(dlogits, weights, dim=(0, 2))  # over (slots, S)
                    del weights
                    self._sum_over_slots(dq_row[rows].unflatten(0, (n, b)), dlogits.mT, keys)
                    for slot, h in enumerate(heads):
                        self._add_to_windows(dk[bi, h], first, n, dlogits[slot], qv)
