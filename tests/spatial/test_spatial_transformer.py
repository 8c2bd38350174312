"""SpatialTransformer: the identity at initialisation for any map, output sizes, gradients, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from csan.spatial import (
    TRANSFORMS,
    SpatialTransformer,
    affine_grid,
    base_grid,
    bilinear_sample,
)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("shape", [(2, 3, 17, 23), (1, 1, 1, 1), (3, 2, 5, 2), (2, 16, 14, 14)])
def test_identity_at_initialisation_for_any_map(transform, shape):
    torch.manual_seed(0)
    st = SpatialTransformer(in_channels=shape[1], transform=transform)
    U = torch.randn(*shape)
    torch.testing.assert_close(st(U), U, atol=1e-5, rtol=0)


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_output_size_resamples_the_identity_grid(transform):
    st = SpatialTransformer(in_channels=1, transform=transform, output_size=(7, 9))
    U = torch.rand(2, 1, 28, 28)
    V = st(U)
    assert V.shape == (2, 1, 7, 9)
    expected = bilinear_sample(U, base_grid((7, 9)).expand(2, 7, 9, 2))
    torch.testing.assert_close(V, expected, atol=1e-5, rtol=0)


def test_theta_starts_at_the_identity_and_each_transform_has_its_shape():
    U = torch.rand(4, 1, 12, 12)
    theta = SpatialTransformer(in_channels=1).localize(U)
    assert theta.shape == (4, 2, 3)
    torch.testing.assert_close(theta, torch.eye(2, 3).expand(4, 2, 3))
    theta = SpatialTransformer(in_channels=1, transform="projective").localize(U)
    torch.testing.assert_close(theta, torch.eye(3).expand(4, 3, 3))
    st = SpatialTransformer(in_channels=1, transform="tps", tps_grid=(3, 5))
    theta = st.localize(U)
    assert theta.shape == (4, 15, 2)
    torch.testing.assert_close(theta, st.control_points.detach().expand(4, 15, 2))


def test_a_given_localisation_network_is_used_and_checked():
    loc = nn.Sequential(nn.Flatten(), nn.Linear(36, 10), nn.Tanh())
    st = SpatialTransformer(in_channels=1, localization=loc, localization_features=10)
    assert st.localization is loc
    U = torch.rand(3, 1, 6, 6)
    torch.testing.assert_close(st(U), U, atol=1e-6, rtol=0)
    wrong = SpatialTransformer(in_channels=1, localization=loc, localization_features=11)
    with pytest.raises(ValueError, match=r"must return \(B, F\) = \(3, 11\), got \(3, 10\)"):
        wrong(U)


def test_gradients_reach_the_localisation_network_and_the_control_points():
    torch.manual_seed(0)
    st = SpatialTransformer(in_channels=1, transform="tps", tps_grid=(3, 3))
    with torch.no_grad():  # move away from the identity so that the control points matter
        st.head.bias.add_(0.1 * torch.randn_like(st.head.bias))
    U = torch.rand(2, 1, 10, 10)
    (st(U) * torch.randn(2, 1, 10, 10)).sum().backward()
    assert st.head.weight.grad.abs().sum() > 0 and st.head.bias.grad.abs().sum() > 0
    assert st.control_points.grad is not None and st.control_points.grad.abs().sum() > 0
    first_conv = st.localization.net[0]
    assert first_conv.weight.grad is None or torch.isfinite(first_conv.weight.grad).all()
    fixed = SpatialTransformer(in_channels=1, transform="tps", learn_control_points=False)
    assert "control_points" not in dict(fixed.named_parameters())
    assert "control_points" in dict(fixed.named_buffers())


def test_a_known_theta_moves_the_map_like_the_grid_says():
    st = SpatialTransformer(in_channels=2)
    shift = torch.tensor([1.0, 0.0, 2 / 7, 0.0, 1.0, 0.0])  # one pixel to the right on a width of 8
    with torch.no_grad():
        st.head.bias.copy_(shift)
    U = torch.randn(1, 2, 5, 8)
    theta = shift.view(1, 2, 3)
    torch.testing.assert_close(st(U), bilinear_sample(U, affine_grid(theta, (5, 8))))
    torch.testing.assert_close(st(U)[..., :-1], U[..., 1:], atol=1e-5, rtol=0)


def test_it_can_sit_inside_a_network_on_feature_maps():
    net = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        SpatialTransformer(in_channels=8, transform="affine", output_size=(6, 6)),
        nn.Flatten(),
        nn.Linear(8 * 36, 10),
    )
    out = net(torch.rand(5, 1, 12, 12))
    assert out.shape == (5, 10)
    out.sum().backward()
    assert all(p.grad is not None for p in net[2].head.parameters())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"in_channels": 0}, "in_channels must be a positive int, got 0"),
        ({"in_channels": 1, "transform": "similarity"}, "transform must be one of affine, projective, tps, got 'similarity'"),
        ({"in_channels": 1, "output_size": (0, 5)}, r"output_size must be two positive ints \(H_out, W_out\), got \(0, 5\)"),
        ({"in_channels": 1, "transform": "tps", "tps_grid": (1, 3)}, r"tps_grid must be at least \(2, 2\) control points, got \(1, 3\)"),
        ({"in_channels": 1, "localization": nn.Flatten()}, "localization_features .* is required"),
        ({"in_channels": 1, "localization_features": 8}, "got 8 without one"),
        ({"in_channels": 1, "localization": "conv", "localization_features": 8}, "must be an nn.Module, got str"),
    ],
)  # fmt: skip
def test_bad_options_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SpatialTransformer(**kwargs)


def test_bad_inputs_are_named():
    st = SpatialTransformer(in_channels=3)
    with pytest.raises(ValueError, match=r"expects \(B, C, H, W\), got \(3, 8, 8\)"):
        st(torch.rand(3, 8, 8))
    with pytest.raises(
        ValueError, match=r"in_channels=3\) got 1 channels \(input \(2, 1, 8, 8\)\)"
    ):
        st(torch.rand(2, 1, 8, 8))
