"""Distorted and cluttered MNIST (after Jaderberg et al. 2015, Sec. 4.1), generated from a seed.

Each kind maps 28x28 digits (N, 28, 28) uint8 to distorted images (N, S, S) uint8, the same for the same
seed on any machine (every random number is drawn up front from one CPU ``torch.Generator``; the
warps are computed with this package's own grids and sampler). The paper describes the four
distortions in words; **our parameters** (where the paper is vague these are choices, written here):

- ``"R"`` (28x28): rotated by an angle uniform in [-90, 90] degrees about the centre.
- ``"RTS"`` (42x42): rotated by [-45, 45] degrees, scaled by [0.7, 1.2], and placed at a uniform random
  offset in a 42x42 canvas such that the scaled 28x28 box stays inside it.
- ``"P"`` (28x28): projective: the image is scaled by 0.75 and each of its four corners is then moved by
  a Gaussian offset of standard deviation :data:`PROJECTIVE_SIGMA` (normalised units, 1 = 13.5 pixels);
  the homography between the moved and the original corners warps it.
- ``"E"`` (28x28): elastic: a thin plate spline whose 4x4 control points, on a regular grid over the
  image, are each moved by a uniform offset in ``[-ELASTIC_SHIFT, ELASTIC_SHIFT]`` (normalised units).
- ``"clutter"`` (60x60): the digit at a uniform random integer position in a 60x60 canvas, on top of
  :data:`CLUTTER_PIECES` random 8x8 fragments of other random digits of the same set (after DeepMind's
  ``mnist-cluttered`` generator: fragments of ``dist_w = 8``, values summed and clipped to 1).

Example:
    >>> digits = torch.zeros(3, 28, 28, dtype=torch.uint8)
    >>> digits[:, 10:18, 12:16] = 255
    >>> distort(digits, "RTS", seed=1).shape
    torch.Size([3, 42, 42])
    >>> torch.equal(distort(digits, "E", seed=7), distort(digits, "E", seed=7))
    True
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from csan.spatial.grids import affine_grid, base_grid, projective_grid, tps_grid
from csan.spatial.sampler import bilinear_sample

__all__ = [
    "CLUTTER_PIECES",
    "DISTORTIONS",
    "ELASTIC_SHIFT",
    "IMAGE_SIZES",
    "PROJECTIVE_SIGMA",
    "distort",
    "projective_from_corners",
]

DISTORTIONS = ("R", "RTS", "P", "E", "clutter")
IMAGE_SIZES = {"R": 28, "RTS": 42, "P": 28, "E": 28, "clutter": 60}  # side of the output images
PROJECTIVE_SIGMA = 0.2  # sd of the corner offsets of "P" (normalised; 0.2 = 2.7 pixels)
ELASTIC_SHIFT = 0.2  # largest control-point offset of "E" (normalised; 0.2 = 2.7 pixels)
CLUTTER_PIECES = 6  # 8x8 fragments of other digits in each cluttered image
CLUTTER_PIECE = 8
_BATCH = 2048  # images warped at a time (bounds the memory of the grids)


def _to_float(images: Tensor) -> Tensor:
    return images.to(torch.float32).unsqueeze(1) / 255  # (N, 1, 28, 28) in [0, 1]


def _to_uint8(images: Tensor) -> Tensor:
    return (images.squeeze(1) * 255).round().clamp(0, 255).to(torch.uint8)


def _rotation(angles: Tensor) -> Tensor:
    """(N, 2, 2) rotation matrices of ``angles`` in radians."""
    c, s = torch.cos(angles), torch.sin(angles)
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def _warp(images: Tensor, grids_of: object, size: int) -> Tensor:
    """Sample ``images`` (N, 28, 28) uint8 at the grids ``grids_of(lo, hi)`` returns, in batches."""
    out = []
    for lo in range(0, images.shape[0], _BATCH):
        hi = min(lo + _BATCH, images.shape[0])
        grid = grids_of(lo, hi)  # type: ignore[operator]
        out.append(_to_uint8(bilinear_sample(_to_float(images[lo:hi]), grid)))
    return torch.cat(out) if out else torch.zeros(0, size, size, dtype=torch.uint8)


def projective_from_corners(targets: Tensor, sources: Tensor) -> Tensor:
    """The homographies (N, 3, 3) that send each of 4 ``targets`` (N, 4, 2) to its ``sources`` point.

    The last entry is fixed to 1 and the other 8 solve the 8 linear equations of the 4 point pairs
    (the direct linear transform), in float64.

    Example:
        >>> corners = torch.tensor([[[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]])
        >>> torch.allclose(projective_from_corners(corners, corners), torch.eye(3).unsqueeze(0))
        True
    """
    x, y = targets[..., 0].double(), targets[..., 1].double()  # (N, 4)
    u, v = sources[..., 0].double(), sources[..., 1].double()
    one, zero = torch.ones_like(x), torch.zeros_like(x)
    rows_u = torch.stack([x, y, one, zero, zero, zero, -u * x, -u * y], -1)  # (N, 4, 8)
    rows_v = torch.stack([zero, zero, zero, x, y, one, -v * x, -v * y], -1)
    system = torch.cat([rows_u, rows_v], dim=1)  # (N, 8, 8)
    h = torch.linalg.solve(system, torch.cat([u, v], dim=1))  # (N, 8)
    return torch.cat([h, torch.ones_like(h[:, :1])], dim=1).view(-1, 3, 3).to(targets.dtype)


def _rotated(images: Tensor, g: torch.Generator) -> Tensor:
    n = images.shape[0]
    angles = (torch.rand(n, generator=g) * 2 - 1) * math.radians(90)
    theta = torch.cat([_rotation(angles), torch.zeros(n, 2, 1)], dim=2)  # (N, 2, 3)
    return _warp(images, lambda lo, hi: affine_grid(theta[lo:hi], (28, 28)), 28)


def _rts(images: Tensor, g: torch.Generator) -> Tensor:
    n, side = images.shape[0], IMAGE_SIZES["RTS"]
    angles = (torch.rand(n, generator=g) * 2 - 1) * math.radians(45)
    scales = 0.7 + 0.5 * torch.rand(n, generator=g)
    room = (side - 28 * scales) / 2  # (N,) pixels the scaled box may move either way
    shifts = (torch.rand(n, 2, generator=g) * 2 - 1) * room.unsqueeze(1)  # (N, 2) pixels
    # canvas pixel c (from the centre) reads digit pixel R (c - t) / s; in normalised units the
    # canvas has (side - 1) / 2 pixels per unit and the digit 13.5
    rot = _rotation(angles)
    half_canvas, half_digit = (side - 1) / 2, 13.5
    linear = rot * (half_canvas / (half_digit * scales)).view(n, 1, 1)
    offset = -(rot @ shifts.unsqueeze(2)) / (half_digit * scales).view(n, 1, 1)
    theta = torch.cat([linear, offset], dim=2)  # (N, 2, 3)
    return _warp(images, lambda lo, hi: affine_grid(theta[lo:hi], (side, side)), side)


def _projective(images: Tensor, g: torch.Generator) -> Tensor:
    n = images.shape[0]
    corners = torch.tensor([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]).expand(n, 4, 2)
    moved = 0.75 * corners + PROJECTIVE_SIGMA * torch.randn(n, 4, 2, generator=g)
    homography = projective_from_corners(moved, corners)  # output corner -> image corner
    return _warp(images, lambda lo, hi: projective_grid(homography[lo:hi], (28, 28)), 28)


def _elastic(images: Tensor, g: torch.Generator) -> Tensor:
    n = images.shape[0]
    control = base_grid((4, 4)).reshape(16, 2)
    sources = control + ELASTIC_SHIFT * (torch.rand(n, 16, 2, generator=g) * 2 - 1)
    return _warp(
        images, lambda lo, hi: tps_grid(sources[lo:hi], (28, 28), control_points=control), 28
    )


def _cluttered(images: Tensor, g: torch.Generator) -> Tensor:
    n, side, piece = images.shape[0], IMAGE_SIZES["clutter"], CLUTTER_PIECE
    where = torch.randint(0, side - 28 + 1, (n, 2), generator=g)
    donors = torch.randint(0, max(n, 1), (n, CLUTTER_PIECES), generator=g)
    cuts = torch.randint(0, 28 - piece + 1, (n, CLUTTER_PIECES, 2), generator=g)
    spots = torch.randint(0, side - piece + 1, (n, CLUTTER_PIECES, 2), generator=g)
    canvas = torch.zeros(n, side, side, dtype=torch.int16)
    source = images.to(torch.int16)
    for i in range(n):
        for d, (cy, cx), (py, px) in zip(donors[i].tolist(), cuts[i].tolist(), spots[i].tolist()):
            canvas[i, py : py + piece, px : px + piece] += source[
                d, cy : cy + piece, cx : cx + piece
            ]
        y, x = where[i].tolist()
        canvas[i, y : y + 28, x : x + 28] += source[i]
    return canvas.clamp(0, 255).to(torch.uint8)


_MAKERS = {"R": _rotated, "RTS": _rts, "P": _projective, "E": _elastic, "clutter": _cluttered}


def distort(images: Tensor, kind: str, *, seed: int) -> Tensor:
    """Distort 28x28 digits ``images`` (N, 28, 28) uint8 by ``kind`` (:data:`DISTORTIONS`), from ``seed``.

    Returns (N, S, S) uint8 with ``S = IMAGE_SIZES[kind]``; the same ``images`` and ``seed`` always give
    the same result. Clutter fragments are cut from ``images`` themselves.

    Example:
        >>> distort(torch.zeros(2, 28, 28, dtype=torch.uint8), "clutter", seed=0).shape
        torch.Size([2, 60, 60])
        >>> distort(torch.zeros(2, 28, 28, dtype=torch.uint8), "S", seed=0)
        Traceback (most recent call last):
        ...
        ValueError: kind must be one of R, RTS, P, E, clutter, got 'S'
    """
    if kind not in _MAKERS:
        raise ValueError(f"kind must be one of {', '.join(DISTORTIONS)}, got {kind!r}")
    if images.dim() != 3 or tuple(images.shape[1:]) != (28, 28) or images.dtype != torch.uint8:
        raise ValueError(
            f"images must be (N, 28, 28) uint8 digits, got {tuple(images.shape)} {images.dtype}"
        )
    generator = torch.Generator().manual_seed(int(seed))
    return _MAKERS[kind](images, generator)
