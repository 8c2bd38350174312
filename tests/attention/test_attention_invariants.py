"""Invariants every variant must keep: padding, causality, cached decoding, parameters, errors, gradients."""

from __future__ import annotations

import pytest
import torch
from attention_cases import (
    CASES,
    CAUSAL_CASES,
    D_MODEL,
    HEADS,
    NON_CAUSAL_NAMES,
    history_for,
    make,
    padding_mask,
)

import csan.attention
from csan.models.base import reorder_state

LENGTHS = [6, 3, 1]


def _with_padding_content(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[mask] = 10 * torch.randn_like(x[mask])
    return x


def _padding_cases():
    for case in sorted(CASES):
        yield case, False
    for case in sorted(CAUSAL_CASES):
        yield case, True


@pytest.mark.parametrize(("case", "causal"), list(_padding_cases()))
def test_padding_does_not_change_real_tokens(case, causal):
    module = make(case, causal=causal)
    t = max(LENGTHS)
    x = torch.randn(len(LENGTHS), t, D_MODEL, dtype=torch.float64)
    mask = padding_mask(LENGTHS, t)
    history = history_for(module, len(LENGTHS), t)
    real = ~mask
    out = module(x, mask, history=history)

    # Different padding content.
    other = module(
        _with_padding_content(x, mask),
        mask,
        history=None if history is None else [_with_padding_content(h, mask) for h in history],
    )
    torch.testing.assert_close(other[real], out[real], atol=1e-10, rtol=1e-10)

    # Three more padding positions.
    extra = torch.randn(len(LENGTHS), 3, D_MODEL, dtype=torch.float64)
    longer_mask = padding_mask(LENGTHS, t + 3)
    longer = module(
        torch.cat([x, extra], dim=1),
        longer_mask,
        history=None if history is None else [torch.cat([h, extra], dim=1) for h in history],
    )
    torch.testing.assert_close(longer[:, :t][real], out[real], atol=1e-10, rtol=1e-10)
    assert torch.isfinite(longer).all()


@pytest.mark.parametrize("case", sorted(CAUSAL_CASES))
def test_no_position_reads_the_future(case):
    module = make(case, causal=True)
    x = torch.randn(2, 7, D_MODEL, dtype=torch.float64)
    history = history_for(module, 2, 7)
    out = module(x, history=history)
    for t in (1, 4, 6):
        changed = x.clone()
        changed[:, t:] += torch.randn_like(changed[:, t:])
        changed_history = None
        if history is not None:
            changed_history = [h.clone() for h in history]
            for h in changed_history:
                h[:, t:] += torch.randn_like(h[:, t:])
        again = module(changed, history=changed_history)
        torch.testing.assert_close(again[:, :t], out[:, :t], atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("case", sorted(CAUSAL_CASES))
def test_cached_decoding_equals_full_pass(case, step):
    """Feed ``step`` positions at a time, reordering the batch (beam-style, with repeats) in between."""
    module = make(case, causal=True)
    batch, t = 3, 7
    x = torch.randn(batch, t, D_MODEL, dtype=torch.float64)
    history = history_for(module, batch, t)
    full = module(x, history=history)

    state: dict = {}
    order = torch.arange(batch)  # row r of the state holds sentence order[r]
    reorders = [torch.tensor([2, 0, 1]), torch.tensor([1, 1, 0]), torch.tensor([0, 2, 2])]
    for n, start in enumerate(range(0, t, step)):
        sl = slice(start, start + step)
        new_history = None if history is None else [h[order, sl] for h in history]
        out = module(x[order, sl], state=state, history=new_history)
        torch.testing.assert_close(out, full[order, sl], atol=1e-10, rtol=1e-10)
        index = reorders[n % len(reorders)]
        state = reorder_state(state, index)
        order = order[index]


@pytest.mark.parametrize("name", ["csan1d", "csan2d"])
def test_csan_cache_is_bounded(name):
    module = csan.attention.build(name, d_model=D_MODEL, heads=HEADS, window=3, causal=True)
    state: dict = {}
    for _ in range(6):
        module(torch.randn(2, 1, D_MODEL), state=state)
    assert state["k"].shape == (2, HEADS, 2, D_MODEL // HEADS)


def test_conv_qkv_cross_cached_decoding_equals_full_pass():
    module = csan.attention.build_cross("conv_qkv", d_model=D_MODEL, heads=HEADS, kernels="1,3,3d2")
    module = module.double().eval()
    x = torch.randn(3, 6, D_MODEL, dtype=torch.float64)
    memory = torch.randn(3, 5, D_MODEL, dtype=torch.float64)
    memory_mask = padding_mask([5, 2, 4], 5)
    full = module(x, memory, memory_mask)
    state: dict = {}
    order = torch.arange(3)
    for t in range(6):
        out = module(x[order, t : t + 1], memory[order], memory_mask[order], state=state)
        torch.testing.assert_close(out, full[order, t : t + 1], atol=1e-10, rtol=1e-10)
        index = torch.tensor([1, 2, 1]) if t % 2 else torch.tensor([2, 0, 1])
        state, order = reorder_state(state, index), order[index]


def test_conv_qkv_cross_queries_are_causal():
    module = csan.attention.build_cross("conv_qkv", d_model=D_MODEL, heads=HEADS).eval()
    x, memory = torch.randn(2, 6, D_MODEL), torch.randn(2, 5, D_MODEL)
    out = module(x, memory, None)
    changed = x.clone()
    changed[:, 3:] = torch.randn(2, 3, D_MODEL)
    torch.testing.assert_close(module(changed, memory, None)[:, :3], out[:, :3])


@pytest.mark.parametrize("name", ["csan1d", "csan2d"])
def test_csan_adds_no_parameters(name):
    def count(module):
        return sum(p.numel() for p in module.parameters())

    vanilla = csan.attention.build("vanilla", d_model=16, heads=4)
    assert count(csan.attention.build(name, d_model=16, heads=4)) == count(vanilla)
    assert {n for n, _ in csan.attention.build(name, d_model=16, heads=4).named_parameters()} == {
        n for n, _ in vanilla.named_parameters()
    }


@pytest.mark.parametrize("name", NON_CAUSAL_NAMES)
def test_encoder_only_variants_refuse_causal(name):
    with pytest.raises(ValueError, match=f"attention '{name}' cannot run causally"):
        csan.attention.build(name, d_model=D_MODEL, heads=HEADS, causal=True)


def test_registry_lists_every_variant():
    expected = {name for name, _ in CASES.values()}
    assert set(csan.attention.available()) == expected
    assert set(csan.attention.available_cross()) == {"vanilla", "conv_qkv"}


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("csan1d", {"head_window": 3}, "has no option 'head_window'"),
        ("vanilla", {"window": 3}, "has no option 'window'"),
        ("csan1d", {"window": 4}, "window must be a positive odd integer, got 4"),
        ("csan1d", {"window": 0}, "got 0"),
        ("csan2d", {"head_window": 2}, "head_window must be a positive odd integer, got 2"),
        (
            "csan2d",
            {"head_window": 5},
            r"head_window \(5\) must not exceed the number of heads \(4\)",
        ),
        ("csan2d", {"head_boundary": "reflect"}, "got 'reflect'"),
        ("csan1d", {"backend": "cuda"}, "got 'cuda'"),
        ("rel_pos", {"max_relative": -1}, "got -1"),
        ("local_hard", {"window": 0}, "got 0"),
        ("block", {"block_size": 0}, "got 0"),
        ("cnn", {"kernel": 2}, "got 2"),
        ("cnn", {"conv_layers": 0}, "got 0"),
        ("cnn", {"separable": "yes"}, "separable must be true or false, got 'yes'"),
        ("context", {"context": "local"}, "got 'local'"),
        ("context", {"context": "deep"}, "needs option layer"),
        ("context", {"context": "deep", "layer": 0}, "got 0"),
        ("conv_qkv", {"kernels": "3,x5"}, "bad kernel spec 'x5'"),
        ("conv_qkv", {"kernels": "3,4"}, "odd widths"),
    ],
)
def test_bad_options_name_the_value(name, options, message):
    with pytest.raises(ValueError, match=message):
        csan.attention.build(name, d_model=D_MODEL, heads=HEADS, **options)


def test_bi_direct_needs_even_heads():
    with pytest.raises(ValueError, match="heads must be even, got 3"):
        csan.attention.build("bi_direct", d_model=9, heads=3)


def test_context_checks_history_length():
    module = csan.attention.build("context", d_model=D_MODEL, heads=HEADS, context="deep", layer=2)
    x = torch.randn(1, 3, D_MODEL)
    with pytest.raises(
        ValueError, match=r"needs history \[H\^0, \.\.\., H\^1\] \(2 tensors\), got 1"
    ):
        module(x, history=[x])


@pytest.mark.parametrize("name", ["csan1d", "rel_pos", "context", "conv_qkv", "block"])
def test_state_needs_causal(name):
    module = csan.attention.build(name, d_model=D_MODEL, heads=HEADS)
    with pytest.raises(ValueError, match="only when built with causal=True"):
        module(torch.randn(1, 1, D_MODEL), state={})


@pytest.mark.parametrize(("case", "causal"), list(_padding_cases()))
def test_backward_gives_finite_gradients(case, causal):
    name, options = CASES[case]
    module = csan.attention.build(
        name, d_model=D_MODEL, heads=HEADS, causal=causal, dropout=0.1, **options
    ).train()
    x = torch.randn(3, 5, D_MODEL, requires_grad=True)
    mask = padding_mask([5, 2, 1], 5)
    history = history_for(module, 3, 5, dtype=torch.float32)
    module(x, mask, history=history).sum().backward()
    assert torch.isfinite(x.grad).all()
    for pname, p in module.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
