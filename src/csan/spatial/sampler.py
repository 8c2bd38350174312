"""The bilinear sampler of a spatial transformer: the output reads the input at the source points.

Notation (the lecture's, after Jaderberg et al. 2015, eq. 5): the input ``U`` is (B, C, H, W); the source
points are (B, H_out, W_out, 2) holding ``(x_s, y_s)`` in normalised coordinates, where -1 and 1 are the
centres of the first and last pixel (x along the width, y along the height; PyTorch's
``align_corners=True``). In pixel units, ``x = (x_s + 1) (W - 1) / 2`` and ``y = (y_s + 1) (H - 1) / 2``, and

    V_i^c = sum_n sum_m U_nm^c max(0, 1 - |x - m|) max(0, 1 - |y - n|)

with ``n`` over the rows and ``m`` over the columns. A point outside the image reads zeros (its pixels
beyond the edge count as 0, so a point half a pixel outside reads half the edge pixel). The
sub-gradients (the lecture's eq. 6-7):

    dV_i^c / dU_nm^c = max(0, 1 - |x - m|) max(0, 1 - |y - n|)
    dV_i^c / dx      = sum_n sum_m U_nm^c max(0, 1 - |y - n|) * (0 if |m - x| >= 1; 1 if m >= x; -1 if m < x)

and likewise for ``y``; ``dx / dx_s = (W - 1) / 2``.

- :func:`bilinear_sample`: the fast path, ``torch.nn.functional.grid_sample`` (bilinear, zeros padding,
  ``align_corners=True``), which computes exactly this;
- :func:`bilinear_sample_reference`: the formula above written out (every output reads every input
  pixel, O(H_out W_out H W)), its backward the lecture's expressions. The tests hold the fast path, its
  gradients with respect to ``U`` and to the points included, to it.

The two agree wherever the sampler is differentiable, i.e. off integer pixel coordinates. At an integer
``x`` (a kink) each picks a sub-gradient of its own: ``grid_sample`` takes the pixel cell to the right
(``U_{m+1} - U_m``), the lecture's case split gives ``U_m``.

Example:
    >>> U = torch.arange(6.0).reshape(1, 1, 2, 3)
    >>> points = torch.tensor([[[[0.0, 0.0], [-1.0, 1.0], [3.0, 0.0]]]])  # centre, bottom-left, outside
    >>> bilinear_sample(U, points)
    tensor([[[[2.5000, 3.0000, 0.0000]]]])
    >>> torch.allclose(bilinear_sample_reference(U, points), bilinear_sample(U, points))
    True
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["bilinear_sample", "bilinear_sample_reference", "check_sample_inputs"]


def check_sample_inputs(U: Tensor, points: Tensor) -> None:
    """ValueError naming the value unless ``U`` is (B, C, H, W) and ``points`` (B, H_out, W_out, 2),
    both floating point of one dtype and device.

    Example:
        >>> check_sample_inputs(torch.zeros(2, 1, 4, 4), torch.zeros(3, 4, 4, 2))
        Traceback (most recent call last):
        ...
        ValueError: points must be (B, H_out, W_out, 2) with B=2 as in U, got (3, 4, 4, 2)
    """
    if not isinstance(U, Tensor) or U.dim() != 4:
        shape = tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__
        raise ValueError(f"U must be (B, C, H, W), got {shape}")
    if min(U.shape) == 0:
        raise ValueError(f"U must not be empty, got {tuple(U.shape)}")
    if not isinstance(points, Tensor) or points.dim() != 4 or points.shape[-1] != 2:
        shape = tuple(points.shape) if isinstance(points, Tensor) else type(points).__name__
        raise ValueError(f"points must be (B, H_out, W_out, 2) holding (x_s, y_s), got {shape}")
    if points.shape[0] != U.shape[0]:
        raise ValueError(
            f"points must be (B, H_out, W_out, 2) with B={U.shape[0]} as in U, "
            f"got {tuple(points.shape)}"
        )
    if not U.is_floating_point() or points.dtype != U.dtype:
        raise ValueError(
            f"U and points must share one floating-point dtype, got {U.dtype} and {points.dtype}"
        )
    if points.device != U.device:
        raise ValueError(f"U and points must be on one device, got {U.device} and {points.device}")


def bilinear_sample(U: Tensor, points: Tensor) -> Tensor:
    """Sample ``U`` (B, C, H, W) bilinearly at ``points`` (B, H_out, W_out, 2); returns (B, C, H_out, W_out).

    ``torch.nn.functional.grid_sample`` with ``mode="bilinear"``, ``padding_mode="zeros"`` and
    ``align_corners=True``: the lecture's ``V_i^c`` (see the module docstring), zeros outside the image.

    Example:
        >>> U = torch.tensor([[[[0.0, 10.0]]]])  # one row, two pixels
        >>> bilinear_sample(U, torch.tensor([[[[-0.5, 0.0]]]]))  # a quarter of the way along
        tensor([[[[2.5000]]]])
    """
    check_sample_inputs(U, points)
    return F.grid_sample(U, points, mode="bilinear", padding_mode="zeros", align_corners=True)


def _pixel_coordinates(points: Tensor, height: int, width: int) -> tuple[Tensor, Tensor]:
    """(x, y) in pixel units, (B, H_out, W_out) each: ``x = (x_s + 1) (W - 1) / 2``."""
    x = (points[..., 0] + 1) * (width - 1) / 2
    y = (points[..., 1] + 1) * (height - 1) / 2
    return x, y


def _tent(coordinate: Tensor, size: int) -> Tensor:
    """``max(0, 1 - |coordinate - k|)`` for every pixel index ``k < size``: (..., size)."""
    k = torch.arange(size, dtype=coordinate.dtype, device=coordinate.device)
    return (1 - (coordinate.unsqueeze(-1) - k).abs()).clamp_min(0)


def _tent_slope(coordinate: Tensor, size: int) -> Tensor:
    """The lecture's ``d max(0, 1 - |x - m|) / dx``: 0 if ``|m - x| >= 1``, 1 if ``m >= x``, else -1."""
    k = torch.arange(size, dtype=coordinate.dtype, device=coordinate.device)
    offset = k - coordinate.unsqueeze(-1)  # (..., size): m - x
    slope = torch.where(offset >= 0, 1.0, -1.0).to(coordinate.dtype)
    return torch.where(offset.abs() >= 1, torch.zeros_like(slope), slope)


