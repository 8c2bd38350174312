"""``SpatialTransformer``: a module that learns where to look, for any (B, C, H, W) map.

The three parts of Jaderberg et al. (2015), as the lecture names them:

1. a **localisation network** regresses the transformation parameters ``theta`` from the input ``U``;
2. a **grid generator** maps each output pixel's target point to a source point (:mod:`csan.spatial.grids`);
3. a **sampler** reads ``U`` there bilinearly (:func:`csan.spatial.bilinear_sample`).

Transforms (``transform=``), with what the localisation network regresses:

- ``"affine"``: the 6 entries of ``A_theta`` (B, 2, 3);
- ``"projective"``: 8 entries of a 3x3 matrix whose last entry is fixed to 1 (the scale of a projective
  matrix is free, so fixing it removes a direction the optimiser could drift along);
- ``"tps"``: a thin plate spline: the source points ``s_k`` (B, K, 2) of K control points laid on a
  ``tps_grid`` of the output; the control points themselves (the "target grid") are a parameter and are
  learned through backprop too (``learn_control_points=False`` keeps them fixed).

The last layer of the localisation head starts with zero weights and the identity as its bias, so at
initialisation the module returns its input (resampled to ``output_size``). The default localisation
network works on any input size (adaptive pooling); a given one maps (B, C, H, W) to (B, F) features and
must say ``localization_features=F``: the module adds the zero-initialised head on top.

Example:
    >>> st = SpatialTransformer(in_channels=3)
    >>> U = torch.randn(2, 3, 17, 23)
    >>> torch.allclose(st(U), U, atol=1e-5)  # the identity at initialisation
    True
    >>> SpatialTransformer(in_channels=1, transform="tps", output_size=(8, 8))(torch.rand(4, 1, 28, 28)).shape
    torch.Size([4, 1, 8, 8])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from csan.spatial.grids import affine_grid, base_grid, check_size, projective_grid, tps_grid
from csan.spatial.sampler import bilinear_sample

__all__ = ["TRANSFORMS", "DefaultLocalization", "SpatialTransformer"]

TRANSFORMS = ("affine", "projective", "tps")


class DefaultLocalization(nn.Module):
    """The default localisation network: two convolutions and a small MLP, for any input size.

    ``conv 5x5 stride 2 (channels) -> ReLU -> adaptive max pool to 8x8 -> conv 3x3 (channels) -> ReLU ->
    adaptive average pool to 4x4 -> linear (features) -> ReLU``; returns (B, features). The stride
    halves the cost of the first layer's full-resolution pass (where does not need fine detail);
    adaptive pooling makes it accept any H, W (a map smaller than the pool size is spread out, not
    refused).

    Example:
        >>> DefaultLocalization(in_channels=2)(torch.randn(3, 2, 5, 9)).shape
        torch.Size([3, 32])
    """

    def __init__(self, *, in_channels: int, channels: int = 16, features: int = 32) -> None:
        super().__init__()
        for name, value in (
            ("in_channels", in_channels),
            ("channels", channels),
            ("features", features),
        ):
            _check_positive_int(name, value)
        self.features = features
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, channels, kernel_size=5, stride=2, padding=2),
            nn.ReLU(),
            nn.AdaptiveMaxPool2d(8),
            nn.Conv2d(channels, channels, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(channels * 16, features),
            nn.ReLU(),
        )

    def forward(self, U: Tensor) -> Tensor:
        return self.net(U)


def _check_positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


class SpatialTransformer(nn.Module):
    """Localisation network, grid generator and bilinear sampler: (B, C, H, W) -> (B, C, H_out, W_out).

    Args (keyword only):
        in_channels: C of the input maps.
        transform: ``"affine"``, ``"projective"`` or ``"tps"``.
        output_size: ``(H_out, W_out)``; None keeps the input's size. Smaller than the input
            downsamples ("attend and zoom" when the transform also scales).
        localization: a module (B, C, H, W) -> (B, F); None builds :class:`DefaultLocalization`.
        localization_features: F, required with ``localization``.
        tps_grid: ``(rows, cols)`` of the thin plate spline's control points (``transform="tps"``),
            at least 2x2.
        learn_control_points: the TPS control points (target grid) are learned (True) or fixed.

    Example:
        >>> loc = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 20), nn.ReLU())
        >>> st = SpatialTransformer(in_channels=1, localization=loc, localization_features=20)
        >>> st.localize(torch.rand(5, 1, 28, 28))[0]  # the identity theta
        tensor([[1., 0., 0.],
                [0., 1., 0.]], grad_fn=<SelectBackward0>)
    """

    def __init__(
        self,
        *,
        in_channels: int,
        transform: str = "affine",
        output_size: Sequence[int] | None = None,
        localization: nn.Module | None = None,
        localization_features: int | None = None,
        tps_grid: Sequence[int] = (4, 4),
        learn_control_points: bool = True,
    ) -> None:
        super().__init__()
        _check_positive_int("in_channels", in_channels)
        if transform not in TRANSFORMS:
            raise ValueError(f"transform must be one of {', '.join(TRANSFORMS)}, got {transform!r}")
        self.in_channels = in_channels
        self.transform = transform
        self.output_size = None if output_size is None else check_size(output_size, "output_size")
        if localization is None:
            if localization_features is not None:
                raise ValueError(
                    "localization_features is the output size of a given localization network; "
                    f"got {localization_features!r} without one"
                )
            localization = DefaultLocalization(in_channels=in_channels)
            localization_features = localization.features
        else:
            if not isinstance(localization, nn.Module):
                raise ValueError(
                    f"localization must be an nn.Module, got {type(localization).__name__}"
                )
            if localization_features is None:
                raise ValueError(
                    "localization_features (F, the size of what the given localization network "
                    "returns per example) is required with localization"
                )
            _check_positive_int("localization_features", localization_features)
        self.localization = localization
        self.localization_features = localization_features
        identity = self._identity_parameters(tps_grid, learn_control_points)
        self.head = nn.Linear(localization_features, identity.numel())
        with torch.no_grad():  # theta starts at the identity, whatever the input
            self.head.weight.zero_()
            self.head.bias.copy_(identity)

    def _identity_parameters(self, tps_size: Sequence[int], learn: bool) -> Tensor:
        """The regressed parameters of the identity transform; registers the TPS control points."""
        if self.transform == "affine":
            return torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])
        if self.transform == "projective":
            return torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
        rows, cols = check_size(tps_size, "tps_grid")
        if rows < 2 or cols < 2:
            raise ValueError(
                f"tps_grid must be at least (2, 2) control points, got {tuple(tps_size)}"
            )
        points = base_grid((rows, cols)).reshape(rows * cols, 2)  # (K, 2): (x, y) on the output
        if learn:
            self.control_points = nn.Parameter(points.clone())
        else:
            self.register_buffer("control_points", points.clone())
        return points.reshape(-1)

    def _check_input(self, U: Tensor) -> None:
        if not isinstance(U, Tensor) or U.dim() != 4:
            shape = tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__
            raise ValueError(f"SpatialTransformer expects (B, C, H, W), got {shape}")
        if U.shape[1] != self.in_channels:
            raise ValueError(
                f"SpatialTransformer(in_channels={self.in_channels}) got {U.shape[1]} channels "
                f"(input {tuple(U.shape)})"
            )

    def localize(self, U: Tensor) -> Tensor:
        """``theta`` for each map of ``U``: (B, 2, 3) affine, (B, 3, 3) projective, (B, K, 2) TPS source
        points."""
        self._check_input(U)
        features = self.localization(U)
        expected = (U.shape[0], self.localization_features)
        if not isinstance(features, Tensor) or tuple(features.shape) != expected:
            got = tuple(features.shape) if isinstance(features, Tensor) else type(features).__name__
            raise ValueError(f"the localization network must return (B, F) = {expected}, got {got}")
        params = self.head(features)
        if self.transform == "affine":
            return params.view(-1, 2, 3)
        if self.transform == "projective":
            ones = torch.ones_like(params[:, :1])
            return torch.cat([params, ones], dim=1).view(-1, 3, 3)
        return params.view(params.shape[0], -1, 2)

    def grid(self, theta: Tensor, size: Sequence[int]) -> Tensor:
        """The source points (B, H_out, W_out, 2) of ``theta`` (as :meth:`localize` returns it)."""
        if self.transform == "affine":
            return affine_grid(theta, size)
        if self.transform == "projective":
            return projective_grid(theta, size)
        return tps_grid(theta, size, control_points=self.control_points)

    def forward(self, U: Tensor) -> Tensor:
        theta = self.localize(U)
        size = self.output_size or (U.shape[2], U.shape[3])
        return bilinear_sample(U, self.grid(theta, size).to(U.dtype))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, transform={self.transform!r}, output_size={self.output_size}"
