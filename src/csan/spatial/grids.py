"""Grid generators of a spatial transformer: where each output pixel reads the input.

Notation (Jaderberg et al. 2015, the lecture's "grid generator"): the output grid ``G`` holds the target
points ``(x_t, y_t)``, one per output pixel, in normalised coordinates where -1 and 1 are the centres of
the first and last pixel (x along the width, y along the height: PyTorch's ``align_corners=True``). A
transform ``T_theta`` maps each of them to a source point ``(x_s, y_s) = T_theta(x_t, y_t)`` in the same
coordinates of the input. A grid is a tensor (B, H_out, W_out, 2) holding ``(x_s, y_s)`` in its last
dimension, what :func:`csan.spatial.bilinear_sample` reads.

- :func:`base_grid`: the target points ``G`` themselves (the identity transform);
- :func:`affine_grid`: ``(x_s, y_s) = A_theta (x_t, y_t, 1)``, ``A_theta`` (B, 2, 3);
  fast path ``torch.nn.functional.affine_grid``, reference :func:`affine_grid_reference`;
- :func:`projective_grid`: ``(x', y', w') = H (x_t, y_t, 1)``, ``(x_s, y_s) = (x' / w', y' / w')``;
- :func:`tps_grid`: a thin plate spline that moves control points ``c_k`` (the "target grid", in the
  output's coordinates) onto source points ``s_k``; :func:`tps_transform` evaluates it anywhere.

A size of one pixel has its single centre at 0, as in PyTorch.

Example:
    >>> theta = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])  # the identity
    >>> torch.equal(affine_grid(theta, (3, 4)), base_grid((3, 4)).unsqueeze(0))
    True
    >>> affine_grid(theta, (3, 4))[0, :, 0]  # first column: x = -1, y from -1 to 1
    tensor([[-1., -1.],
            [-1.,  0.],
            [-1.,  1.]])
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "PROJECTIVE_EPS",
    "affine_grid",
    "affine_grid_reference",
    "base_grid",
    "check_size",
    "projective_grid",
    "tps_grid",
    "tps_transform",
]

# |w'| of a projective transform is kept at least this far from 0 (sign kept), so that a point that
# the transform sends to infinity reads far outside the image (zeros) instead of producing inf or NaN
PROJECTIVE_EPS = 1e-6


def check_size(size: Sequence[int], name: str = "size") -> tuple[int, int]:
    """``size`` as ``(H_out, W_out)``: two positive ints, else a ValueError naming the value.

    Example:
        >>> check_size([5, 7])
        (5, 7)
        >>> check_size((5, 0))
        Traceback (most recent call last):
        ...
        ValueError: size must be two positive ints (H_out, W_out), got (5, 0)
    """
    try:
        values = tuple(size)
    except TypeError:
        raise ValueError(f"{name} must be two positive ints (H_out, W_out), got {size!r}") from None
    ok = len(values) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values
    )
    if not ok:
        raise ValueError(f"{name} must be two positive ints (H_out, W_out), got {size!r}")
    return values[0], values[1]


def _check_theta(theta: Tensor, rows: int, cols: int, name: str) -> None:
    if not isinstance(theta, Tensor) or theta.dim() != 3 or tuple(theta.shape[1:]) != (rows, cols):
        shape = tuple(theta.shape) if isinstance(theta, Tensor) else type(theta).__name__
        raise ValueError(f"{name} must be (B, {rows}, {cols}), got {shape}")
    if not theta.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {theta.dtype}")


def _coords(n: int, *, dtype: torch.dtype, device: torch.device | None) -> Tensor:
    if n == 1:  # one pixel: its centre is 0 (as torch.nn.functional.affine_grid has it)
        return torch.zeros(1, dtype=dtype, device=device)
    return torch.linspace(-1.0, 1.0, n, dtype=dtype, device=device)


def base_grid(
    size: Sequence[int],
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The target points ``G`` of an output of ``size = (H_out, W_out)``: (H_out, W_out, 2), ``(x_t, y_t)``.

    Example:
        >>> base_grid((2, 3))[..., 0]  # x_t along the width
        tensor([[-1.,  0.,  1.],
                [-1.,  0.,  1.]])
    """
    height, width = check_size(size)
    device = torch.device(device) if device is not None else None
    ys = _coords(height, dtype=dtype, device=device)
    xs = _coords(width, dtype=dtype, device=device)
    y, x = torch.meshgrid(ys, xs, indexing="ij")  # (H_out, W_out) each
    return torch.stack([x, y], dim=-1)


def affine_grid(theta: Tensor, size: Sequence[int]) -> Tensor:
    """Source points of the affine transform ``theta`` (B, 2, 3) on an output of ``size = (H_out, W_out)``.

    ``(x_s, y_s) = theta @ (x_t, y_t, 1)``; returns (B, H_out, W_out, 2). Computed by
    ``torch.nn.functional.affine_grid(..., align_corners=True)``, which is this formula; the tests hold
    it to :func:`affine_grid_reference`.

    Example:
        >>> shift = torch.tensor([[[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]]])  # read half a width to the right
        >>> affine_grid(shift, (1, 3))[0, 0, :, 0]
        tensor([-0.5000,  0.5000,  1.5000])
    """
    _check_theta(theta, 2, 3, "theta")
    height, width = check_size(size)
    with warnings.catch_warnings():  # a unit size warns that it changed in torch 1.3 (to centre 0)
        warnings.filterwarnings("ignore", "Since version 1.3.0, affine_grid", UserWarning)
        return F.affine_grid(theta, [theta.shape[0], 1, height, width], align_corners=True)


