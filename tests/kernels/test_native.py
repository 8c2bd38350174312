"""csan.kernels.native against the direct definition of SPEC.md, its build, and where ``auto`` uses it."""

from __future__ import annotations

import itertools
import os
import warnings

import pytest
import torch
from kernel_definition import definition_attention

import csan.functional as functional
from csan.functional import local_attention
from csan.kernels import native

LENGTHS = [1, 2, 5, 16, 17, 100]
WINDOWS = [1, 3, 11, 41]  # 41: wider than most of the lengths

# A machine with a C++ compiler must build the library (a broken build fails here, it does not skip)
needs_library = pytest.mark.skipif(
    native._compiler() is None or os.environ.get("CSAN_NATIVE") == "0",
    reason="no C++ compiler on the PATH (or CSAN_NATIVE=0): the native kernel is not built",
)


def _inputs(batch, heads, time, d_h, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed + time)
    return [
        torch.randn(batch, heads, time, d_h, generator=gen, dtype=dtype).requires_grad_()
        for _ in range(3)
    ]


@needs_library
def test_the_library_builds_here():
    assert native.available()


HEAD_OPTIONS = [(1, "wrap"), (3, "wrap"), (3, "clip"), (5, "wrap"), (5, "clip")]  # 5 = all heads


@needs_library
@pytest.mark.parametrize(
    "time, window, causal, heads",
    [
        (t, m, c, h)
        for t, m, c in itertools.product(LENGTHS, WINDOWS, [False, True])
        for h in (HEAD_OPTIONS if not c else HEAD_OPTIONS[:3])
    ],
)
def test_outputs_and_gradients_match_the_definition(time, window, causal, heads):
    head_window, boundary = heads
    options = {"window": window, "head_window": head_window, "head_boundary": boundary}
    q, k, v = _inputs(2, 5, time, 4, torch.float64)
    out = native.native_local_attention(q, k, v, causal=causal, **options)
    expected = definition_attention(q, k, v, causal=causal, **options)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(expected, (q, k, v), grad)
    for name, a, b in zip("qkv", got, want):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=1e-11, msg=lambda m, n=name: f"d{n}: {m}")


@needs_library
@pytest.mark.parametrize("d_h", [1, 7, 64, 100])
def test_float32_matches_at_every_head_size(d_h):
    q, k, v = _inputs(1, 2, 300, d_h, torch.float32)
    out = native.native_local_attention(q, k, v, window=11)
    expected = definition_attention(q, k, v, window=11)
    torch.testing.assert_close(out, expected, atol=2e-6, rtol=1e-5)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(expected, (q, k, v), grad)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@needs_library
def test_gradcheck():
    q, k, v = _inputs(1, 4, 12, 3, torch.float64)
    for causal, head_window, boundary in [
        (False, 1, "wrap"),
        (True, 1, "wrap"),
        (False, 3, "clip"),
    ]:

        def attend(a, b, c, causal=causal, n=head_window, edge=boundary):
            return native.native_local_attention(
                a, b, c, window=5, causal=causal, head_window=n, head_boundary=edge
            )

        assert torch.autograd.gradcheck(attend, (q, k, v))


@needs_library
def test_strided_inputs_and_an_output_gradient_constant_in_time():
    # (batch, time, heads, d_h) projections viewed as (batch, heads, time, d_h), and out.sum()
    gen = torch.Generator().manual_seed(3)
    x = [torch.randn(2, 40, 3, 8, generator=gen, dtype=torch.float64) for _ in range(3)]
    q, k, v = (t.requires_grad_().transpose(1, 2) for t in x)
    assert not q.is_contiguous()
    out = native.native_local_attention(q, k, v, window=7)
    expected = definition_attention(q, k, v, window=7)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)
    got = torch.autograd.grad(out.sum(), x)
    want = torch.autograd.grad(expected.sum(), x)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=1e-11)
    # a last dimension that is not contiguous either
    qt = torch.randn(1, 2, 8, 30, dtype=torch.float64).mT
    torch.testing.assert_close(
        native.native_local_attention(qt, qt, qt, window=3),
        definition_attention(qt, qt, qt, window=3),
    )


