"""The distorted MNIST sets of a table: the same images for every row and training seed.

The first ``train_images`` training digits and the first ``test_images`` test digits are distorted once
per process (a few seconds) from seeds derived from ``data_seed``, the distortion and the split, so that
the training and test sets never share a draw and every run of a table sees the same images.

Example:
    >>> data_seed_of(0, "RTS", "test") != data_seed_of(0, "RTS", "train")
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from csan.spatial.distortions import DISTORTIONS, IMAGE_SIZES, distort
from csan.spatial.mnist import load_mnist

__all__ = ["DistortedSet", "as_input", "data_seed_of", "load_distorted"]


@dataclass(frozen=True)
class DistortedSet:
    """One distortion's images (N, S, S) uint8 and labels (N,) int64, for training and for test.

    Example (4 training and 2 test images of side 42, the size of the RTS distortion):
        >>> images = torch.zeros(6, 42, 42, dtype=torch.uint8)
        >>> labels = torch.tensor([3, 1, 4, 1, 5, 9])
        >>> data = DistortedSet("RTS", images[:4], labels[:4], images[4:], labels[4:])
        >>> data.image_size, IMAGE_SIZES["RTS"], data.test_labels.tolist()
        (42, 42, [5, 9])
    """

    distortion: str
    train_images: Tensor
    train_labels: Tensor
    test_images: Tensor
    test_labels: Tensor

    @property
    def image_size(self) -> int:
        return int(self.train_images.shape[-1])


def data_seed_of(data_seed: int, distortion: str, split: str) -> int:
    """The seed :func:`csan.spatial.distort` gets for ``split`` of ``distortion``.

    Example:
        >>> data_seed_of(1, "RTS", "train"), data_seed_of(1, "RTS", "test")  # never the same draw
        (102, 103)
        >>> data_seed_of(2, "RTS", "train"), data_seed_of(1, "P", "train")
        (202, 104)
    """
    return data_seed * 100 + DISTORTIONS.index(distortion) * 2 + (1 if split == "test" else 0)


def load_distorted(
    distortion: str,
    *,
    train_images: int,
    test_images: int,
    data_seed: int,
    data_dir: str | Path | None = None,
) -> DistortedSet:
    """Read MNIST (checksums verified; see :func:`csan.spatial.mnist_dir`) and distort both splits.

    ``train_images=0`` gives an empty training split without reading or distorting it.

    Example (needs the MNIST files, see :func:`csan.spatial.mnist_dir`)::

        data = load_distorted("RTS", train_images=0, test_images=100, data_seed=1)
        data.test_images.shape, data.train_images.shape  # (100, 42, 42), (0, 42, 42)
    """
    sets = {}
    for split, n in (("train", train_images), ("test", test_images)):
        images, labels = load_mnist(split, data_dir=data_dir)  # type: ignore[arg-type]
        seed = data_seed_of(data_seed, distortion, split)
        if n == 0:  # a report reads the test split only
            size = IMAGE_SIZES[distortion]
            sets[split] = (torch.empty(0, size, size, dtype=torch.uint8), labels[:0].clone())
            continue
        sets[split] = (distort(images[:n].contiguous(), distortion, seed=seed), labels[:n].clone())
    return DistortedSet(distortion, *sets["train"], *sets["test"])


def as_input(images: Tensor) -> Tensor:
    """uint8 (B, S, S) -> float (B, 1, S, S) in [0, 1]: background 0, what the sampler reads outside.

    Example:
        >>> x = as_input(torch.tensor([[[0, 255], [51, 102]]], dtype=torch.uint8))
        >>> x.shape, [round(v, 2) for v in x.flatten().tolist()]
        (torch.Size([1, 1, 2, 2]), [0.0, 1.0, 0.2, 0.4])
    """
    return images.unsqueeze(1).to(torch.float32).div_(255)