def affine_grid_reference(theta: Tensor, size: Sequence[int]) -> Tensor:
    """:func:`affine_grid` written from the formula: ``G`` in homogeneous form times ``theta^T``.

    Example:
        >>> theta = torch.randn(2, 2, 3)
        >>> torch.allclose(affine_grid_reference(theta, (4, 5)), affine_grid(theta, (4, 5)), atol=1e-6)
        True
    """
    _check_theta(theta, 2, 3, "theta")
    grid = base_grid(size, dtype=theta.dtype, device=theta.device)  # (H_out, W_out, 2)
    ones = torch.ones_like(grid[..., :1])
    homogeneous = torch.cat([grid, ones], dim=-1)  # (H_out, W_out, 3): (x_t, y_t, 1)
    return torch.einsum("hwk,bjk->bhwj", homogeneous, theta)  # (B, H_out, W_out, 2)


def projective_grid(theta: Tensor, size: Sequence[int]) -> Tensor:
    """Source points of the projective transform ``theta`` (B, 3, 3) on an output of ``size``.

    ``(x', y', w') = theta @ (x_t, y_t, 1)`` and ``(x_s, y_s) = (x' / w', y' / w')``; returns
    (B, H_out, W_out, 2). **Choice:** where ``|w'| < PROJECTIVE_EPS`` (a point sent to infinity), ``w'`` is
    replaced by ``PROJECTIVE_EPS`` with its sign (``+`` at exactly 0), so the point lands far outside the
    image and reads zeros, with finite values and gradients. With the last row ``(0, 0, 1)`` this is
    :func:`affine_grid` of the first two rows.

    Example:
        >>> theta = torch.eye(3).unsqueeze(0)
        >>> torch.allclose(projective_grid(theta, (3, 3)), base_grid((3, 3)))
        True
    """
    _check_theta(theta, 3, 3, "theta")
    grid = base_grid(size, dtype=theta.dtype, device=theta.device)  # (H_out, W_out, 2)
    homogeneous = torch.cat([grid, torch.ones_like(grid[..., :1])], dim=-1)  # (H_out, W_out, 3)
    mapped = torch.einsum("hwk,bjk->bhwj", homogeneous, theta)  # (B, H_out, W_out, 3)
    w = mapped[..., 2:]
    sign = torch.where(w < 0, -1.0, 1.0).to(w.dtype)
    w = torch.where(w.abs() < PROJECTIVE_EPS, sign * PROJECTIVE_EPS, w)
    return mapped[..., :2] / w


def _tps_kernel(squared_distance: Tensor) -> Tensor:
    """The thin plate spline's radial function ``U(r) = r^2 log r^2`` of ``r^2`` (``U(0) = 0``).

    Written on ``r^2`` (no square root), so that the gradient stays finite where two points meet.
    """
    tiny = torch.finfo(squared_distance.dtype).tiny
    return squared_distance * torch.log(squared_distance.clamp_min(tiny))


def _squared_distances(a: Tensor, b: Tensor) -> Tensor:
    """``|a_i - b_j|^2`` (B, N, M) of (B, N, 2) and (B, M, 2), by differences: ``torch.cdist``'s gradient
    is not finite where two points meet (the diagonal of ``K``)."""
    return (a.unsqueeze(2) - b.unsqueeze(1)).square().sum(-1)


def _check_tps(source_points: Tensor, control_points: Tensor) -> Tensor:
    """``control_points`` as (1, K, 2) (shared by the batch) or (B, K, 2); ValueError naming shapes."""
    if (
        not isinstance(source_points, Tensor)
        or source_points.dim() != 3
        or source_points.shape[-1] != 2
    ):
        shape = tuple(source_points.shape) if isinstance(source_points, Tensor) else source_points
        raise ValueError(f"source_points must be (B, K, 2), got {shape}")
    batch, k = source_points.shape[:2]
    if isinstance(control_points, Tensor) and control_points.dim() == 2:
        control_points = control_points.unsqueeze(0)
    if (
        not isinstance(control_points, Tensor)
        or control_points.dim() != 3
        or control_points.shape[0] not in (1, batch)
        or tuple(control_points.shape[1:]) != (k, 2)
    ):
        shape = tuple(control_points.shape) if isinstance(control_points, Tensor) else None
        raise ValueError(
            f"control_points must be (K, 2) or (B, K, 2) with K={k}, B={batch} as in "
            f"source_points, got {shape}"
        )
    if k < 3:
        raise ValueError(f"a thin plate spline needs at least 3 control points, got K={k}")
    return control_points


