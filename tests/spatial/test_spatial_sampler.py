"""The bilinear sampler: the fast path (grid_sample) against the lecture's formula and its sub-gradients."""

from __future__ import annotations

import pytest
import torch

from csan.spatial import affine_grid, base_grid, bilinear_sample, bilinear_sample_reference

# float32 tolerances of the fast path against the reference (float64 is held to 1e-10)
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def random_points(
    b: int, h: int, w: int, *, dtype: torch.dtype, reach: float = 1.3
) -> torch.Tensor:
    """Source points in [-reach, reach]: inside the image, on its edge band and outside it."""
    generator = torch.Generator().manual_seed(b * 1000 + h * 10 + w)
    return (reach * (2 * torch.rand(b, h, w, 2, generator=generator) - 1)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("shape", "out"),
    [
        ((2, 3, 5, 7), (4, 6)),
        ((1, 1, 1, 4), (3, 3)),
        ((3, 2, 6, 1), (2, 5)),
        ((1, 4, 8, 8), (8, 8)),
    ],
)
def test_fast_path_equals_the_formula(dtype, shape, out):
    U = torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    points = random_points(shape[0], *out, dtype=dtype)
    fast, reference = bilinear_sample(U, points), bilinear_sample_reference(U, points)
    assert fast.shape == (shape[0], shape[1], *out)
    torch.testing.assert_close(fast, reference, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradients_of_the_fast_path_equal_the_lectures(dtype):
    """dV/dU and dV/d(x_s, y_s): grid_sample's backward against the lecture's expressions."""
    U = torch.randn(2, 3, 6, 5, dtype=dtype)
    points = random_points(2, 4, 7, dtype=dtype)
    weights = torch.randn(2, 3, 4, 7, dtype=dtype)  # a loss that weighs every output differently
    grads = []
    for sample in (bilinear_sample, bilinear_sample_reference):
        u, p = U.clone().requires_grad_(), points.clone().requires_grad_()
        (sample(u, p) * weights).sum().backward()
        grads.append((u.grad, p.grad))
    (fast_u, fast_p), (ref_u, ref_p) = grads
    torch.testing.assert_close(fast_u, ref_u, atol=TOL[dtype], rtol=TOL[dtype])
    torch.testing.assert_close(fast_p, ref_p, atol=10 * TOL[dtype], rtol=10 * TOL[dtype])
    assert fast_p.abs().sum() > 0  # the points do receive a gradient


def test_the_lectures_gradients_pass_gradcheck():
    """The reference's hand-written backward (the lecture's sub-gradients) against finite differences."""
    U = torch.randn(1, 2, 4, 5, dtype=torch.float64, requires_grad=True)
    points = random_points(1, 3, 3, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(bilinear_sample_reference, (U, points))


def test_fast_path_passes_gradcheck():
    U = torch.randn(2, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    points = random_points(2, 3, 2, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(bilinear_sample, (U, points))


def test_identity_grid_gives_the_input_back():
    U = torch.randn(2, 3, 9, 13)
    theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(2, 2, 3)
    torch.testing.assert_close(bilinear_sample(U, affine_grid(theta, (9, 13))), U)
    points = base_grid((9, 13), dtype=torch.float64).expand(2, 9, 13, 2)
    torch.testing.assert_close(bilinear_sample_reference(U.double(), points), U.double())


def test_translation_by_one_pixel_reads_the_next_column():
    """x_s = x_t + 2 / (W - 1): output column j reads input column j + 1; the last reads outside."""
    U = torch.randn(1, 2, 4, 6)
    theta = torch.tensor([[[1.0, 0.0, 2 / 5], [0.0, 1.0, 0.0]]])
    V = bilinear_sample(U, affine_grid(theta, (4, 6)))
    torch.testing.assert_close(V[..., :-1], U[..., 1:])
    assert torch.equal(V[..., -1], torch.zeros_like(V[..., -1]))


def test_rotation_by_90_degrees_moves_pixels_where_the_formula_says():
    """theta = [[0, -1, 0], [1, 0, 0]]: (x_s, y_s) = (-y_t, x_t), so V[i, j] = U[j, W - 1 - i]."""
    n = 5
    U = torch.randn(1, 1, n, n)
    theta = torch.tensor([[[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]]])
    V = bilinear_sample(U, affine_grid(theta, (n, n)))
    expected = torch.tensor([[U[0, 0, j, n - 1 - i].item() for j in range(n)] for i in range(n)])
    torch.testing.assert_close(V[0, 0], expected)
    torch.testing.assert_close(V, torch.rot90(U, k=1, dims=(2, 3)))


def test_points_outside_the_image_read_zeros():
    U = torch.rand(1, 1, 5, 5) + 1  # every pixel at least 1
    step = 2 / 4  # one pixel in normalised units
    outside = torch.tensor([[[[1 + step, 0.0], [0.0, -1 - step], [3.0, 3.0], [-1.01 - step, 0.0]]]])
    assert torch.equal(bilinear_sample(U, outside), torch.zeros(1, 1, 1, 4))
    half_out = torch.tensor([[[[1 + step / 2, -1.0]]]])  # half a pixel beyond the top-right centre
    torch.testing.assert_close(bilinear_sample(U, half_out)[0, 0, 0, 0], U[0, 0, 0, 4] / 2)
    torch.testing.assert_close(bilinear_sample_reference(U, half_out), bilinear_sample(U, half_out))


@pytest.mark.parametrize(
    ("U", "points", "message"),
    [
        (
            torch.zeros(2, 4, 4),
            torch.zeros(2, 4, 4, 2),
            r"U must be \(B, C, H, W\), got \(2, 4, 4\)",
        ),
        (torch.zeros(2, 1, 4, 4), torch.zeros(2, 4, 4, 3), r"got \(2, 4, 4, 3\)"),
        (torch.zeros(2, 1, 4, 4), torch.zeros(3, 4, 4, 2), r"B=2 as in U, got \(3, 4, 4, 2\)"),
        (
            torch.zeros(2, 1, 4, 4),
            torch.zeros(2, 4, 4, 2).double(),
            "torch.float32 and torch.float64",
        ),
        (
            torch.zeros(2, 0, 4, 4),
            torch.zeros(2, 4, 4, 2),
            r"must not be empty, got \(2, 0, 4, 4\)",
        ),
    ],
)
def test_bad_inputs_are_named(U, points, message):
    for sample in (bilinear_sample, bilinear_sample_reference):
        with pytest.raises(ValueError, match=message):
            sample(U, points)
