"""The grid generators: affine against its formula, projective against affine, TPS invariants."""

from __future__ import annotations

import pytest
import torch

from csan.spatial import (
    affine_grid,
    affine_grid_reference,
    base_grid,
    projective_grid,
    tps_grid,
    tps_transform,
)
from csan.spatial.grids import PROJECTIVE_EPS, check_size


@pytest.mark.parametrize("size", [(5, 7), (1, 4), (6, 1), (1, 1)])
def test_affine_fast_path_equals_the_formula(size):
    theta = torch.randn(3, 2, 3, dtype=torch.float64)
    torch.testing.assert_close(affine_grid(theta, size), affine_grid_reference(theta, size))


def test_base_grid_puts_minus_one_and_one_on_the_first_and_last_pixel_centres():
    grid = base_grid((3, 5))
    assert grid.shape == (3, 5, 2)
    assert grid[0, 0].tolist() == [-1.0, -1.0] and grid[-1, -1].tolist() == [1.0, 1.0]
    assert grid[1, 2].tolist() == [0.0, 0.0]  # the centre pixel
    assert base_grid((1, 1)).tolist() == [[[0.0, 0.0]]]  # one pixel: its centre is 0


def test_projective_with_last_row_0_0_1_equals_affine():
    affine = torch.randn(4, 2, 3, dtype=torch.float64)
    last = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(4, 1, 3)
    projective = torch.cat([affine, last], dim=1)
    torch.testing.assert_close(projective_grid(projective, (6, 5)), affine_grid(affine, (6, 5)))


def test_projective_divides_by_w_and_ignores_the_matrix_scale():
    theta = torch.randn(2, 3, 3, dtype=torch.float64)
    theta[:, 2, 2] = 3.0  # keep w' away from 0 over the grid
    theta[:, 2, :2] = 0.1 * theta[:, 2, :2]
    grid = projective_grid(theta, (4, 4))
    torch.testing.assert_close(projective_grid(5 * theta, (4, 4)), grid)
    g = base_grid((4, 4), dtype=torch.float64)
    h = torch.cat([g, torch.ones_like(g[..., :1])], -1)  # (x_t, y_t, 1)
    mapped = torch.einsum("ij,hwj->hwi", theta[0], h)
    torch.testing.assert_close(grid[0], mapped[..., :2] / mapped[..., 2:])


def test_projective_point_at_infinity_stays_finite():
    theta = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]], requires_grad=True)
    grid = projective_grid(theta, (3, 3))  # w' = x_t: exactly 0 on the middle column
    assert torch.isfinite(grid).all()
    assert grid[0, 1, 1, 1].abs() == 0 and grid[0, 0, 1, 1].abs() >= 1 / PROJECTIVE_EPS / 2
    grid.sum().backward()
    assert torch.isfinite(theta.grad).all()


def test_tps_with_control_points_on_the_identity_is_the_identity_grid():
    control = base_grid((4, 4)).reshape(16, 2)
    source = control.expand(3, 16, 2)
    torch.testing.assert_close(
        tps_grid(source, (7, 9), control_points=control),
        base_grid((7, 9)).expand(3, 7, 9, 2),
        atol=1e-5,
        rtol=0,
    )


def test_tps_interpolates_the_source_points_and_reproduces_affine_maps():
    control = torch.rand(10, 2, dtype=torch.float64) * 2 - 1
    source = control + 0.2 * torch.randn(2, 10, 2, dtype=torch.float64)
    mapped = tps_transform(control.expand(2, 10, 2), source, control_points=control)
    torch.testing.assert_close(mapped, source)  # f(c_k) = s_k
    affine = torch.randn(2, 2, 3, dtype=torch.float64)
    source = control @ affine[:, :, :2].transpose(1, 2) + affine[:, :, 2].unsqueeze(1)
    grid = tps_grid(source, (5, 6), control_points=control)  # an affine map has no bending
    torch.testing.assert_close(grid, affine_grid(affine, (5, 6)))


def test_tps_shared_and_per_example_control_points_agree():
    control = base_grid((3, 3), dtype=torch.float64).reshape(9, 2)
    source = control + 0.1 * torch.randn(4, 9, 2, dtype=torch.float64)
    shared = tps_grid(source, (5, 5), control_points=control)
    per_example = tps_grid(source, (5, 5), control_points=control.expand(4, 9, 2).clone())
    torch.testing.assert_close(shared, per_example)


def test_tps_control_points_receive_gradients():
    control = base_grid((3, 3), dtype=torch.float64).reshape(9, 2).requires_grad_()
    source = (control.detach() + 0.1 * torch.randn(2, 9, 2, dtype=torch.float64)).requires_grad_()
    grid = tps_grid(source, (6, 6), control_points=control)
    (grid * torch.randn_like(grid)).sum().backward()
    assert torch.isfinite(control.grad).all() and control.grad.abs().sum() > 0
    assert torch.isfinite(source.grad).all() and source.grad.abs().sum() > 0


def test_tps_gradcheck_in_source_and_control_points():
    control = (base_grid((3, 3), dtype=torch.float64).reshape(9, 2) * 0.9).requires_grad_()
    source = (control.detach() + 0.1 * torch.randn(1, 9, 2, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda s, c: tps_grid(s, (3, 4), control_points=c), (source, control)
    )


def test_tps_regularization_smooths_instead_of_interpolating():
    control = base_grid((3, 3), dtype=torch.float64).reshape(1, 9, 2)
    source = control + 0.3 * torch.randn(1, 9, 2, dtype=torch.float64)
    exact = tps_transform(control, source, control_points=control)
    smooth = tps_transform(control, source, control_points=control, regularization=10.0)
    torch.testing.assert_close(exact, source)
    assert (smooth - source).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: affine_grid(torch.zeros(2, 3, 3), (4, 4)), r"theta must be \(B, 2, 3\), got \(2, 3, 3\)"),
        (lambda: affine_grid(torch.zeros(1, 2, 3), (4, -1)), r"size must be two positive ints .* got \(4, -1\)"),
        (lambda: affine_grid(torch.zeros(1, 2, 3), (4,)), r"got \(4,\)"),
        (lambda: projective_grid(torch.zeros(1, 2, 3), (4, 4)), r"theta must be \(B, 3, 3\), got \(1, 2, 3\)"),
        (lambda: affine_grid(torch.zeros(1, 2, 3, dtype=torch.long), (4, 4)), "floating-point tensor, got torch.int64"),
        (lambda: tps_grid(torch.zeros(1, 2, 2), (4, 4), control_points=torch.zeros(2, 2)), "at least 3 control points, got K=2"),
        (lambda: tps_grid(torch.zeros(2, 4, 2), (4, 4), control_points=torch.zeros(5, 2)), r"K=4, B=2 .* got \(1, 5, 2\)"),
        (lambda: tps_grid(torch.zeros(2, 4), (4, 4), control_points=torch.zeros(4, 2)), r"source_points must be \(B, K, 2\), got \(2, 4\)"),
        (lambda: tps_transform(torch.zeros(3, 5, 2), torch.zeros(2, 4, 2), control_points=torch.rand(4, 2)), r"points must be .* B=2, got \(3, 5, 2\)"),
    ],
)  # fmt: skip
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_check_size_rejects_bools_and_floats():
    for bad in [(True, 3), (2.0, 3), "ab", 5]:
        with pytest.raises(ValueError, match="two positive ints"):
            check_size(bad)