def tps_transform(
    points: Tensor,
    source_points: Tensor,
    *,
    control_points: Tensor,
    regularization: float = 0.0,
) -> Tensor:
    """The thin plate spline ``f`` with ``f(c_k) = s_k``, evaluated at ``points``; returns (B, N, 2).

    ``f(p) = a_0 + a_x x + a_y y + sum_k w_k U(|p - c_k|)``, ``U(r) = r^2 log r^2``, with the ``w_k`` and
    ``a`` solving ``[[K + lambda I, P], [P^T, 0]] [w; a] = [s; 0]`` (Bookstein 1989), where
    ``K_ij = U(|c_i - c_j|)`` and the rows of ``P`` are ``(1, x_k, y_k)``. ``control_points`` ``c``: (K, 2)
    (shared by the batch) or (B, K, 2), at least 3 of them and not all on one line;
    ``source_points`` ``s``: (B, K, 2); ``points``: (B, N, 2), or (1, N, 2) shared by the batch;
    ``regularization`` ``lambda >= 0`` trades exact interpolation for smoothness. The solve is
    differentiable in ``s`` and in ``c``, so learned control points receive gradients. Whatever is
    shared by the batch (the control points, the points) is computed once. The system is solved in
    float64 whatever the input's dtype (in float32 the identity comes back only to ~1e-5); the
    result has the dtype of ``source_points``.

    Example:
        >>> c = base_grid((3, 3)).reshape(1, 9, 2)
        >>> s = c + 0.1 * torch.randn(1, 9, 2)
        >>> torch.allclose(tps_transform(c, s, control_points=c), s, atol=1e-4)  # f(c_k) = s_k
        True
    """
    c = _check_tps(source_points, control_points).to(source_points.dtype)  # (1 or B, K, 2)
    batch, k = source_points.shape[:2]
    if (
        not isinstance(points, Tensor)
        or points.dim() != 3
        or points.shape[-1] != 2
        or points.shape[0] not in (1, batch)
    ):
        shape = tuple(points.shape) if isinstance(points, Tensor) else type(points).__name__
        raise ValueError(f"points must be (B, N, 2) or (1, N, 2) with B={batch}, got {shape}")
    if regularization < 0:
        raise ValueError(f"regularization must be >= 0, got {regularization}")
    out_dtype, dtype, device = source_points.dtype, torch.float64, source_points.device
    c, source_points = c.to(dtype), source_points.to(dtype)  # a float32 solve is off by ~1e-5
    kernel = _tps_kernel(_squared_distances(c, c))  # (1 or B, K, K)
    kernel = kernel + regularization * torch.eye(k, dtype=dtype, device=device)
    p = torch.cat([torch.ones_like(c[..., :1]), c], dim=-1)  # (1 or B, K, 3): (1, x_k, y_k)
    zeros = torch.zeros(c.shape[0], 3, 3, dtype=dtype, device=device)
    system = torch.cat(
        [torch.cat([kernel, p], dim=2), torch.cat([p.transpose(1, 2), zeros], dim=2)], dim=1
    )  # (1 or B, K + 3, K + 3)
    rhs = torch.cat([source_points, torch.zeros(batch, 3, 2, dtype=dtype, device=device)], dim=1)
    q = points.to(dtype)
    radial = _tps_kernel(_squared_distances(q, c))  # (1 or B, N, K)
    q = q.expand(radial.shape[0], -1, -1)
    features = torch.cat([radial, torch.ones_like(q[..., :1]), q], dim=-1)  # (1 or B, N, K + 3)
    if c.shape[0] == 1 and q.shape[0] == 1:
        # all shared: one (N, K) map from the source points to the mapped points
        weights = torch.linalg.solve(system[0].T, features[0].T).T[:, :k]  # features L^-1, (N, K)
        return (weights @ source_points).to(out_dtype)  # (B, N, 2)
    coefficients = torch.linalg.solve(system, rhs)  # (B, K + 3, 2): w_1..w_K, then a_0, a_x, a_y
    return (features @ coefficients).to(out_dtype)  # (B, N, 2)


def tps_grid(
    source_points: Tensor,
    size: Sequence[int],
    *,
    control_points: Tensor,
    regularization: float = 0.0,
) -> Tensor:
    """Source points of the thin plate spline that moves ``control_points`` onto ``source_points``.

    The spline of :func:`tps_transform` evaluated at every target point of an output of
    ``size = (H_out, W_out)``; returns (B, H_out, W_out, 2). With ``source_points`` equal to
    ``control_points`` it is the identity grid.

    Example:
        >>> c = base_grid((3, 3)).reshape(9, 2)
        >>> grid = tps_grid(c.unsqueeze(0), (5, 6), control_points=c)
        >>> torch.allclose(grid[0], base_grid((5, 6)), atol=1e-5)
        True
    """
    height, width = check_size(size)
    _check_tps(source_points, control_points)
    batch = source_points.shape[0]
    grid = base_grid(size, dtype=source_points.dtype, device=source_points.device)
    points = grid.reshape(1, height * width, 2)  # (1, H_out * W_out, 2), shared by the batch
    mapped = tps_transform(
        points, source_points, control_points=control_points, regularization=regularization
    )
    return mapped.reshape(batch, height, width, 2)
