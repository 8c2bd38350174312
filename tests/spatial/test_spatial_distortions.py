"""Distorted and cluttered MNIST: shapes, determinism per seed, and what each warp does."""

from __future__ import annotations

import pytest
import torch

from csan.spatial import DISTORTIONS, distort
from csan.spatial.distortions import IMAGE_SIZES, projective_from_corners


@pytest.fixture(scope="module")
def digits() -> torch.Tensor:
    """Six synthetic 28x28 'digits': bars at different places (no data files needed)."""
    images = torch.zeros(6, 28, 28, dtype=torch.uint8)
    for i in range(6):
        images[i, 6 + i : 22, 10 + i : 14 + i] = 255
        images[i, 8, 6:22] = 200
    return images


@pytest.mark.parametrize("kind", DISTORTIONS)
def test_deterministic_per_seed(digits, kind):
    a = distort(digits, kind, seed=3)
    assert a.shape == (6, IMAGE_SIZES[kind], IMAGE_SIZES[kind]) and a.dtype == torch.uint8
    assert torch.equal(a, distort(digits, kind, seed=3))
    assert not torch.equal(a, distort(digits, kind, seed=4))
    assert a.float().sum() > 0


def test_each_image_is_distorted_on_its_own(digits):
    """The images of a batch do not depend on each other (except clutter, which cuts from the set)."""
    for kind in ("R", "RTS", "P", "E"):
        whole = distort(digits, kind, seed=1)
        assert not torch.equal(whole[0], whole[1])


def test_rotation_keeps_the_ink_roughly(digits):
    rotated = distort(digits, "R", seed=0).float()
    ratio = rotated.sum((1, 2)) / digits.float().sum((1, 2))
    assert ((ratio > 0.85) & (ratio < 1.15)).all(), ratio


def test_rts_scales_within_the_papers_range(digits):
    """Ink of a scaled digit grows with the scale squared: between 0.7^2 and 1.2^2 of the original."""
    placed = distort(digits, "RTS", seed=0).float()
    ratio = placed.sum((1, 2)) / digits.float().sum((1, 2))
    assert ((ratio > 0.7**2 * 0.85) & (ratio < 1.2**2 * 1.15)).all(), ratio


def test_clutter_holds_the_whole_digit(digits):
    """The digit is pasted whole (values only grow by clutter, clipped at 255) somewhere in the canvas."""
    canvas = distort(digits, "clutter", seed=0)
    for i in range(len(digits)):
        windows = canvas[i].unfold(0, 28, 1).unfold(1, 28, 1)  # (33, 33, 28, 28)
        assert (windows >= digits[i]).all(-1).all(-1).any()


def test_projective_from_corners_maps_the_corners():
    targets = torch.tensor(
        [[[-0.7, -0.8], [0.9, -0.6], [0.6, 0.7], [-0.8, 0.75]]], dtype=torch.float64
    )
    sources = torch.tensor(
        [[[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]], dtype=torch.float64
    )
    h = projective_from_corners(targets, sources)[0]
    homogeneous = torch.cat([targets[0], torch.ones(4, 1, dtype=torch.float64)], 1) @ h.T
    torch.testing.assert_close(homogeneous[:, :2] / homogeneous[:, 2:], sources[0])


def test_bad_inputs_are_named(digits):
    with pytest.raises(ValueError, match="kind must be one of R, RTS, P, E, clutter, got 'S'"):
        distort(digits, "S", seed=0)
    with pytest.raises(
        ValueError,
        match=r"images must be \(N, 28, 28\) uint8 digits, got \(6, 28, 28\) torch.float32",
    ):
        distort(digits.float(), "R", seed=0)


def test_real_digits_distort_the_same_way_every_time(mnist_dir):
    from csan.spatial import load_mnist

    images, _ = load_mnist("test", data_dir=mnist_dir)
    for kind in DISTORTIONS:
        a = distort(images[:64], kind, seed=5)
        assert torch.equal(a, distort(images[:64], kind, seed=5))
