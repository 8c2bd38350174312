"""csan.kernels.masks: the cached masks equal their definitions, are built once, and stay bounded."""

from __future__ import annotations

import pytest
import torch

from csan.kernels import masks
from csan.kernels.blocked import blocked_local_attention
from csan.kernels.dense import dense_local_attention

CPU = torch.device("cpu")


def _definition_band(t_q: int, t_k: int, window: int, causal: bool) -> torch.Tensor:
    allowed = torch.zeros(t_q, t_k, dtype=torch.bool)
    for row in range(t_q):
        i = t_k - t_q + row  # the queries are the last t_q positions
        for j in range(t_k):
            allowed[row, j] = (i - window < j <= i) if causal else abs(i - j) <= window // 2
    return allowed


@pytest.mark.parametrize(("t_q", "t_k"), [(1, 1), (5, 5), (3, 8), (17, 17)])
@pytest.mark.parametrize("window", [1, 3, 7, 41])
@pytest.mark.parametrize("causal", [False, True])
def test_band_is_the_window(t_q, t_k, window, causal):
    expected = _definition_band(t_q, t_k, window, causal)
    assert torch.equal(
        masks.build_band(t_q, t_k, window=window, causal=causal, device=CPU), expected
    )
    assert torch.equal(masks.band(t_q, t_k, window=window, causal=causal, device=CPU), expected)


def test_small_masks_are_built_once_large_ones_every_call():
    masks.clear_caches()
    small = masks.band(30, 30, window=11, causal=False, device=CPU)
    assert masks.band(30, 30, window=11, causal=False, device=CPU) is small
    assert masks.band(30, 30, window=11, causal=True, device=CPU) is not small
    side = int(masks.MAX_CACHED_ELEMENTS**0.5) + 1
    big = masks.band(side, side, window=3, causal=False, device=CPU)
    assert masks.band(side, side, window=3, causal=False, device=CPU) is not big
    index, _ = masks.head_neighbours(8, 3, "wrap", CPU)
    assert masks.head_neighbours(8, 3, "wrap", CPU)[0] is index
    masks.clear_caches()
    assert masks.band(30, 30, window=11, causal=False, device=CPU) is not small


@pytest.mark.parametrize(("head_window", "head_boundary"), [(1, "clip"), (3, "wrap"), (3, "clip")])
@pytest.mark.parametrize("causal", [False, True])
def test_dense_mask_is_band_times_existing_heads(head_window, head_boundary, causal):
    heads, t_q, t_k = 4, 6, 9
    mask = masks.dense_mask(
        t_q, t_k, window=5, causal=causal, heads=heads, head_window=head_window,
        head_boundary=head_boundary, device=CPU,
    )  # fmt: skip
    band = _definition_band(t_q, t_k, 5, causal)
    _, exists = masks.build_head_neighbours(heads, head_window, head_boundary, CPU)
    expected = band[None, :, None, :] & exists[:, None, :, None]  # (heads, t_q, N, t_k)
    got = mask.expand(1, heads, t_q, head_window * t_k)[0].view(heads, t_q, head_window, t_k)
    assert torch.equal(got, expected)
    assert mask.any(-1).all()  # every query has a key: its own position in its own head


def test_kernels_build_no_mask_on_a_repeated_call():
    """The second call of a shape finds every mask and index in the caches."""
    masks.clear_caches()
    q = torch.randn(2, 4, 70, 8)
    for kernel in (dense_local_attention, blocked_local_attention):
        kernel(q, q, q, window=11, head_window=3)
    caches = (masks._band, masks._head_neighbours, masks._dense_mask)
    before = [c.cache_info().misses for c in caches]
    for kernel in (dense_local_attention, blocked_local_attention):
        kernel(q, q, q, window=11, head_window=3)
    assert [c.cache_info().misses for c in caches] == before


def test_cached_masks_are_not_changed_by_the_kernels():
    masks.clear_caches()
    q = torch.randn(1, 4, 12, 8)
    dense_local_attention(q, q, q, window=3, head_window=3, head_boundary="clip")
    mask = masks.dense_mask(
        12, 12, window=3, causal=False, heads=4, head_window=3, head_boundary="clip", device=CPU
    )
    kept = mask.clone()
    padding = torch.zeros(1, 12, dtype=torch.bool)
    padding[0, 6:] = True
    dense_local_attention(
        q, q, q, window=3, head_window=3, head_boundary="clip", key_padding_mask=padding
    )
    assert torch.equal(mask, kept)


@pytest.mark.parametrize("head_boundary", ["wrap", "clip"])
def test_compiled_kernels_build_masks_in_the_graph_without_warnings(monkeypatch, head_boundary):
    """Under torch.compile the masks are built in the graph, not looked up in the lru_caches that
    Dynamo would trace through with a warning in every compiled training run (2026-11-24 log)."""
    import warnings

    import torch._dynamo.utils

    monkeypatch.setattr(torch._dynamo.utils, "warn_once_cache", set())  # see every warning again
    torch._dynamo.reset()

    def attend(q: torch.Tensor) -> torch.Tensor:
        return dense_local_attention(
            q, q, q, window=5, head_window=3, head_boundary=head_boundary, causal=True
        )

    compiled = torch.compile(attend, backend="eager", fullgraph=True)
    q = torch.randn(2, 4, 9, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compiled(q)
    assert not [w for w in caught if "lru_cache" in str(w.message)]
    torch.testing.assert_close(got, attend(q))
    torch._dynamo.reset()
