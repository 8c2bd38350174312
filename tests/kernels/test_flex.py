"""csan.kernels.flex: the masks on the CPU (unfused, forward only); speed and gradients on CUDA."""

from __future__ import annotations

import warnings

import pytest
import torch
from kernel_definition import definition_attention

from csan.kernels import flex
from csan.kernels.flex import flex_available, flex_local_attention

needs_flex = pytest.mark.skipif(
    flex.flex_attention is None, reason="PyTorch without flex attention"
)
needs_cuda = pytest.mark.skipif(not flex_available("cuda"), reason="needs CUDA")

OPTIONS = [
    dict(window=1),
    dict(window=5),
    dict(window=5, causal=True),
    dict(window=3, head_window=3),
    dict(window=3, head_window=3, head_boundary="clip"),
    dict(window=7, head_window=3, head_boundary="clip", causal=True),
    dict(window=41, head_window=5),
]


def _padding(batch: int, time: int) -> torch.Tensor:
    mask = torch.zeros(batch, time, dtype=torch.bool)
    mask[1, time // 2 :] = True
    mask[-1] = True  # all padding: zero rows
    return mask


@needs_flex
@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("padded", [False, True])
def test_masks_match_definition_on_cpu(options, padded):
    q, k, v = (torch.randn(3, 5, 21, 4, dtype=torch.float64) for _ in range(3))
    mask = _padding(3, 21) if padded else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        out = flex_local_attention(q, k, v, key_padding_mask=mask, **options)
    expected = definition_attention(q, k, v, key_padding_mask=mask, **options)
    torch.testing.assert_close(out, expected)


def test_not_available_on_cpu():
    assert not flex_available("cpu")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_cuda_outputs_and_gradients_match_definition(options):
    shape = (2, 5, 300, 16)
    q, k, v = (torch.randn(shape, device="cuda", requires_grad=True) for _ in range(3))
    mask = _padding(2, 300).cuda()
    out = flex_local_attention(q, k, v, key_padding_mask=mask, **options)
    ref = [x.detach().cpu().double().requires_grad_() for x in (q, k, v)]
    expected = definition_attention(*ref, key_padding_mask=mask.cpu(), **options)
    torch.testing.assert_close(out.cpu().double(), expected, atol=2e-5, rtol=2e-5)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(expected, ref, grad.cpu().double())
    for g, w, name in zip(got, want, "qkv"):
        torch.testing.assert_close(g.cpu().double(), w, atol=1e-4, rtol=1e-4, msg=f"d{name}")


def _compiled_run(q, k, v, mask, window):
    """What flex_local_attention runs on CUDA (1D, N=1), compiled for the tensors' own device (here
    the CPU)."""
    batch, heads, time, _ = q.shape
    left = right = window // 2
    block_mask = flex._block_mask(batch, time, left, right, None, mask, heads, 1, q.device)
    return flex._compiled()(q, k, v, block_mask=block_mask, scale=q.size(-1) ** -0.5)


@needs_flex
def test_compiled_kernel_takes_new_windows_and_lengths():
    # Found on an H100 (2026-11-26): with the band's bounds and T as Python ints in the mask, the
    # second window or length made them symbols and inductor failed to lower the mask ("no attribute
    # 'dtype'"); every call after the first failed. The CPU compiler fails the same way, so it runs
    # here, without padding (PyTorch's CPU flex template fails to compile padding at dynamic shapes)
    # and at T >= 128 (below one 128-block it returned wrong rows now and then, with or without this).
    for time, window in [(256, 3), (256, 5), (300, 9), (333, 1)]:
        q, k, v = (torch.randn(2, 4, time, 8) for _ in range(3))
        out = _compiled_run(q, k, v, None, window)
        expected = definition_attention(q, k, v, window=window)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.cuda
@needs_cuda
def test_cuda_kernel_takes_new_windows_lengths_and_padding():
    for time, window, head_window in [(200, 3, 1), (200, 5, 1), (333, 9, 3), (129, 1, 3)]:
        q, k, v = (torch.randn(2, 4, time, 16, dtype=torch.float64) for _ in range(3))
        mask = _padding(2, time)
        options = {"window": window, "head_window": head_window}
        cuda = [x.float().cuda() for x in (q, k, v)]
        out = flex_local_attention(*cuda, key_padding_mask=mask.cuda(), **options)
        expected = definition_attention(q, k, v, key_padding_mask=mask, **options)
        torch.testing.assert_close(out.cpu().double(), expected, atol=2e-5, rtol=2e-5)
