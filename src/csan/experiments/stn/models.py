"""The classifiers of the distorted-MNIST table: a CNN, an FCN, and either behind a spatial transformer.

They know nothing of training or files (STYLE 8). Inputs are (B, 1, S, S) images in [0, 1] with a black
background of 0, the value the sampler reads outside the image, so a transformer that looks past the
edge sees background.

Rows (:data:`ROWS`): ``cnn``, ``st-cnn-affine``, ``st-cnn-projective``, ``st-cnn-tps``, ``fcn``,
``st-fcn-affine`` (the issue's table), and ``cnn-st1-affine`` (beyond the lecture: the transformer after
the first convolution block instead of at the input).

Example:
    >>> import torch
    >>> model = build_model("st-cnn-tps", image_size=42)
    >>> model(torch.rand(2, 1, 42, 42)).shape
    torch.Size([2, 10])
    >>> ROWS["st-fcn-affine"].baseline
    'fcn'
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from csan.spatial import SpatialTransformer

__all__ = [
    "ROWS",
    "ConvNet",
    "FullyConnected",
    "Row",
    "STClassifier",
    "build_model",
    "count_parameters",
    "transformer_of",
]


@dataclass(frozen=True)
class Row:
    """One row of the table: the classifier, where its transformer sits, and what it is compared with.

    Example:
        >>> row = ROWS["st-cnn-tps"]
        >>> row.label, row.classifier, row.transform, row.placement, row.baseline
        ('ST-CNN TPS', 'cnn', 'tps', 'input', 'cnn')
    """

    label: str  # as printed in the table
    classifier: str  # "cnn" or "fcn"
    transform: str | None  # the spatial transformer's transform, None for none
    placement: str  # "input" or "block1" (after the CNN's first convolution block)
    baseline: str | None  # the row its paired test compares against (None: it is a baseline)


ROWS = {
    "cnn": Row("CNN", "cnn", None, "input", None),
    "st-cnn-affine": Row("ST-CNN affine", "cnn", "affine", "input", "cnn"),
    "st-cnn-projective": Row("ST-CNN projective", "cnn", "projective", "input", "cnn"),
    "st-cnn-tps": Row("ST-CNN TPS", "cnn", "tps", "input", "cnn"),
    "fcn": Row("FCN", "fcn", None, "input", None),
    "st-fcn-affine": Row("ST-FCN affine", "fcn", "affine", "input", "fcn"),
    "cnn-st1-affine": Row("CNN, ST after conv 1", "cnn", "affine", "block1", "cnn"),
}


class ConvNet(nn.Module):
    """Two blocks of (5x5 convolution, ReLU, 2x2 max pooling), a hidden layer, then the classes.

    ``st_after_block1``: a spatial transformer applied to the first block's feature maps.

    Example:
        >>> import torch
        >>> ConvNet(image_size=28)(torch.rand(3, 1, 28, 28)).shape
        torch.Size([3, 10])
    """

    def __init__(
        self,
        *,
        image_size: int,
        in_channels: int = 1,
        widths: tuple[int, int] = (16, 32),
        hidden: int = 128,
        classes: int = 10,
        st_after_block1: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if image_size < 4:
            raise ValueError(f"image_size must be at least 4 (two 2x2 poolings), got {image_size}")
        self.block1 = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 5, padding=2), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.st = st_after_block1
        self.block2 = nn.Sequential(
            nn.Conv2d(widths[0], widths[1], 5, padding=2), nn.ReLU(), nn.MaxPool2d(2)
        )
        side = image_size // 2 // 2
        self.out = nn.Sequential(
            nn.Linear(widths[1] * side * side, hidden), nn.ReLU(), nn.Linear(hidden, classes)
        )

    def forward(self, x: Tensor) -> Tensor:
        h = self.block1(x)  # (B, widths[0], S/2, S/2)
        if self.st is not None:
            h = self.st(h)
        h = self.block2(h)  # (B, widths[1], S/4, S/4)
        return self.out(h.flatten(1))


class FullyConnected(nn.Module):
    """An FCN: flatten, two hidden layers with ReLU, then the classes.

    Example:
        >>> import torch
        >>> FullyConnected(image_size=28)(torch.rand(3, 1, 28, 28)).shape
        torch.Size([3, 10])
    """

    def __init__(
        self, *, image_size: int, hidden: tuple[int, int] = (256, 256), classes: int = 10
    ) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(image_size * image_size, hidden[0]),
            nn.ReLU(),
            nn.Linear(hidden[0], hidden[1]),
            nn.ReLU(),
            nn.Linear(hidden[1], classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class STClassifier(nn.Module):
    """A spatial transformer in front of a classifier: ``classifier(st(x))``.

    Example (a new transformer starts as the identity, so the model first classifies ``x`` itself):
        >>> import torch
        >>> model = STClassifier(st=SpatialTransformer(in_channels=1),
        ...                      classifier=FullyConnected(image_size=28))
        >>> x = torch.rand(2, 1, 28, 28)
        >>> model(x).shape, torch.allclose(model(x), model.classifier(x), atol=1e-4)
        (torch.Size([2, 10]), True)
    """

    def __init__(self, *, st: SpatialTransformer, classifier: nn.Module) -> None:
        super().__init__()
        self.st = st
        self.classifier = classifier

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.st(x))


def build_model(
    row: str,
    *,
    image_size: int,
    st_output: int | None = None,
    tps_grid: int = 4,
) -> nn.Module:
    """The model of ``row`` (:data:`ROWS`) for (B, 1, image_size, image_size) inputs.

    ``st_output``: side of the input transformer's output (None: ``image_size``; smaller zooms in);
    ``tps_grid``: the TPS transformer's control points per side. Parameters are drawn from torch's
    global generator (seed it first).

    Example:
        >>> import torch
        >>> model = build_model("st-fcn-affine", image_size=28, st_output=20)
        >>> type(model).__name__, type(model.classifier).__name__
        ('STClassifier', 'FullyConnected')
        >>> model(torch.rand(2, 1, 28, 28)).shape
        torch.Size([2, 10])
    """
    if row not in ROWS:
        raise ValueError(f"unknown row {row!r}; rows: {', '.join(ROWS)}")
    spec = ROWS[row]
    if spec.placement == "block1":
        st = SpatialTransformer(in_channels=16, transform=spec.transform or "affine")
        return ConvNet(image_size=image_size, st_after_block1=st)
    side = st_output if (spec.transform and st_output) else image_size
    if spec.classifier == "cnn":
        classifier: nn.Module = ConvNet(image_size=side)
    else:
        classifier = FullyConnected(image_size=side)
    if spec.transform is None:
        return classifier
    st = SpatialTransformer(
        in_channels=1,
        transform=spec.transform,
        output_size=(side, side),
        tps_grid=(tps_grid, tps_grid),
    )
    return STClassifier(st=st, classifier=classifier)


def transformer_of(model: nn.Module) -> SpatialTransformer | None:
    """The input transformer of a model :func:`build_model` made (None when it has none there).

    Example:
        >>> type(transformer_of(build_model("st-cnn-affine", image_size=28))).__name__
        'SpatialTransformer'
        >>> transformer_of(build_model("cnn-st1-affine", image_size=28)) is None  # not at the input
        True
    """
    return model.st if isinstance(model, STClassifier) else None


def count_parameters(model: nn.Module) -> int:
    """The number of parameters (elements) of ``model``.

    Example:
        >>> count_parameters(FullyConnected(image_size=28))  # 784*256+256 + 256*256+256 + 256*10+10
        269322
    """
    return sum(p.numel() for p in model.parameters())
