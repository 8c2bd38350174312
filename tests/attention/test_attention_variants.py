"""Each registered variant against a slow, direct implementation of its SPEC formula (same parameters)."""

from __future__ import annotations

import pytest
import torch
from attention_cases import CASES, CAUSAL_CASES, D_MODEL, history_for, make, padding_mask
from slow_attention import SLOW, slow_conv_qkv_cross

import csan.attention

LENGTHS = [6, 4, 1]


def _randomise(module: torch.nn.Module) -> None:
    """Non-zero biases and gates everywhere, so that no term of a formula hides behind a zero init."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))


def _compare(case: str, *, causal: bool) -> None:
    module = make(case, causal=causal)
    _randomise(module)
    name = CASES[case][0]
    x = torch.randn(len(LENGTHS), max(LENGTHS), D_MODEL, dtype=torch.float64)
    mask = padding_mask(LENGTHS, max(LENGTHS))
    history = history_for(module, *x.shape[:2])
    out = module(x, mask, history=history)
    expected = SLOW[name](module, x, mask, history)
    real = ~mask
    torch.testing.assert_close(out[real], expected[real], atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_slow_formula(case):
    _compare(case, causal=False)


@pytest.mark.parametrize("case", sorted(CAUSAL_CASES))
def test_causal_matches_slow_formula(case):
    _compare(case, causal=True)


def test_conv_qkv_cross_matches_slow_formula():
    module = csan.attention.build_cross("conv_qkv", d_model=D_MODEL, heads=4, kernels="1,3,3d2")
    module = module.double().eval()
    _randomise(module)
    x = torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    memory = torch.randn(2, 6, D_MODEL, dtype=torch.float64)
    memory_mask = padding_mask([6, 2], 6)
    out = module(x, memory, memory_mask)
    torch.testing.assert_close(out, slow_conv_qkv_cross(module, x, memory, memory_mask))


@pytest.mark.parametrize("causal", [False, True])
def test_csan2d_head_window_one_is_csan1d(causal):
    one = csan.attention.build("csan1d", d_model=8, heads=4, window=3, causal=causal)
    two = csan.attention.build("csan2d", d_model=8, heads=4, window=3, head_window=1, causal=causal)
    two.load_state_dict(one.state_dict())
    x, mask = torch.randn(2, 6, 8), padding_mask([6, 3], 6)
    torch.testing.assert_close(two(x, mask), one(x, mask))


@pytest.mark.parametrize("name", ["csan1d", "csan2d"])
@pytest.mark.parametrize("causal", [False, True])
def test_window_wider_than_sentence_is_vanilla(name, causal):
    vanilla = csan.attention.build("vanilla", d_model=8, heads=4, causal=causal)
    local = csan.attention.build(name, d_model=8, heads=4, window=11, causal=causal)
    if name == "csan2d":
        local = csan.attention.build(
            name, d_model=8, heads=4, window=11, head_window=1, causal=causal
        )
    local.load_state_dict(vanilla.state_dict())
    x, mask = torch.randn(2, 6, 8), padding_mask([6, 3], 6)
    real = ~mask
    torch.testing.assert_close(local(x, mask)[real], vanilla(x, mask)[real])
