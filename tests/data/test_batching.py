"""TokenBatchSampler invariants and collate shapes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from csan.data import TokenBatchSampler, collate
from csan.errors import CsanError


def _lengths(n: int = 500, seed: int = 1) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    src = rng.integers(2, 40, size=n)
    tgt = np.clip(src + rng.integers(-5, 6, size=n), 2, None)
    return src.tolist(), tgt.tolist()


def _flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


def test_every_kept_pair_once_per_epoch_and_budget_respected() -> None:
    src, tgt = _lengths()
    src[7], tgt[9] = 300, 301  # two pairs over max_positions
    s = TokenBatchSampler(src, tgt, max_tokens=200, max_positions=100)
    assert s.num_dropped == 2 and s.num_kept == len(src) - 2
    for epoch in range(3):
        s.set_epoch(epoch)
        batches = list(s)
        assert len(batches) == len(s), f"epoch {epoch}: __len__ must match"
        flat = _flat(batches)
        assert sorted(flat) == sorted(set(range(len(src))) - {7, 9}), f"epoch {epoch}"
        for b in batches:
            width = max(max(src[i], tgt[i]) for i in b)
            assert len(b) * width <= 200, f"batch of {len(b)} x {width} tokens > 200"


def test_epochs_differ_and_same_seed_repeats() -> None:
    src, tgt = _lengths()
    a = TokenBatchSampler(src, tgt, max_tokens=200, max_positions=100, seed=3)
    b = TokenBatchSampler(src, tgt, max_tokens=200, max_positions=100, seed=3)
    c = TokenBatchSampler(src, tgt, max_tokens=200, max_positions=100, seed=4)
    assert a.batches(0) == b.batches(0) and a.batches(5) == b.batches(5)
    assert a.batches(0) != a.batches(1), "set_epoch must change the order"
    assert a.batches(0) != c.batches(0), "the seed must change the order"
    a.set_epoch(1)
    assert list(a) == b.batches(1)


def test_take_goes_round_the_epochs_in_order() -> None:
    src, tgt = _lengths(n=60)
    s = TokenBatchSampler(src, tgt, max_tokens=200, max_positions=100, seed=3)
    n = len(s)
    assert s.take(2 * n + 3) == s.batches(1) + s.batches(2) + s.batches(3)[:3]
    assert s.take(n + 1, first_epoch=4) == s.batches(4) + s.batches(5)[:1]
    assert s.take(0) == []
    with pytest.raises(ValueError, match="count"):
        s.take(-1)


def test_batches_group_similar_lengths() -> None:
    src, tgt = _lengths(2000)
    s = TokenBatchSampler(src, tgt, max_tokens=400, max_positions=100)
    padded = sum(len(b) * max(max(src[i], tgt[i]) for i in b) for b in s)
    real = sum(max(a, b) for a, b in zip(src, tgt))
    assert padded < 1.1 * real, f"sorted batching wastes {padded / real - 1:.0%} on padding"


def test_no_shuffle_is_sorted_and_fixed() -> None:
    src, tgt = _lengths(100)
    s = TokenBatchSampler(src, tgt, max_tokens=100, max_positions=100, shuffle=False)
    flat = _flat(s.batches(0))
    assert s.batches(0) == s.batches(1)
    keys = [(tgt[i], src[i]) for i in flat]
    assert keys == sorted(keys)


def test_long_pair_gets_its_own_batch() -> None:
    s = TokenBatchSampler([5, 90, 5], [5, 80, 5], max_tokens=50, max_positions=100)
    assert sorted(map(sorted, s)) == [[0, 2], [1]]


def test_pad_to_multiple_counts_in_budget() -> None:
    s = TokenBatchSampler([9] * 4, [9] * 4, max_tokens=48, max_positions=64, pad_to_multiple=8)
    assert sorted(len(b) for b in s) == [1, 3], "9 rounds up to 16: 3 x 16 = 48"


@pytest.mark.parametrize("num_shards", [2, 3, 4])
def test_shards_equal_length_and_cover_everything(num_shards: int) -> None:
    src, tgt = _lengths(301)
    kwargs = {"max_tokens": 150, "max_positions": 100, "seed": 7, "num_shards": num_shards}
    shards = [TokenBatchSampler(src, tgt, shard_index=k, **kwargs) for k in range(num_shards)]
    full = TokenBatchSampler(src, tgt, max_tokens=150, max_positions=100, seed=7)
    for epoch in (0, 1):
        per_shard = [s.batches(epoch) for s in shards]
        assert {len(b) for b in per_shard} == {len(shards[0])}, "equal number of batches"
        counts = Counter(i for b in per_shard for i in _flat(b))
        assert set(counts) == set(range(len(src))), "every pair is seen by some shard"
        extra = len(shards[0]) * num_shards - len(full)
        assert extra < num_shards
        repeated = sum(c - 1 for c in counts.values())
        assert repeated == sum(len(b) for b in full.batches(epoch)[:extra]), "only padding repeats"
        if extra == 0:
            assert all(c == 1 for c in counts.values()), "shards are disjoint"


def test_shards_disjoint_when_batches_divide_evenly() -> None:
    s0 = TokenBatchSampler([4] * 8, [4] * 8, max_tokens=8, max_positions=10, num_shards=2)
    s1 = TokenBatchSampler(
        [4] * 8, [4] * 8, max_tokens=8, max_positions=10, num_shards=2, shard_index=1
    )
    a, b = _flat(list(s0)), _flat(list(s1))
    assert len(s0) == len(s1) == 2 and not set(a) & set(b) and sorted(a + b) == list(range(8))


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 30), st.integers(1, 30)), min_size=1, max_size=60),
    max_tokens=st.integers(1, 100),
    seed=st.integers(0, 3),
)
def test_sampler_property(lengths: list[tuple[int, int]], max_tokens: int, seed: int) -> None:
    src, tgt = (list(x) for x in zip(*lengths))
    kept = {i for i, (a, b) in enumerate(lengths) if max(a, b) <= 25}
    if not kept:
        with pytest.raises(CsanError, match="no pairs to batch"):
            TokenBatchSampler(src, tgt, max_tokens=max_tokens, max_positions=25)
        return
    s = TokenBatchSampler(src, tgt, max_tokens=max_tokens, max_positions=25, seed=seed)
    batches = s.batches(seed)
    assert sorted(_flat(batches)) == sorted(kept)
    assert s.num_dropped == len(lengths) - len(kept)
    for b in batches:
        width = max(max(lengths[i]) for i in b)
        assert len(b) == 1 or len(b) * width <= max_tokens


def test_bad_arguments() -> None:
    with pytest.raises(CsanError, match="max_tokens=0"):
        TokenBatchSampler([3], [3], max_tokens=0, max_positions=10)
    with pytest.raises(CsanError, match="shard_index=2, num_shards=2"):
        TokenBatchSampler([3], [3], max_tokens=10, max_positions=10, num_shards=2, shard_index=2)
    with pytest.raises(CsanError, match="2 longer than max_positions=3"):
        TokenBatchSampler([5, 6], [1, 1], max_tokens=10, max_positions=3)
    with pytest.raises(ValueError, match="2 source lengths but 1 target"):
        TokenBatchSampler([3, 3], [3], max_tokens=10, max_positions=10)


# ------------------------------------------------------------------------------------ collate
def test_collate_layout() -> None:
    pairs = [([10, 11, 12], [20]), ([13], [21, 22, 23, 24])]
    b = collate(pairs, [7, 3])
    assert b.src.tolist() == [[10, 11, 12, 3], [13, 3, 0, 0]]
    assert b.tgt_in.tolist() == [[2, 20, 0, 0, 0], [2, 21, 22, 23, 24]]
    assert b.tgt_out.tolist() == [[20, 3, 0, 0, 0], [21, 22, 23, 24, 3]]
    assert (b.src_tokens, b.tgt_tokens, b.indices, len(b)) == (6, 7, [7, 3], 2)
    assert b.src.dtype == b.tgt_in.dtype == b.tgt_out.dtype == torch.long


def test_collate_invariants_with_padding_multiple() -> None:
    rng = np.random.default_rng(0)
    pairs = [
        (rng.integers(4, 50, size=n).tolist(), rng.integers(4, 50, size=m).tolist())
        for n, m in [(3, 9), (12, 1), (0, 5)]
    ]
    b = collate(pairs, pad_id=0, bos_id=2, eos_id=3, pad_to_multiple=8)
    assert b.src.shape == (3, 16) and b.tgt_in.shape == b.tgt_out.shape == (3, 16)
    assert int((b.src != 0).sum()) == b.src_tokens == 3 + 12 + 0 + 3
    assert int((b.tgt_out != 0).sum()) == b.tgt_tokens == int((b.tgt_in != 0).sum())
    assert (b.tgt_in[:, 0] == 2).all()
    for row, (s, t) in enumerate(pairs):
        assert b.src[row, : len(s)].tolist() == s and b.src[row, len(s)] == 3
        assert b.tgt_in[row, 1 : len(t) + 1].tolist() == t, "tgt_in = BOS + target"
        assert b.tgt_out[row, : len(t)].tolist() == t and b.tgt_out[row, len(t)] == 3
        assert not b.tgt_out[row, len(t) + 1 :].any() and not b.src[row, len(s) + 1 :].any()


def test_batch_to_device_keeps_fields() -> None:
    b = collate([([5], [6])])
    c = b.to("cpu")
    assert torch.equal(c.src, b.src) and c.indices == b.indices and c.tgt_tokens == b.tgt_tokens


def test_collate_rejects_nothing() -> None:
    with pytest.raises(ValueError, match="no pairs"):
        collate([])
