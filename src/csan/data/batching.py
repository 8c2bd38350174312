"""Token-budget batching of sentence pairs, and collation into padded tensors.

Shapes: ``B`` pairs per batch, ``S`` source time steps, ``T`` target time steps.

The trainer passes lengths *with* the special token each side gets: ``len(src_ids) + 1`` (EOS)
and ``len(tgt_ids) + 1`` (BOS for the decoder input, EOS for the output: both have that length).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from csan.errors import CsanError

__all__ = ["Batch", "TokenBatchSampler", "collate", "cut_batches"]


def cut_batches(order: Sequence[int], widths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Cut ``order`` (indices into ``widths``) into consecutive batches, greedily, so that
    ``len(batch) * widest <= max_tokens``; an item wider than the budget gets a batch of its own.

    The one batcher: training (:class:`TokenBatchSampler`), validation and translation all cut their
    sorted items with it.

    Example:
        >>> cut_batches([1, 2, 0, 3], [3, 9, 4, 2], max_tokens=10)
        [[1], [2, 0], [3]]
    """
    batches: list[list[int]] = []
    start, width = 0, 0
    for pos, item in enumerate(order):
        new_width = max(width, widths[item])
        if pos > start and (pos - start + 1) * new_width > max_tokens:
            batches.append(list(order[start:pos]))
            start, new_width = pos, widths[item]
        width = new_width
    if len(order):
        batches.append(list(order[start:]))
    return batches


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class TokenBatchSampler:
    """Yield lists of pair indices: batches of similar-length pairs within a token budget.

    Each epoch: the kept pairs are sorted by (target length, source length), ties broken at
    random; consecutive pairs are cut into batches so that ``len(batch) * longest side <=
    max_tokens`` (lengths rounded up to ``pad_to_multiple``; a single pair above the budget gets a
    batch of its own); then the batch order is shuffled. The randomness comes from ``(seed, epoch)``
    only, so every process computes the same batches; :meth:`set_epoch` picks the epoch.

    Pairs with a side longer than ``max_positions`` are dropped (``num_dropped`` counts them).
    With ``num_shards == 1`` every kept pair appears exactly once per epoch. With several shards
    (DDP), batch ``k`` goes to shard ``k % num_shards``; when the number of batches does not divide
    evenly, the first batches of the epoch's order are repeated to fill the last round, so every
    shard gets the same number of batches (a few pairs are seen twice in that epoch).

    Example:
        >>> s = TokenBatchSampler([3, 5, 4, 9], [4, 5, 4, 9], max_tokens=10, max_positions=8)
        >>> s.num_dropped, len(s), sorted(i for b in s for i in b)
        (1, 2, [0, 1, 2])
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        *,
        max_tokens: int,
        max_positions: int,
        shuffle: bool = True,
        seed: int = 0,
        num_shards: int = 1,
        shard_index: int = 0,
        pad_to_multiple: int = 1,
    ) -> None:
        src = np.asarray(src_lengths, dtype=np.int64).reshape(-1)
        tgt = np.asarray(tgt_lengths, dtype=np.int64).reshape(-1)
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} source lengths but {len(tgt)} target lengths")
        if len(src) and min(src.min(), tgt.min()) < 0:
            raise ValueError("lengths must be >= 0")
        for name, value in (("max_tokens", max_tokens), ("max_positions", max_positions)):
            if value < 1:
                raise CsanError(f"{name}={value}: must be at least 1")
        if pad_to_multiple < 1:
            raise CsanError(f"pad_to_multiple={pad_to_multiple}: must be at least 1")
        if num_shards < 1 or not 0 <= shard_index < num_shards:
            raise CsanError(
                f"shard_index={shard_index}, num_shards={num_shards}: need 0 <= index < shards"
            )
        keep = (src <= max_positions) & (tgt <= max_positions)
        self.num_dropped = int((~keep).sum())
        if not keep.any():
            raise CsanError(
                f"no pairs to batch: {len(src)} pairs, {self.num_dropped} longer than "
                f"max_positions={max_positions}"
            )
        self._indices = np.flatnonzero(keep)
        self._src = src[self._indices]
        self._tgt = tgt[self._indices]
        self.max_tokens = max_tokens
        self.max_positions = max_positions
        self.shuffle = shuffle
        self.seed = seed
        self.num_shards = num_shards
        self.shard_index = shard_index
        self.pad_to_multiple = pad_to_multiple
        self.epoch = 0
        # Batch sizes depend only on the sorted length sequence, the same in every epoch.
        self._num_batches = len(
            self._chunk(self._sorted_order(None, self._src, self._tgt), self._src, self._tgt)
        )

    @property
    def num_kept(self) -> int:
        """Number of pairs that are batched (those within ``max_positions``)."""
        return len(self._indices)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose (deterministic) batches :meth:`__iter__` yields."""
        self.epoch = epoch

    def __len__(self) -> int:
        """Batches per epoch for this shard."""
        return -(-self._num_batches // self.num_shards)

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.batches(self.epoch)

    def batches(
        self,
        epoch: int,
        lengths: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> list[list[int]]:
        """This shard's batches (lists of pair indices into the original lengths) for ``epoch``.

        ``lengths`` (source, target; one per original pair, with the special token) replace the
        lengths given at construction for this epoch's sorting and cutting: a segmentation sampled
        for the epoch (BPE-dropout). The same pairs are batched; how many batches there are follows
        the lengths.

        Example:
            >>> s = TokenBatchSampler([2, 2, 2, 2], [2, 2, 2, 2], max_tokens=4, max_positions=8,
            ...                       shuffle=False)
            >>> s.batches(1), s.batches(1, lengths=([4, 4, 2, 2], [4, 4, 2, 2]))
            ([[0, 1], [2, 3]], [[2, 3], [0], [1]])
        """
        src, tgt = self._src, self._tgt
        if lengths is not None:
            src = np.asarray(lengths[0], dtype=np.int64)[self._indices]
            tgt = np.asarray(lengths[1], dtype=np.int64)[self._indices]
        rng = np.random.default_rng([self.seed, epoch]) if self.shuffle else None
        batches = self._chunk(self._sorted_order(rng, src, tgt), src, tgt)
        if rng is not None:
            batches = [batches[k] for k in rng.permutation(len(batches))]
        per_shard = -(-len(batches) // self.num_shards)
        padded = batches + batches[: per_shard * self.num_shards - len(batches)]
        return padded[self.shard_index :: self.num_shards]

    def take(self, count: int, first_epoch: int = 1) -> list[list[int]]:
        """The first ``count`` batches of epochs ``first_epoch``, ``first_epoch + 1``, ... in order.

        A corpus of fewer than ``count`` batches goes round again, each round reshuffled as its
        epoch would be: what a benchmark of a fixed number of steps takes, however small the data.

        Example:
            >>> s = TokenBatchSampler([2, 2, 2], [2, 2, 2], max_tokens=4, max_positions=8)
            >>> len(s), len(s.take(5)), s.take(5)[:2] == s.batches(1)
            (2, 5, True)
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        out: list[list[int]] = []
        epoch = first_epoch
        while len(out) < count:
            out += self.batches(epoch)
            epoch += 1
        return out[:count]

    def _sorted_order(
        self, rng: np.random.Generator | None, src: np.ndarray, tgt: np.ndarray
    ) -> np.ndarray:
        """Positions into the kept pairs, by (tgt, src) length; ties random or by index."""
        tie = rng.permutation(len(src)) if rng is not None else np.arange(len(src))
        return np.lexsort((tie, src, tgt))

    def _chunk(self, order: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> list[list[int]]:
        """Cut ``order`` greedily into batches within the token budget (:func:`cut_batches`)."""
        m = self.pad_to_multiple
        widths = np.maximum(src, tgt)
        if m > 1:
            widths = -(-widths // m) * m
        cut = cut_batches(order.tolist(), widths.tolist(), self.max_tokens)
        return [self._indices[batch].tolist() for batch in cut]


@dataclass
class Batch:
    """A padded batch of pairs (right padding with the pad id).

    Fields:
        src: (B, S) long, source ids followed by EOS.
        tgt_in: (B, T) long, BOS followed by the target ids (decoder input).
        tgt_out: (B, T) long, the target ids followed by EOS (what to predict).
        src_tokens: number of non-pad tokens in ``src``.
        tgt_tokens: number of non-pad tokens in ``tgt_out`` (the loss normaliser).
        indices: the pair indices of the rows, in row order.

    Example:
        >>> batch = collate([([5, 6], [7]), ([8], [9, 10])])  # pad 0, BOS 2, EOS 3
        >>> batch.src.tolist(), batch.tgt_out.tolist(), len(batch), batch.tgt_tokens
        ([[5, 6, 3], [8, 3, 0]], [[7, 3, 0], [9, 10, 3]], 2, 5)
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_tokens: int
    tgt_tokens: int
    indices: list[int]

    def __len__(self) -> int:
        """Number of pairs (rows)."""
        return self.src.shape[0]

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Batch:
        """A copy with the tensors on ``device``."""
        return Batch(
            src=self.src.to(device, non_blocking=non_blocking),
            tgt_in=self.tgt_in.to(device, non_blocking=non_blocking),
            tgt_out=self.tgt_out.to(device, non_blocking=non_blocking),
            src_tokens=self.src_tokens,
            tgt_tokens=self.tgt_tokens,
            indices=list(self.indices),
        )

    def pin_memory(self) -> Batch:
        """A copy in pinned memory (DataLoader ``pin_memory=True`` calls this)."""
        return Batch(
            self.src.pin_memory(),
            self.tgt_in.pin_memory(),
            self.tgt_out.pin_memory(),
            self.src_tokens,
            self.tgt_tokens,
            list(self.indices),
        )


def collate(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    indices: Sequence[int] | None = None,
    *,
    pad_id: int = 0,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_to_multiple: int = 1,
) -> Batch:
    """Pad (source ids, target ids) pairs into a :class:`Batch`; ids carry no BOS/EOS yet.

    The source gets EOS appended; the target gives ``tgt_in = BOS + tgt`` and ``tgt_out = tgt +
    EOS``. ``S`` and ``T`` are rounded up to a multiple of ``pad_to_multiple`` (8 helps tensor
    cores). ``indices`` default to ``0 .. B-1``.

    Example:
        >>> b = collate([([5, 6], [7]), ([5], [7, 8, 9])])
        >>> b.src.tolist(), b.tgt_in.tolist(), b.tgt_out.tolist()
        ([[5, 6, 3], [5, 3, 0]], [[2, 7, 0, 0], [2, 7, 8, 9]], [[7, 3, 0, 0], [7, 8, 9, 3]])
        >>> b.src_tokens, b.tgt_tokens, b.indices
        (5, 6, [0, 1])
    """
    if not pairs:
        raise ValueError("collate: no pairs")
    if pad_to_multiple < 1:
        raise ValueError(f"collate: pad_to_multiple={pad_to_multiple}, must be at least 1")
    idx = list(range(len(pairs))) if indices is None else [int(i) for i in indices]
    if len(idx) != len(pairs):
        raise ValueError(f"collate: {len(pairs)} pairs but {len(idx)} indices")
    src_lens = [len(s) + 1 for s, _ in pairs]
    tgt_lens = [len(t) + 1 for _, t in pairs]
    s_len = _round_up(max(src_lens), pad_to_multiple)
    t_len = _round_up(max(tgt_lens), pad_to_multiple)
    src = np.full((len(pairs), s_len), pad_id, dtype=np.int64)
    tgt_in = np.full((len(pairs), t_len), pad_id, dtype=np.int64)
    tgt_out = np.full((len(pairs), t_len), pad_id, dtype=np.int64)
    for row, ((s, t), ls, lt) in enumerate(zip(pairs, src_lens, tgt_lens)):
        src[row, : ls - 1] = s
        src[row, ls - 1] = eos_id
        tgt_in[row, 0] = bos_id
        tgt_in[row, 1:lt] = t
        tgt_out[row, : lt - 1] = t
        tgt_out[row, lt - 1] = eos_id
    return Batch(
        src=torch.from_numpy(src),
        tgt_in=torch.from_numpy(tgt_in),
        tgt_out=torch.from_numpy(tgt_out),
        src_tokens=sum(src_lens),
        tgt_tokens=sum(tgt_lens),
        indices=idx,
    )
