"""The figures of ``csan stn`` (matplotlib, Agg backend): what the transformer does, and the curves.

- :func:`transforms_figure`: test inputs (top) with the outline of where the transformer samples, and
  what it made of them (bottom): the lecture's "it learns to attend and transform the input";
- :func:`curves_figure`: test error over training steps, one panel per distortion, one line per row
  (mean over seeds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from csan.experiments.plots import pyplot, save_figure
from csan.experiments.stn.data import as_input
from csan.spatial import SpatialTransformer

__all__ = ["curves_figure", "transforms_figure"]


def _outline(points: torch.Tensor, size: int) -> tuple[list[float], list[float]]:
    """The border of a grid (H_out, W_out, 2) of source points, in the input's pixel coordinates."""
    border = torch.cat(
        [points[0, :], points[:, -1], points[-1, :].flip(0), points[:, 0].flip(0), points[:1, 0]]
    )
    pixels = (border + 1) * (size - 1) / 2
    return pixels[:, 0].tolist(), pixels[:, 1].tolist()


@torch.no_grad()
def transforms_figure(
    st: SpatialTransformer, images: torch.Tensor, path: Path, *, title: str = ""
) -> Path:
    """Inputs ``images`` (N, S, S) uint8 over what ``st`` outputs for them; writes ``path`` (PNG).

    Example (three 28x28 images: one column each, 1.2 inches wide, at 110 dpi):
        >>> import struct, tempfile
        >>> images = torch.zeros(3, 28, 28, dtype=torch.uint8)
        >>> images[:, 10:18, 12:16] = 255
        >>> st = SpatialTransformer(in_channels=1)  # untrained: the identity
        >>> png = transforms_figure(st, images, Path(tempfile.mkdtemp()) / "st.png", title="RTS")
        >>> png.name, png.read_bytes()[1:4], struct.unpack(">II", png.read_bytes()[16:24])
        ('st.png', b'PNG', (440, 319))
    """
    plt = pyplot()
    st.eval()
    x = as_input(images)
    theta = st.localize(x)
    out_size = st.output_size or tuple(x.shape[-2:])
    grids = st.grid(theta, out_size)
    outputs = st(x)
    n, size = len(images), images.shape[-1]
    fig, axes = plt.subplots(2, n, figsize=(1.2 * n + 0.4, 2.9), squeeze=False)
    for i in range(n):
        axes[0, i].imshow(x[i, 0].numpy(), cmap="gray", vmin=0, vmax=1)
        xs, ys = _outline(grids[i], size)
        axes[0, i].plot(xs, ys, color="tab:orange", linewidth=1)
        axes[0, i].set_xlim(-0.5, size - 0.5)
        axes[0, i].set_ylim(size - 0.5, -0.5)
        axes[1, i].imshow(outputs[i, 0].clamp(0, 1).numpy(), cmap="gray", vmin=0, vmax=1)
        for ax in (axes[0, i], axes[1, i]):
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_ylabel("input", fontsize=8)
    axes[1, 0].set_ylabel("transformed", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, path, dpi=110)


def curves_figure(
    curves: Mapping[str, Mapping[str, Sequence[tuple[int, float]]]], path: Path
) -> Path:
    """``curves[distortion][row label]`` = [(step, test error %), ...]; one panel per distortion.

    Example (two distortions: two panels side by side):
        >>> import struct, tempfile
        >>> curves = {"RTS": {"CNN": [(50, 9.0), (100, 4.0)],
        ...                   "ST-CNN affine": [(50, 7.0), (100, 2.5)]},
        ...           "R": {"CNN": [(50, 5.0), (100, 3.0)]}}
        >>> png = curves_figure(curves, Path(tempfile.mkdtemp()) / "curves.png")
        >>> png.name, png.read_bytes()[1:4], struct.unpack(">II", png.read_bytes()[16:24])
        ('curves.png', b'PNG', (704, 330))
    """
    plt = pyplot()
    names = list(curves)
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(3.2 * max(1, len(names)), 3.0))
    axes = list(axes) if len(names) > 1 else [axes]
    for ax, d in zip(axes, names):
        for label, points in curves[d].items():
            if points:
                steps, errors = zip(*points)
                ax.plot(steps, errors, label=label, linewidth=1.2)
        ax.set_yscale("log")
        ax.set_title(d, fontsize=9)
        ax.set_xlabel("training step", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("test error (%), curve subset", fontsize=8)
    axes[-1].legend(fontsize=7)
    return save_figure(fig, path, dpi=110)