@needs_library
def test_the_same_numbers_on_one_thread_and_many():
    q, k, v = _inputs(1, 1, 257, 16, torch.float32)  # one row: split over time on many threads
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            out = native.native_local_attention(q, k, v, window=11)
            results.append((out, *torch.autograd.grad(out, (q, k, v), torch.ones_like(out))))
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)


@needs_library
@pytest.mark.parametrize("batch, head_window", [(1, 1), (2, 1), (1, 3), (4, 3)])
def test_openmp_and_the_thread_pool_give_the_same_numbers(monkeypatch, batch, head_window):
    # with batch 1 and N = 3 the backward takes its two passes, otherwise the one-pass form
    q, k, v = _inputs(batch, 3, 130, 8, torch.float32)
    results = []
    for openmp in (True, False):
        monkeypatch.setattr(native._library(), "openmp", openmp)
        monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
        out = native.native_local_attention(q, k, v, window=11, head_window=head_window)
        results.append((out, *torch.autograd.grad(out, (q, k, v), torch.ones_like(out))))
    for a, b in zip(*results):
        assert torch.equal(a, b)


@needs_library
@pytest.mark.parametrize(
    "head_window, boundary, causal",
    [
        (1, "wrap", False),
        (1, "wrap", True),
        (3, "wrap", False),
        (3, "clip", False),
        (5, "clip", True),
    ],
)
def test_the_one_pass_and_two_pass_backward_give_the_same_numbers(
    monkeypatch, head_window, boundary, causal
):
    # which form runs depends on the threads (groups >= threads: one pass), so they must agree bit
    # for bit, or a result would change with torch.set_num_threads
    q, k, v = _inputs(2, 5, 70, 8, torch.float32)
    grad = torch.randn(q.shape, generator=torch.Generator().manual_seed(1))
    results = []
    for one_pass in (True, False):
        if not one_pass:
            monkeypatch.setattr(native, "_group_units", lambda *args: None)
        out = native.native_local_attention(
            q, k, v, window=7, head_window=head_window, head_boundary=boundary, causal=causal
        )
        results.append((out, *torch.autograd.grad(out, (q, k, v), grad)))
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_units_cover_every_row_and_position_once(monkeypatch):
    for threads, rows, time in [(2, 8, 100), (2, 1, 100), (3, 2, 5), (4, 1, 2), (1, 3, 7)]:
        monkeypatch.setattr(torch, "get_num_threads", lambda threads=threads: threads)
        seen = torch.zeros(rows, time, dtype=torch.int64)
        for r0, r1, t0, t1 in native._units(rows, time):
            seen[r0:r1, t0:t1] += 1
        assert torch.equal(seen, torch.ones_like(seen)), (threads, rows, time)
        # whole groups of rows (one row, or a batch's heads: group divides rows), or None when
        # there are fewer groups than threads
        for group in [g for g in (1, 2) if rows % g == 0]:
            units = native._group_units(rows, group, time)
            if rows // group < threads:
                assert units is None
                continue
            seen.zero_()
            for r0, r1, t0, t1 in units:
                assert r0 % group == 0 and r1 % group == 0 and (t0, t1) == (0, time)
                seen[r0:r1] += 1
            assert torch.equal(seen, torch.ones_like(seen)), (threads, rows, group)


def test_supports():
    q = torch.zeros(1, 2, 4, 8)
    ok = {"head_window": 1, "padded": False, "dropout_p": 0.0, "window": 11}
    assert native.supports(q, **ok)
    assert not native.supports(torch.zeros(1, 2, 4, 1025), **ok)  # d_h past the stack buffers
    assert not native.supports(q.bfloat16(), **ok)
    assert native.supports(q, **{**ok, "head_window": 3})
    assert not native.supports(q, **{**ok, "padded": True})
    assert not native.supports(q, **{**ok, "dropout_p": 0.1})
    assert not native.supports(q, **{**ok, "window": 1025})
    assert not native.supports(q, **{**ok, "window": 343, "head_window": 3})


