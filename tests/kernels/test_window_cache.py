"""csan.kernels.cache: incremental decoding with a bounded cache equals one causal pass."""

from __future__ import annotations

import pytest
import torch
from kernel_definition import definition_attention

from csan.kernels.blocked import blocked_local_attention
from csan.kernels.cache import append_window
from csan.kernels.dense import dense_local_attention
from csan.models.base import reorder_state


class WindowCache:
    """What a causal CSAN layer does per decoding step: extend the cache, attend over it."""

    def __init__(self, **options) -> None:
        self.options = options

    def step(self, state, q, k, v):
        k_all, v_all = append_window(state, k, v, window=self.options["window"])
        return dense_local_attention(q, k_all, v_all, causal=True, **self.options)


def _qkv(batch=2, heads=4, time=13, d_h=8):
    gen = torch.Generator().manual_seed(time)
    return [
        torch.randn(batch, heads, time, d_h, generator=gen, dtype=torch.float64) for _ in range(3)
    ]


def _decode(cache, q, k, v, steps):
    """Feed the positions in groups of ``steps`` sizes; return the outputs and the largest cache seen."""
    state, outs, start, largest = {}, [], 0, 0
    for size in steps:
        part = slice(start, start + size)
        outs.append(cache.step(state, q[:, :, part], k[:, :, part], v[:, :, part]))
        largest = max(largest, state["k"].size(2))
        start += size
    assert start == q.size(2)
    return torch.cat(outs, dim=2), largest


@pytest.mark.parametrize("window", [1, 3, 5])
@pytest.mark.parametrize(("head_window", "head_boundary"), [(1, "wrap"), (3, "wrap"), (3, "clip")])
@pytest.mark.parametrize("steps", [[1] * 13, [3, 1, 4, 1, 4]], ids=["one-by-one", "groups"])
def test_incremental_equals_full_causal_pass(window, head_window, head_boundary, steps):
    q, k, v = _qkv()
    options = dict(window=window, head_window=head_window, head_boundary=head_boundary)
    cache = WindowCache(**options)
    out, largest = _decode(cache, q, k, v, steps)
    full = blocked_local_attention(q, k, v, causal=True, **options)
    torch.testing.assert_close(out, full)
    torch.testing.assert_close(out, definition_attention(q, k, v, causal=True, **options))
    assert largest <= window - 1  # bounded: never more than the keys a later query can read


def test_cache_memory_is_bounded_over_long_decoding():
    cache, state = WindowCache(window=5, head_window=3), {}
    x = torch.randn(1, 4, 1, 8)
    for _ in range(200):
        cache.step(state, x, x, x)
    assert state["k"].shape == (1, 4, 4, 8)
    assert state["v"].shape == (1, 4, 4, 8)


def test_cache_follows_beam_reordering():
    """Reordering the batch of the state (beam search) equals decoding the reordered sequences."""
    q, k, v = _qkv(batch=3)
    cache, state = WindowCache(window=5, head_window=3), {}
    for i in range(6):
        cache.step(state, q[:, :, i : i + 1], k[:, :, i : i + 1], v[:, :, i : i + 1])
    order = torch.tensor([2, 2, 0])
    state = reorder_state(state, order)
    q, k, v = (x.index_select(0, order) for x in (q, k, v))
    rest = [
        cache.step(state, q[:, :, i : i + 1], k[:, :, i : i + 1], v[:, :, i : i + 1])
        for i in range(6, 13)
    ]
    full = blocked_local_attention(q, k, v, window=5, head_window=3, causal=True)
    torch.testing.assert_close(torch.cat(rest, dim=2), full[:, :, 6:])


def test_append_window_keeps_the_last_window_minus_one():
    state = {}
    keys = torch.arange(6.0).view(1, 1, 6, 1)
    k_all, _ = append_window(state, keys[:, :, :4], keys[:, :, :4], window=3)
    assert k_all.flatten().tolist() == [0, 1, 2, 3]
    assert state["k"].flatten().tolist() == [2, 3]
    k_all, _ = append_window(state, keys[:, :, 4:], keys[:, :, 4:], window=3)
    assert k_all.flatten().tolist() == [2, 3, 4, 5]
    assert state["k"].flatten().tolist() == [4, 5]
