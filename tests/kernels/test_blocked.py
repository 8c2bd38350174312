"""csan.kernels.blocked against the direct definition of SPEC.md (tests/kernels/kernel_definition.py)."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from kernel_definition import definition_attention

import csan.kernels.blocked as blocked
from csan.kernels.blocked import block_size, blocked_local_attention

LENGTHS = [1, 5, 15, 16, 17, 33, 100]  # around the block size (16 for window 11)
WINDOWS = [1, 3, 11, 41]  # 41: wider than most of the lengths
HEAD_OPTIONS = [(1, "wrap"), (3, "wrap"), (3, "clip"), (5, "wrap"), (5, "clip")]  # 5 = all heads


def _inputs(batch, heads, time, d_h, dtype):
    gen = torch.Generator().manual_seed(time * 1000 + heads)
    return [
        torch.randn(batch, heads, time, d_h, generator=gen, dtype=dtype).requires_grad_()
        for _ in range(3)
    ]


def _padding(kind: str, batch: int, time: int) -> torch.Tensor | None:
    """None, right padding of different lengths, or scattered padding (holes, an all-padding row)."""
    if kind == "none":
        return None
    mask = torch.zeros(batch, time, dtype=torch.bool)
    if kind == "right":
        for b in range(batch):
            mask[b, max(1, time - 3 * b - time // 3) :] = True
    else:
        mask[0, 1::3] = True
        mask[-1] = True  # a sentence of padding only: every row empty
    return mask


def _check(
    options,
    *,
    batch=2,
    heads=5,
    time,
    d_h=4,
    dtype=torch.float64,
    tol=1e-10,
    mask=None,
    constant_in_time=False,
):
    q, k, v = _inputs(batch, heads, time, d_h, dtype)
    out = blocked_local_attention(q, k, v, key_padding_mask=mask, **options)
    expected = definition_attention(q, k, v, key_padding_mask=mask, **options)
    where = f"time={time} mask={None if mask is None else mask.int().tolist()} {options}"
    torch.testing.assert_close(out, expected, atol=tol, rtol=tol, msg=lambda m: f"{where}: {m}")
    grad = torch.randn_like(out)
    if constant_in_time:  # one gradient row per (batch, head), expanded over time (stride 0)
        grad = grad[:, :, :1].expand_as(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(expected, (q, k, v), grad)
    for g, w, name in zip(got, want, "qkv"):
        torch.testing.assert_close(
            g, w, atol=tol, rtol=tol, msg=lambda m, n=name: f"{where} d{n}: {m}"
        )


_gradient_buffer = blocked._gradient_buffer  # the real one, before any test patches it


def _poisoned_buffer(x: torch.Tensor, *, zeroed: bool) -> torch.Tensor:
    """``blocked._gradient_buffer`` with its uninitialised buffers full of NaN (a fresh page reads as
    zeros, which would hide a row the backward adds to before anything wrote it)."""
    buffer = _gradient_buffer(x, zeroed=zeroed)
    return buffer if zeroed else buffer.fill_(float("nan"))


@pytest.fixture(params=["one-chunk", "many-chunks", "row-path"])
def lengths(request, monkeypatch):
    """The lengths to try: all with the default chunking; those of several blocks with one block per
    chunk (so the seams between chunks are exercised); and those of several blocks with the row path
    taken at every length, one block per row chunk (without padding: the row path takes no mask)."""
    if request.param == "one-chunk":
        return LENGTHS
    if request.param == "row-path":
        monkeypatch.setattr(blocked, "_ROW_MIN_TIME", 1)
        monkeypatch.setattr(blocked, "_ROW_CHUNK_ROWS", 1)
        monkeypatch.setattr(blocked, "_gradient_buffer", _poisoned_buffer)
        return [t for t in LENGTHS if t > 16] + [300]
    monkeypatch.setattr(blocked, "_CHUNK_ROWS", 1)
    return [t for t in LENGTHS if t > 16]


@pytest.mark.parametrize("causal", [False, True], ids=["symmetric", "causal"])
@pytest.mark.parametrize(("head_window", "head_boundary"), HEAD_OPTIONS)
def test_matches_definition(lengths, causal, head_window, head_boundary):
    for time, window, padding in itertools.product(lengths, WINDOWS, ["none", "right", "holes"]):
        options = dict(
            window=window, head_window=head_window, causal=causal, head_boundary=head_boundary
        )
        _check(options, time=time, mask=_padding(padding, 2, time))


@pytest.mark.parametrize("causal", [False, True], ids=["symmetric", "causal"])
@pytest.mark.parametrize(("head_window", "head_boundary"), [(1, "wrap"), (3, "wrap"), (3, "clip")])
def test_float32_to_1e5(causal, head_window, head_boundary):
    """The contract's tolerance in float32, at realistic sizes (d_h 64, several chunks)."""
    options = dict(window=11, head_window=head_window, causal=causal, head_boundary=head_boundary)
    mask = _padding("right", 2, 300)
    _check(options, batch=2, heads=8, time=300, d_h=64, dtype=torch.float32, tol=1e-5, mask=mask)


