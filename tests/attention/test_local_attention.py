"""csan.functional.local_attention against the direct definition (SPEC "1D-CSAN", "2D-CSAN")."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from attention_cases import padding_mask
from hypothesis import given, settings
from hypothesis import strategies as st
from slow_attention import direct_local_attention

from csan.functional import choose_backend, local_attention

BACKENDS = ["dense", "reference", "blocked", "auto"]
ATOL = 1e-5


def _inputs(batch, heads, time, d_h=4, dtype=torch.float32):
    return [torch.randn(batch, heads, time, d_h, dtype=dtype, requires_grad=True) for _ in range(3)]


def _assert_matches(options, *, lengths, heads=4, time=None, backend="dense", t_q=None):
    time = time or max(lengths)
    q, k, v = _inputs(len(lengths), heads, time)
    mask = padding_mask(lengths, time)
    q_in = q if t_q is None else q[:, :, time - t_q :]
    out = local_attention(q_in, k, v, key_padding_mask=mask, backend=backend, **options)
    expected = direct_local_attention(q_in, k, v, key_padding_mask=mask, **options)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=ATOL)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(expected, (q, k, v), grad)
    for g, w, name in zip(got, want, "qkv"):
        torch.testing.assert_close(g, w, atol=ATOL, rtol=ATOL, msg=f"gradient of {name}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("window", [1, 3, 11, 21])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("head_window", "head_boundary"), [(1, "wrap"), (3, "wrap"), (3, "clip")])
def test_matches_definition(backend, window, causal, head_window, head_boundary):
    options = {
        "window": window,
        "causal": causal,
        "head_window": head_window,
        "head_boundary": head_boundary,
    }
    _assert_matches(options, lengths=[7, 4, 1], backend=backend)


@pytest.mark.parametrize(("head_window", "head_boundary"), [(5, "wrap"), (5, "clip")])
@pytest.mark.parametrize("causal", [False, True])
def test_head_window_equal_to_heads(head_window, head_boundary, causal):
    options = {
        "window": 3,
        "causal": causal,
        "head_window": head_window,
        "head_boundary": head_boundary,
    }
    _assert_matches(options, lengths=[6, 3], heads=5)


@pytest.mark.parametrize("lengths", [[1], [1, 1], [5, 1, 3], [2, 6]])
def test_padding_patterns(lengths):
    _assert_matches({"window": 3, "head_window": 3}, lengths=lengths, time=6)


def test_cached_queries_are_the_last_positions():
    options = {"window": 3, "head_window": 3, "causal": True}
    _assert_matches(options, lengths=[6, 6], t_q=2)
    q, k, v = _inputs(2, 4, 6)
    full = local_attention(q, k, v, **options)
    torch.testing.assert_close(local_attention(q[:, :, 4:], k, v, **options), full[:, :, 4:])


@pytest.mark.parametrize("causal", [False, True])
def test_wide_window_is_vanilla(causal):
    q, k, v = _inputs(3, 2, 6)
    mask = padding_mask([6, 3, 1], 6)
    out = local_attention(q, k, v, window=11, key_padding_mask=mask, causal=causal)
    allowed = ~mask[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(6, 6, dtype=torch.bool).tril()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    real = ~mask
    torch.testing.assert_close(out.transpose(1, 2)[real], expected.transpose(1, 2)[real])


@pytest.mark.parametrize("head_boundary", ["wrap", "clip"])
def test_head_window_one_is_1d(head_boundary):
    q, k, v = _inputs(2, 3, 7)
    two_d = local_attention(q, k, v, window=3, head_window=1, head_boundary=head_boundary)
    per_head = [
        local_attention(q[:, h : h + 1], k[:, h : h + 1], v[:, h : h + 1], window=3)
        for h in range(3)
    ]
    torch.testing.assert_close(two_d, torch.cat(per_head, dim=1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fully_masked_rows_are_zero(backend):
    q, k, v = _inputs(2, 4, 5)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, :2] = False  # sentence 1: queries 3, 4 have no real key inside a window of 3
    out = local_attention(q, k, v, window=3, head_window=3, key_padding_mask=mask, backend=backend)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.equal(out[1, :, 4], torch.zeros_like(out[1, :, 4]))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window": 4}, "got 4"),
        ({"window": 0}, "got 0"),
        ({"window": -3}, "got -3"),
        ({"window": 3.0}, "got 3.0"),
        ({"window": 3, "head_window": 2}, "got 2"),
        ({"window": 3, "head_window": 0}, "got 0"),
        (
            {"window": 3, "head_window": 5},
            "head_window (5) must not exceed the number of heads (4)",
        ),
        ({"window": 3, "head_boundary": "mirror"}, "'mirror'"),
        ({"window": 3, "backend": "flash"}, "'flash'"),
        ({"window": 3, "dropout_p": 1.0}, "got 1.0"),
    ],
)
def test_bad_options_raise(options, message):
    q = torch.randn(1, 4, 3, 2)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        local_attention(q, q, q, **options)


def test_bad_shapes_raise():
    q = torch.randn(1, 4, 3, 2)
    with pytest.raises(ValueError, match="fewer queries than keys only in causal local_attention"):
        local_attention(q[:, :, :2], q, q, window=3)
    with pytest.raises(ValueError, match="key_padding_mask must be bool"):
        local_attention(q, q, q, window=3, key_padding_mask=torch.zeros(1, 4, dtype=torch.bool))


def test_auto_uses_dense_for_sentences():
    assert choose_backend(50, 11, torch.device("cpu")) == "dense"


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    window=st.sampled_from([1, 3, 5, 7, 13]),
    head_window=st.sampled_from([1, 3]),
    head_boundary=st.sampled_from(["wrap", "clip"]),
    causal=st.booleans(),
)
def test_matches_definition_property(lengths, window, head_window, head_boundary, causal):
    options = {
        "window": window,
        "head_window": head_window,
        "head_boundary": head_boundary,
        "causal": causal,
    }
    _assert_matches(options, lengths=lengths, heads=3)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
def test_long_sequences_agree_with_reference(backend, causal):
    q, k, v = _inputs(1, 4, 300, d_h=8)
    mask = padding_mask([290], 300)
    options = {"window": 11, "head_window": 3, "causal": causal, "key_padding_mask": mask}
    out = local_attention(q, k, v, backend=backend, **options)
    expected = local_attention(q, k, v, backend="reference", **options)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("head_window", "time", "padded"), [(1, 40, False), (3, 40, True), (3, 9, False)]
)
def test_sum_backward_equals_explicit_ones_gradient(backend, head_window, time, padded):
    """``out.sum().backward()`` hands the kernel an expanded, stride-0 gradient: it must give the same
    gradients as an explicit dense ones-like gradient (and be no special case of the definition)."""
    q, k, v = _inputs(2, 4, time, d_h=8)
    mask = padding_mask([time, time - 5], time) if padded else None
    options = {"window": 11, "head_window": head_window, "key_padding_mask": mask}
    out = local_attention(q, k, v, backend=backend, **options)
    got = torch.autograd.grad(out.sum(), (q, k, v), retain_graph=True)
    want = torch.autograd.grad(out, (q, k, v), torch.ones_like(out).contiguous())
    expected = direct_local_attention(q, k, v, **options)
    reference = torch.autograd.grad(expected.sum(), (q, k, v))
    for g, w, r, name in zip(got, want, reference, "qkv"):
        torch.testing.assert_close(g, w, atol=ATOL, rtol=ATOL, msg=f"gradient of {name}")
        torch.testing.assert_close(g, r, atol=ATOL, rtol=ATOL, msg=f"gradient of {name}")


def test_flex_backend_names_the_device_where_it_cannot_run():
    q = torch.randn(1, 4, 6, 2)
    with pytest.raises(ValueError, match=r"backend='flex' needs a CUDA device .* are on cpu"):
        local_attention(q, q, q, window=3, backend="flex")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("head_window", [1, 3])
def test_flex_backend_matches_definition_on_cuda(head_window):
    q, k, v = (x.detach().cuda().requires_grad_() for x in _inputs(2, 4, 300, d_h=16))
    mask = padding_mask([300, 250], 300).cuda()
    options = {"window": 11, "head_window": head_window, "key_padding_mask": mask}
    out = local_attention(q, k, v, backend="flex", **options)
    expected = local_attention(q, k, v, backend="dense", **options)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    got = torch.autograd.grad(out.sum(), (q, k, v))
    want = torch.autograd.grad(expected.sum(), (q, k, v))
    for g, w, name in zip(got, want, "qkv"):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4, msg=f"gradient of {name}")
    with pytest.raises(ValueError, match="no attention dropout"):
        local_attention(q, k, v, backend="flex", dropout_p=0.1, **options)