class _LectureSampler(torch.autograd.Function):
    """The sampler and its sub-gradients as the lecture writes them (no autograd through the formula)."""

    @staticmethod
    def forward(ctx: Any, U: Tensor, points: Tensor) -> Tensor:
        height, width = U.shape[-2:]
        x, y = _pixel_coordinates(points, height, width)
        kx = _tent(x, width)  # (B, H_out, W_out, W): max(0, 1 - |x - m|)
        ky = _tent(y, height)  # (B, H_out, W_out, H): max(0, 1 - |y - n|)
        ctx.save_for_backward(U, points)
        return torch.einsum("bcnm,bijn,bijm->bcij", U, ky, kx)  # (B, C, H_out, W_out)

    @staticmethod
    def backward(ctx: Any, grad_V: Tensor) -> tuple[Tensor, Tensor]:
        U, points = ctx.saved_tensors
        height, width = U.shape[-2:]
        x, y = _pixel_coordinates(points, height, width)
        kx, ky = _tent(x, width), _tent(y, height)
        sx, sy = _tent_slope(x, width), _tent_slope(y, height)
        grad_U = torch.einsum("bcij,bijn,bijm->bcnm", grad_V, ky, kx)
        grad_x = torch.einsum("bcij,bcnm,bijn,bijm->bij", grad_V, U, ky, sx)  # dL/dx (pixels)
        grad_y = torch.einsum("bcij,bcnm,bijn,bijm->bij", grad_V, U, sy, kx)
        grad_points = torch.stack([grad_x * (width - 1) / 2, grad_y * (height - 1) / 2], dim=-1)
        return grad_U, grad_points


def bilinear_sample_reference(U: Tensor, points: Tensor) -> Tensor:
    """The lecture's sampler, written from the formula, with the lecture's sub-gradients as backward.

    Same inputs and output as :func:`bilinear_sample`; memory O(B C H_out W_out (H + W)) and time
    O(B C H_out W_out H W): for tests, not for training.

    Example:
        >>> U = torch.randn(2, 3, 5, 4, dtype=torch.float64)
        >>> points = 1.2 * (2 * torch.rand(2, 6, 7, 2, dtype=torch.float64) - 1)
        >>> torch.allclose(bilinear_sample_reference(U, points), bilinear_sample(U, points))
        True
    """
    check_sample_inputs(U, points)
    return _LectureSampler.apply(U, points)
