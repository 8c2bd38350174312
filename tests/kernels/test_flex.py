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