@needs_library
def test_auto_takes_the_native_kernel_where_it_can(monkeypatch):
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return native.native_local_attention(*args, **kwargs)

    monkeypatch.setattr(functional, "native_local_attention", spy)
    q, k, v = _inputs(1, 3, 256, 8, torch.float32)
    out = local_attention(q, k, v, window=11)
    assert calls == [{"window": 11, "head_window": 1, "causal": False, "head_boundary": "wrap"}]
    blocked = local_attention(q, k, v, window=11, backend="blocked")  # the PyTorch kernel
    assert len(calls) == 1
    torch.testing.assert_close(out, blocked, atol=1e-6, rtol=1e-5)
    local_attention(q, k, v, window=11, head_window=3, head_boundary="clip")  # 2D-CSAN too
    assert calls[-1] == {"window": 11, "head_window": 3, "causal": False, "head_boundary": "clip"}
    # calls it cannot do go to the blocked kernel (long) or dense (short): padding, dropout, bf16
    mask = torch.zeros(1, 256, dtype=torch.bool)
    local_attention(q, k, v, window=11, key_padding_mask=mask)
    local_attention(q, k, v, window=11, dropout_p=0.1)
    local_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), window=11)
    assert len(calls) == 2
    # at any length: a sentence of 32 too
    short = [x[:, :, :32] for x in (q, k, v)]
    out = local_attention(*short, window=11)
    assert len(calls) == 3
    torch.testing.assert_close(out, local_attention(*short, window=11, backend="dense"))
    # cached decoding (fewer queries than keys): dense
    local_attention(q[:, :, -1:], k, v, window=11, causal=True)
    assert len(calls) == 3


def test_explicit_native_without_the_library_says_why(monkeypatch):
    monkeypatch.setattr(native, "_library", lambda: None)
    q = torch.randn(1, 3, 300, 8)
    with pytest.raises(ValueError, match=r"backend='native'.*CSAN_NATIVE=0"):
        local_attention(q, q, q, window=11, backend="native")
    # auto keeps the PyTorch kernel, and "native" on a call it does not do takes that one too
    torch.testing.assert_close(
        local_attention(q, q, q, window=11), local_attention(q, q, q, window=11, backend="blocked")
    )
    local_attention(q, q, q, window=11, dropout_p=0.1, backend="native")


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("CSAN_NATIVE", "0")
    assert native._library.__wrapped__() is None


def test_a_failing_compiler_warns_once_and_leaves_no_file(monkeypatch, tmp_path):
    compiler = tmp_path / "bin" / "c++"
    compiler.parent.mkdir()
    compiler.write_text("#!/bin/sh\necho 'native.cpp:1: error: no such thing' >&2\nexit 1\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setenv("CSAN_CACHE", str(tmp_path / "cache"))
    with pytest.warns(RuntimeWarning, match=r"could not build.*no such thing.*CSAN_NATIVE=0"):
        assert native._library.__wrapped__() is None
    assert list((tmp_path / "cache" / "native").iterdir()) == []


def test_no_compiler_is_silent(monkeypatch):
    monkeypatch.setenv("CXX", "")
    monkeypatch.setenv("PATH", "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native._library.__wrapped__() is None


@needs_library
def test_the_build_is_cached_by_machine_and_source(monkeypatch, tmp_path):
    monkeypatch.setenv("CSAN_CACHE", str(tmp_path))
    compiler = native._compiler()
    first = native._build(compiler, native._FLAG_SETS[-1])
    stamp = first.stat().st_mtime_ns
    assert native._build(compiler, native._FLAG_SETS[-1]) == first
    assert first.stat().st_mtime_ns == stamp  # not built again
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temporary left
    monkeypatch.setattr(native, "_cpu_identity", lambda: "another CPU")
    assert native.library_path(compiler, native._FLAG_SETS[-1]) != first
