"""csan.models.ops.dropout: the byte dropout, eager and compiled, draws the same masks."""

from __future__ import annotations

import pytest
import torch

from csan.models.ops import _draw_bytes, dropout, fill_random_bytes_
from csan.models.transformer import FeedForward

P = 0.3
THRESHOLD = round(P * 256)  # 77: the drop probability is 77/256
SCALE = 256 / (256 - THRESHOLD)


def _masked(fn, x: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and input gradient of ``fn(x).sum()`` after ``torch.manual_seed(seed)``."""
    x = x.detach().clone().requires_grad_(True)
    torch.manual_seed(seed)
    y = fn(x)
    y.sum().backward()
    return y.detach(), x.grad


def _eager(x: torch.Tensor) -> torch.Tensor:
    return dropout(x, P, True)


@pytest.mark.parametrize("shape", [(300, 101), (256, 256)])  # an odd count, and a multiple of 4
def test_random_bytes_are_spread_over_all_values(shape: tuple[int, int]) -> None:
    torch.manual_seed(0)
    b = torch.zeros(shape, dtype=torch.uint8)
    fill_random_bytes_(b)
    counts = torch.bincount(b.flatten().long(), minlength=256).float()
    assert counts.min() > 0.5 * counts.mean() and counts.max() < 1.5 * counts.mean()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_drops_the_rounded_fraction_and_scales_kept_values(dtype: torch.dtype) -> None:
    x = torch.full((512, 256), 2.0, dtype=dtype)
    y, grad = _masked(_eager, x, seed=1)
    dropped = y == 0
    assert abs(float(dropped.float().mean()) - THRESHOLD / 256) < 0.01
    kept = y[~dropped].float()
    assert torch.allclose(kept, torch.full_like(kept, 2.0 * SCALE), rtol=1e-2)
    # d(sum)/dx is the mask: 0 where dropped, the scale where kept
    assert torch.equal(grad == 0, dropped)
    assert torch.allclose(grad[~dropped].float(), torch.full_like(kept, SCALE), rtol=1e-2)


def test_compiled_dropout_is_the_eager_dropout() -> None:
    """Traced, the bytes come from the csan::fill_random_bytes_ op: the same draws as eager, seed for seed."""
    x = torch.randn(64, 37, 48)
    compiled = torch.compile(_eager, backend="inductor", fullgraph=True)
    y_eager, g_eager = _masked(_eager, x, seed=3)
    y_comp, g_comp = _masked(compiled, x, seed=3)
    assert torch.allclose(y_comp, y_eager) and torch.allclose(g_comp, g_eager)
    # a second call draws new bytes; the same seed draws the same ones again
    y_next, _ = _masked(compiled, x, seed=4)
    assert not torch.equal(y_next == 0, y_comp == 0)
    assert torch.equal(_masked(compiled, x, seed=3)[0], y_comp)


def test_two_dropouts_in_one_graph_draw_different_masks() -> None:
    """The compiler must not merge two dropouts of one input into one mask (CSE would, for a functional op)."""

    def twice(x: torch.Tensor) -> torch.Tensor:
        return torch.stack([dropout(x, P, True), dropout(x, P, True)])

    x = torch.ones(128, 64)
    y, _ = _masked(torch.compile(twice, backend="inductor", fullgraph=True), x, seed=5)
    assert not torch.equal(y[0] == 0, y[1] == 0)
    assert torch.equal(y, _masked(twice, x, seed=5)[0])


def test_off_in_eval_and_at_p_zero() -> None:
    x = torch.randn(8, 8)
    assert dropout(x, P, False) is x and dropout(x, 0.0, True) is x


def test_random_bytes_fill_views_and_match_the_eager_draws() -> None:
    """Any uint8 tensor is filled (a view at an odd offset too) with the bytes eager dropout draws."""
    for out in (torch.zeros(1001, dtype=torch.uint8)[1:], torch.zeros(40, 25, dtype=torch.uint8).T):
        torch.manual_seed(7)
        fill_random_bytes_(out)
        torch.manual_seed(7)
        assert torch.equal(out, _draw_bytes(out.numel(), out.device).view(out.shape))


def test_the_compiled_feed_forward_has_the_eager_gradients() -> None:
    """Compiled, the feed-forward block's ReLU takes its derivative from its output (sign(y))."""
    torch.manual_seed(0)
    ffn = FeedForward(16, 64, activation_dropout=0.0)
    x = torch.randn(5, 7, 16)
    grads = []
    for fn in (ffn, torch.compile(ffn, backend="inductor", fullgraph=True)):
        ffn.zero_grad()
        xi = x.clone().requires_grad_(True)
        (fn(xi) ** 2).sum().backward()
        grads.append([xi.grad, *(p.grad.clone() for p in ffn.parameters())])
    for eager, compiled in zip(*grads, strict=True):
        assert torch.allclose(eager, compiled, atol=1e-5, rtol=1e-4)