@pytest.mark.parametrize("causal", [False, True], ids=["symmetric", "causal"])
@pytest.mark.parametrize(("head_window", "head_boundary"), [(1, "wrap"), (3, "wrap"), (3, "clip")])
def test_long_inputs_take_the_row_path_and_match_the_tiles(
    monkeypatch, causal, head_window, head_boundary
):
    """At the default thresholds a long sequence takes the row path (views of q, k, v) for its inner
    blocks; as the head split gives the inputs (transposed views) and with the expanded gradient of
    ``.sum()``, it returns what the tiles alone return."""
    taken = []
    forward = blocked._Rows.forward
    monkeypatch.setattr(
        blocked._Rows, "forward", lambda self, *a, **kw: taken.append(1) or forward(self, *a, **kw)
    )
    time = blocked._ROW_MIN_TIME + 37
    x = torch.randn(
        2, time, 3 * 4 * 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5)
    )
    options = dict(window=11, head_window=head_window, causal=causal, head_boundary=head_boundary)

    def run():
        leaf = x.clone().requires_grad_()
        q, k, v = (t.view(2, time, 4, 8).transpose(1, 2) for t in leaf.chunk(3, dim=-1))
        out = blocked_local_attention(q, k, v, **options)
        out.sum().backward()
        return out, leaf.grad

    out, grad = run()
    assert taken, "the row path was not taken"
    monkeypatch.setattr(blocked, "_ROW_MIN_TIME", time + 1)
    taken.clear()
    want_out, want_grad = run()
    assert not taken
    torch.testing.assert_close(out, want_out, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(grad, want_grad, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize(
    ("head_window", "writes"), [(1, True), (3, False)], ids=["own-head", "neighbours"]
)
def test_the_row_path_writes_key_gradients_only_when_each_head_reads_itself(
    monkeypatch, head_window, writes
):
    """With N = 1 the row path writes its key and value gradients into uninitialised buffers (each
    key row's first part is written once); with N > 1 several heads add into one head's rows, so
    they start from zeros. NaN-filled buffers show that every row is written or zeroed first."""
    monkeypatch.setattr(blocked, "_ROW_MIN_TIME", 1)
    # two blocks a row chunk: the second part of a chunk's last block reaches into the next chunk
    monkeypatch.setattr(blocked, "_ROW_CHUNK_ROWS", 32)
    calls = []

    def buffer(x: torch.Tensor, *, zeroed: bool) -> torch.Tensor:
        calls.append(zeroed)
        return _poisoned_buffer(x, zeroed=zeroed)

    monkeypatch.setattr(blocked, "_gradient_buffer", buffer)
    for causal in (False, True):
        _check(dict(window=11, head_window=head_window, causal=causal), time=173)
    assert calls == [not writes] * 4  # dk and dv, twice


@pytest.mark.parametrize("head_window", [1, 3])
def test_the_row_path_reads_a_gradient_constant_in_time_once_per_row(monkeypatch, head_window):
    """An output gradient with stride 0 in time but not over heads and features (one row per
    (batch, head), as ``out.mean(2)`` gives) is read as one dense block, broadcast over the blocks."""
    monkeypatch.setattr(blocked, "_ROW_MIN_TIME", 1)
    monkeypatch.setattr(blocked, "_ROW_CHUNK_ROWS", 32)
    for causal in (False, True):
        options = dict(window=11, head_window=head_window, causal=causal)
        _check(options, time=173, constant_in_time=True)


def test_fully_masked_rows_are_zero_with_finite_gradients():
    q, k, v = _inputs(2, 4, 40, 8, torch.float32)
    mask = torch.ones(2, 40, dtype=torch.bool)
    mask[1, :2] = False  # sentence 1: queries from position 2 + m on see no real key
    out = blocked_local_attention(q, k, v, window=5, head_window=3, key_padding_mask=mask)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.equal(out[1, :, 4:], torch.zeros_like(out[1, :, 4:]))
    assert out[1, :, :4].abs().sum() > 0
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


@pytest.mark.parametrize("causal", [False, True])
def test_window_wider_than_sentence_is_vanilla(causal):
    q, k, v = _inputs(2, 3, 20, 8, torch.float64)
    out = blocked_local_attention(q, k, v, window=41, causal=causal)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(out, expected)


def test_padding_changes_nothing_for_real_tokens():
    """A sentence padded to a longer batch gives the same outputs at its real positions."""
    q, k, v = _inputs(1, 4, 30, 8, torch.float64)
    alone = blocked_local_attention(q, k, v, window=11, head_window=3)
    extra = [torch.cat([x, torch.randn(1, 4, 25, 8, dtype=x.dtype)], dim=2) for x in (q, k, v)]
    mask = torch.zeros(1, 55, dtype=torch.bool)
    mask[:, 30:] = True
    padded = blocked_local_attention(*extra, window=11, head_window=3, key_padding_mask=mask)
    torch.testing.assert_close(padded[:, :, :30], alone)


def test_causal_reads_no_future():
    q, k, v = _inputs(1, 4, 50, 8, torch.float64)
    out = blocked_local_attention(q, k, v, window=7, head_window=3, causal=True)
    k2, v2 = k.detach().clone(), v.detach().clone()
    k2[:, :, 30:] += 1.0
    v2[:, :, 30:] -= 1.0
    changed = blocked_local_attention(q, k2, v2, window=7, head_window=3, causal=True)
    torch.testing.assert_close(changed[:, :, :30], out[:, :, :30])
    assert not torch.allclose(changed[:, :, 30:], out[:, :, 30:])


def test_non_contiguous_inputs_are_read_not_modified():
    """q, k, v as the head split gives them (transposed views); the inputs are left untouched."""
    x = torch.randn(2, 70, 3 * 4 * 8, dtype=torch.float64)
    q, k, v = (t.view(2, 70, 4, 8).transpose(1, 2) for t in x.chunk(3, dim=-1))
    before = x.clone()
    out = blocked_local_attention(q, k, v, window=11, head_window=3)
    assert torch.equal(x, before)
    expected = definition_attention(q, k, v, window=11, head_window=3)
    torch.testing.assert_close(out, expected)


def test_dropout_is_reproducible_and_has_matching_gradients():
    q, k, v = _inputs(1, 3, 20, 2, torch.float64)

    def attend(q, k, v):
        torch.manual_seed(7)  # the same dropout mask at every call
        return blocked_local_attention(q, k, v, window=5, head_window=3, dropout_p=0.3)

    assert torch.equal(attend(q, k, v), attend(q, k, v))
    plain = blocked_local_attention(q, k, v, window=5, head_window=3)
    assert not torch.allclose(attend(q, k, v), plain)
    assert torch.autograd.gradcheck(attend, (q, k, v))


def test_empty_sequence():
    q, k, v = _inputs(2, 4, 0, 8, torch.float32)
    out = blocked_local_attention(q, k, v, window=3)
    assert out.shape == (2, 4, 0, 8)
    out.sum().backward()
    assert q.grad.shape == q.shape


def test_block_size_follows_the_window():
    assert block_size(4096, 11) == 16
    assert block_size(4096, 101) == 104
    assert block_size(5, 11) == 8  # never much longer than the sequence


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window": 4}, "window must be a positive odd integer, got 4"),
        ({"window": 0}, "got 0"),
        ({"window": True}, "got True"),
        ({"window": 3, "head_window": 2}, "head_window must be a positive odd integer, got 2"),
        (
            {"window": 3, "head_window": 5},
            r"head_window \(5\) must not exceed the number of heads \(4\)",
        ),
        ({"window": 3, "head_boundary": "mirror"}, "got 'mirror'"),
        ({"window": 3, "dropout_p": 1.0}, r"dropout_p must be in \[0, 1\), got 1.0"),
        (
            {"window": 3, "key_padding_mask": torch.zeros(1, 4, dtype=torch.bool)},
            r"key_padding_mask must be bool \(batch, time\) = \(1, 3\), got torch.bool \(1, 4\)",
        ),
    ],
)
def test_bad_options_raise(options, message):
    q = torch.randn(1, 4, 3, 2)
    with pytest.raises(ValueError, match=message):
        blocked_local_attention(q, q, q, **options)


def test_bad_shapes_raise():
    q = torch.randn(1, 4, 3, 2)
    with pytest.raises(
        ValueError, match="q has 3 positions and k 2: fewer queries than keys only in"
    ):
        blocked_local_attention(q, q[:, :, :2], q[:, :, :2], window=3)
