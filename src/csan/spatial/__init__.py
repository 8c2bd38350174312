"""Spatial transformers (Jaderberg et al. 2015): attention over where to look in an image.

A :class:`SpatialTransformer` regresses a transform from its input, turns it into a grid of source points
and samples the input there; it works on any (B, C, H, W) map, so it can be dropped into any network.

- :mod:`csan.spatial.grids`: the grid generators (affine, projective, thin plate spline);
- :mod:`csan.spatial.sampler`: the bilinear sampler (fast path and the lecture's reference);
- :mod:`csan.spatial.transformer`: the module;
- :mod:`csan.spatial.mnist`: the MNIST files (IDX reader, checksums, download);
- :mod:`csan.spatial.distortions`: distorted (R, RTS, P, E) and cluttered MNIST, seeded.

Example:
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(
    ...     SpatialTransformer(in_channels=1),  # looks at the digit first
    ...     nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10),
    ... )
    >>> net(torch.rand(4, 1, 28, 28)).shape
    torch.Size([4, 10])
"""

from csan.spatial.distortions import DISTORTIONS, distort
from csan.spatial.grids import (
    affine_grid,
    affine_grid_reference,
    base_grid,
    projective_grid,
    tps_grid,
    tps_transform,
)
from csan.spatial.mnist import MNIST_FILES, load_mnist, mnist_dir, read_idx
from csan.spatial.sampler import bilinear_sample, bilinear_sample_reference
from csan.spatial.transformer import TRANSFORMS, DefaultLocalization, SpatialTransformer

__all__ = [
    "DISTORTIONS",
    "MNIST_FILES",
    "TRANSFORMS",
    "DefaultLocalization",
    "SpatialTransformer",
    "affine_grid",
    "affine_grid_reference",
    "base_grid",
    "bilinear_sample",
    "bilinear_sample_reference",
    "distort",
    "load_mnist",
    "mnist_dir",
    "projective_grid",
    "read_idx",
    "tps_grid",
    "tps_transform",
]
