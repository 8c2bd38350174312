"""The experiments' figures (matplotlib, Agg backend: no display needed). Each function writes one PNG.

The functions take plain values (names, means, points), so that this module depends on nothing of
csan and the experiments that draw import it, never the other way round.

- :func:`bleu_bars`: test BLEU per variant, mean ± sd over seeds, baseline dashed (``csan compare``);
- :func:`ablation_lines`: validation BLEU over a window size, vanilla dashed (paper Fig. 2);
- :func:`ngram_gap_plot`: n-gram precision and BLEU-n gaps to the baseline (paper Fig. 3);
- :func:`convergence_plot`: validation token accuracy per epoch, 0.90 / 0.95 marked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ablation_lines",
    "bleu_bars",
    "convergence_plot",
    "ngram_gap_plot",
    "pyplot",
    "save_figure",
]


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed), imported on first use.

    Example:
        >>> plt = pyplot()
        >>> plt.get_backend().lower(), plt.__name__
        ('agg', 'matplotlib.pyplot')
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, *, dpi: int = 120) -> Path:
    """Lay out ``fig``, write it to ``path`` (its folder made), close it; return the path.

    Example:
        >>> import tempfile
        >>> fig, ax = pyplot().subplots(figsize=(2, 2))
        >>> _ = ax.plot([0, 1], [1, 0])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = save_figure(fig, Path(tmp) / "figures" / "line.png", dpi=40)
        ...     path.name, path.read_bytes()[1:4], pyplot().fignum_exists(fig.number)
        ('line.png', b'PNG', False)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def bleu_bars(
    rows: Sequence[tuple[str, float | None, float | None]], path: Path, *, title: str = ""
) -> Path:
    """Bars of mean test BLEU per ``(variant, mean, sd)`` with ± sd error bars, the first one the
    baseline (dashed); a variant whose mean is None failed and is drawn empty.

    Example (the figure is 120 dpi, 0.8 inch wide per bar and 4 inches at least):
        >>> import struct, tempfile
        >>> rows = [("vanilla", 24.6, 0.3), ("csan1d", 25.1, 0.2)]
        >>> png = bleu_bars(rows, Path(tempfile.mkdtemp()) / "bleu.png", title="test BLEU")
        >>> png.name, png.read_bytes()[1:4], struct.unpack(">II", png.read_bytes()[16:24])
        ('bleu.png', b'PNG', (480, 456))

    A failed variant's label sits at the foot of the plot, inside it, whatever the y range:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error")  # matplotlib warns when a label falls outside
        ...     png = bleu_bars([*rows, ("bogus", None, None)], png)
        >>> struct.unpack(">II", png.read_bytes()[16:24])
        (480, 456)
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(rows) + 1.5), 3.8))
    names = [name for name, _, _ in rows]
    means = [mean if mean is not None else 0.0 for _, mean, _ in rows]
    errors = [sd or 0.0 for _, _, sd in rows]
    colors = ["0.55" if i == 0 else "tab:blue" for i in range(len(rows))]
    ax.bar(range(len(rows)), means, yerr=errors, capsize=3, color=colors)
    for i, (_, mean, _) in enumerate(rows):
        if mean is None:
            # x in data, y in axes units: at the foot of the plot, whatever the y limits become
            foot = ax.get_xaxis_transform()
            ax.text(
                i, 0.02, "failed", rotation=90, ha="center", va="bottom", fontsize=8, transform=foot
            )
    if rows and rows[0][1] is not None:
        ax.axhline(rows[0][1], color="0.3", linestyle="--", linewidth=1, label=names[0])
        ax.legend(loc="lower right", fontsize=8)
        finite = [m for m, (_, mean, _) in zip(means, rows) if mean is not None]
        spread = max(finite) - min(finite) + 2 * max(errors, default=0.0)
        ax.set_ylim(max(0.0, min(finite) - max(spread, 1.0)), max(finite) + max(spread, 1.0))
    ax.set_xticks(range(len(rows)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("test BLEU (mean ± sd)")
    ax.set_title(title, fontsize=9)
    return save_figure(fig, path)


def ablation_lines(
    points: Sequence[tuple[str, float | None, float | None]],
    baseline: float | None,
    path: Path,
    *,
    xlabel: str,
    title: str = "",
) -> Path:
    """Validation BLEU (mean, sd) over labelled x values (``"1"``, ..., ``"whole"``), vanilla dashed.

    Example (a window whose mean is None is left out of the line; its label stays):
        >>> import struct, tempfile
        >>> points = [("1", 20.1, 0.2), ("3", 20.8, None), ("whole", None, None)]
        >>> png = ablation_lines(points, 20.5, Path(tempfile.mkdtemp()) / "window.png",
        ...                      xlabel="window size")
        >>> png.name, png.read_bytes()[1:4], struct.unpack(">II", png.read_bytes()[16:24])
        ('window.png', b'PNG', (600, 420))
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 3.5))
    xs = [i for i, (_, mean, _) in enumerate(points) if mean is not None]
    means = [points[i][1] for i in xs]
    errors = [points[i][2] or 0.0 for i in xs]
    ax.errorbar(xs, means, yerr=errors, marker="o", capsize=3, label="variant")
    if baseline is not None:
        ax.axhline(baseline, color="0.3", linestyle="--", linewidth=1, label="vanilla")
    ax.set_xticks(range(len(points)), [label for label, _, _ in points])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation BLEU")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def ngram_gap_plot(
    orders: Sequence[int],
    gaps: Mapping[str, Sequence[tuple[float, float]]],
    baseline: str,
    path: Path,
) -> Path:
    """Two panels over n = ``orders``: each system's ``(precision gap, BLEU-n gap)`` per order, to
    the ``baseline``.

    Example:
        >>> import struct, tempfile
        >>> gaps = {"csan1d": [(0.5, 0.2), (0.7, 0.4), (0.9, 0.5), (1.1, 0.6)]}
        >>> path = Path(tempfile.mkdtemp()) / "ngram.png"
        >>> png = ngram_gap_plot([1, 2, 3, 4], gaps, "vanilla", path)
        >>> png.name, png.read_bytes()[1:4], struct.unpack(">II", png.read_bytes()[16:24])
        ('ngram.png', b'PNG', (960, 408))
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.4))
    width = 0.8 / max(len(gaps), 1)
    for k, (name, rows) in enumerate(gaps.items()):
        offset = (k - (len(gaps) - 1) / 2) * width
        xs = [n + offset for n in orders]
        axes[0].bar(xs, [precision for precision, _ in rows], width=width, label=name)
        axes[1].bar(xs, [bleu for _, bleu in rows], width=width, label=name)
    for ax, what in zip(axes, ("n-gram precision", "BLEU with max order n")):
        ax.axhline(0.0, color="0.3", linewidth=0.8)
        ax.set_xticks(orders)
        ax.set_xlabel("n")
        ax.set_ylabel(f"Δ {what} vs {baseline}")
    axes[1].legend(fontsize=8)
    return save_figure(fig, path)


def convergence_plot(
    runs: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    path: Path,
    *,
    thresholds: Sequence[float],
) -> Path:
    """Validation token accuracy against epochs, one line per ``(run, [(epoch, accuracy), ...])``,
    thresholds dotted.

    Example:
        >>> import struct, tempfile
        >>> runs = [("vanilla", [(1.0, 0.52), (2.0, 0.71)]), ("csan1d", [(1.0, 0.55), (2.0, 0.74)])]
        >>> png = convergence_plot(runs, Path(tempfile.mkdtemp()) / "conv.png", thresholds=[0.7])
        >>> png.name, png.read_bytes()[1:4], struct.unpack(">II", png.read_bytes()[16:24])
        ('conv.png', b'PNG', (660, 432))
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, points in runs:
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=name)
    for t in thresholds:
        ax.axhline(t, color="0.5", linestyle=":", linewidth=1)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation token accuracy")
    ax.legend(fontsize=8)
    return save_figure(fig, path)
