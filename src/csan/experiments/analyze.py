"""``csan analyze``: the phrase analysis of the paper's Fig. 3 and the convergence table of conv-Q/K/V.

**ngram** (:func:`ngram_report`): for n = 1..4, each system's modified n-gram precision and BLEU with max
order n (:func:`csan.evaluation.analysis.ngram_analysis`) as gaps to the baseline; ``ngram.md``,
``ngram.csv``, ``ngram.png``.

**convergence** (:func:`convergence_runs`): from each run's ``metrics.jsonl``, the validation token
accuracy (teacher forcing) per epoch, and the epochs needed to reach 0.90 / 0.95: the ``epoch`` of the
first validation at or above the threshold (fractional when validating inside an epoch), or "not
reached", and the crossing interpolated linearly between the validations around it (runs validated only
once an epoch otherwise tie at whole epochs). The accuracy shown for epoch ``k`` is the last validation
with ``k - 1 < epoch <= k``.
With ``relative_to`` (``--relative-to NAME``) the thresholds are fractions of that run's best validation
accuracy (a short run on a small corpus never reaches 0.90 token accuracy in absolute terms).
``convergence.md``, ``convergence.csv``, ``convergence.png``.

Example:
    >>> report = ngram_report(["a b c d"], {"base": ["a b c d"], "sys": ["a b c d"]})
    >>> [round(g.bleu, 6) for g in report.gaps["sys"]]
    [0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from csan.errors import CsanError
from csan.evaluation.analysis import NgramRow, ngram_analysis, ngram_gaps
from csan.experiments.plots import convergence_plot, ngram_gap_plot

__all__ = [
    "THRESHOLDS",
    "ConvergenceRun",
    "NgramReport",
    "convergence_runs",
    "expand_run_dirs",
    "ngram_report",
    "write_convergence",
    "write_ngram",
]

THRESHOLDS = (0.90, 0.95)


@dataclass
class NgramReport:
    """The baseline's absolute rows, each system's absolute rows and its gaps to the baseline.

    Example:
        >>> refs = ["a dog runs in the park .", "two men are talking ."]
        >>> report = ngram_report(refs, {"vanilla": ["a dog runs in a park .", "two men talk ."],
        ...                              "csan1d": refs})
        >>> report.baseline_name, list(report.systems), [row.order for row in report.baseline]
        ('vanilla', ['csan1d'], [1, 2, 3, 4])
        >>> [round(row.precision, 2) for row in report.systems["csan1d"]]
        [100.0, 100.0, 100.0, 100.0]
    """

    baseline_name: str
    baseline: list[NgramRow]
    systems: dict[str, list[NgramRow]]
    gaps: dict[str, list[NgramRow]]


def ngram_report(
    refs: Sequence[str], hyps: Mapping[str, Sequence[str]], max_order: int = 4
) -> NgramReport:
    """Fig. 3 numbers; the first entry of ``hyps`` is the baseline, the others are compared with it.

    Example (``csan1d`` repeats the references, so its gaps are what the baseline misses):
        >>> refs = ["a dog runs in the park .", "two men are talking ."]
        >>> report = ngram_report(refs, {"vanilla": ["a dog runs in a park .", "two men talk ."],
        ...                              "csan1d": refs})
        >>> [round(row.precision, 2) for row in report.baseline]
        [81.82, 55.56, 28.57, 20.0]
        >>> [(g.order, round(g.precision, 2), round(g.bleu, 2)) for g in report.gaps["csan1d"]]
        [(1, 18.18, 25.29), (2, 44.44, 38.44), (3, 71.43, 53.76), (4, 80.0, 63.34)]
        >>> ngram_report(refs, {"vanilla": refs})
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: n-gram analysis needs a baseline and at least one system
    """
    if len(hyps) < 2:
        raise CsanError("n-gram analysis needs a baseline and at least one system")
    names = list(hyps)
    base = ngram_analysis(hyps[names[0]], refs, max_order)
    systems = {name: ngram_analysis(hyps[name], refs, max_order) for name in names[1:]}
    gaps = {name: ngram_gaps(rows, base) for name, rows in systems.items()}
    return NgramReport(names[0], base, systems, gaps)


def write_ngram(report: NgramReport, out_dir: Path) -> list[Path]:
    """Write ``ngram.md``, ``ngram.csv`` and ``ngram.png`` into ``out_dir``.

    Example:
        >>> import tempfile
        >>> refs = ["a dog runs in the park .", "two men are talking ."]
        >>> report = ngram_report(refs, {"vanilla": ["a dog runs in a park .", "two men talk ."],
        ...                              "csan1d": refs})
        >>> paths = write_ngram(report, Path(tempfile.mkdtemp()) / "analysis")
        >>> [p.name for p in paths]
        ['ngram.md', 'ngram.csv', 'ngram.png']
        >>> for line in paths[0].read_text(encoding="utf-8").splitlines()[4:8]:
        ...     print(line)
        | vanilla | precision % | 81.82 | 55.56 | 28.57 | 20.00 |
        | vanilla | BLEU-n | 74.71 | 61.56 | 46.24 | 36.66 |
        | csan1d | Δ precision | +18.18 | +44.44 | +71.43 | +80.00 |
        | csan1d | Δ BLEU-n | +25.29 | +38.44 | +53.76 | +63.34 |
        >>> paths[1].read_text(encoding="utf-8").splitlines()[0]
        'system,order,precision,bleu,precision_gap,bleu_gap'
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    orders = [r.order for r in report.baseline]
    head = " | ".join(f"n={n}" for n in orders)
    lines = [
        f"# n-gram analysis against `{report.baseline_name}` (after Yang et al. 2019, Fig. 3)",
        "",
        f"| system | measure | {head} |",
        "|---|---|" + "---:|" * len(orders),
        _md_row(report.baseline_name, "precision %", [r.precision for r in report.baseline], False),
        _md_row(report.baseline_name, "BLEU-n", [r.bleu for r in report.baseline], False),
    ]
    for name, gaps in report.gaps.items():
        lines.append(_md_row(name, "Δ precision", [g.precision for g in gaps], True))
        lines.append(_md_row(name, "Δ BLEU-n", [g.bleu for g in gaps], True))
    lines += [
        "",
        "Precision: corpus modified n-gram precision of order n (13a tokens). BLEU-n: sacreBLEU "
        "with max n-gram order n. Δ: system minus baseline.",
        "",
    ]
    (out / "ngram.md").write_text("\n".join(lines), encoding="utf-8")
    with open(out / "ngram.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["system", "order", "precision", "bleu", "precision_gap", "bleu_gap"])
        for r in report.baseline:
            writer.writerow([report.baseline_name, r.order, r.precision, r.bleu, 0.0, 0.0])
        for name, rows in report.systems.items():
            for r, g in zip(rows, report.gaps[name]):
                writer.writerow([name, r.order, r.precision, r.bleu, g.precision, g.bleu])
    gaps = {name: [(g.precision, g.bleu) for g in rows] for name, rows in report.gaps.items()}
    png = ngram_gap_plot(orders, gaps, report.baseline_name, out / "ngram.png")
    return [out / "ngram.md", out / "ngram.csv", png]


def _md_row(name: str, what: str, values: Sequence[float], signed: bool) -> str:
    fmt = "+.2f" if signed else ".2f"
    return f"| {name} | {what} | " + " | ".join(format(v, fmt) for v in values) + " |"


@dataclass
class ConvergenceRun:
    """One run's validation accuracy curve: ``points`` are (epoch, accuracy) in logged order.

    Example:
        >>> run = ConvergenceRun("vanilla", [(0.5, 0.6), (1.0, 0.8), (2.0, 0.92), (3.0, 0.95)])
        >>> run.epochs_to(0.9), round(run.interpolated_epochs_to(0.9), 2), run.epochs_to(0.99)
        (2.0, 1.83, None)
        >>> run.per_epoch()  # the last validation inside each epoch
        {1: 0.8, 2: 0.92, 3: 0.95}
    """

    name: str
    points: list[tuple[float, float]]

    def epochs_to(self, threshold: float) -> float | None:
        """The epoch of the first validation with accuracy >= ``threshold`` (None: not reached)."""
        return next((e for e, acc in self.points if acc >= threshold), None)

    def interpolated_epochs_to(self, threshold: float) -> float | None:
        """Where the curve crosses ``threshold``, linear between the two validations around it.

        Example:
            >>> ConvergenceRun("a", [(1.0, 0.2), (2.0, 0.4), (3.0, 0.6)]).interpolated_epochs_to(0.5)
            2.5
        """
        previous: tuple[float, float] | None = None
        for epoch, acc in self.points:
            if acc >= threshold:
                if previous is None:
                    return epoch
                e0, a0 = previous
                return e0 + (threshold - a0) / (acc - a0) * (epoch - e0)
            previous = (epoch, acc)
        return None

    def per_epoch(self) -> dict[int, float]:
        """Epoch ``k`` -> accuracy of the last validation with ``k - 1 < epoch <= k``."""
        out: dict[int, float] = {}
        for epoch, acc in self.points:
            out[max(1, math.ceil(epoch - 1e-9))] = acc
        return out


def expand_run_dirs(paths: Sequence[str]) -> dict[str, Path]:
    """``NAME=DIR`` or ``DIR`` items -> name: run folder; a ``csan compare`` folder gives its runs.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for run in ("vanilla-seed1", "csan1d-seed1"):
        ...     (root / "cmp" / "runs" / run).mkdir(parents=True)
        ...     (root / "cmp" / "runs" / run / "metrics.jsonl").touch()
        >>> sorted(expand_run_dirs([str(root / "cmp")]))
        ['csan1d-seed1', 'vanilla-seed1']
        >>> list(expand_run_dirs([f"base={root / 'cmp' / 'runs' / 'vanilla-seed1'}"]))
        ['base']
    """
    runs: dict[str, Path] = {}
    for item in paths:
        name, _, folder = item.rpartition("=") if "=" in item else ("", "", item)
        path = Path(folder)
        if not path.is_dir():
            raise CsanError(f"{path}: no such run folder")
        if not (path / "metrics.jsonl").is_file() and (path / "runs").is_dir():
            for sub in sorted((path / "runs").iterdir()):
                if (sub / "metrics.jsonl").is_file():
                    runs[sub.name] = sub
            continue
        runs[name or path.name] = path
    return runs


def _read_valid_accuracy(path: Path) -> list[tuple[float, float]]:
    points = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise CsanError(f"{path}:{number}: not a JSON line") from None
        if record.get("kind") == "valid" and "accuracy" in record:
            points.append((float(record["epoch"]), float(record["accuracy"])))
    return points


def convergence_runs(runs: Mapping[str, Path]) -> list[ConvergenceRun]:
    """Read the validation accuracy curve of each run folder (its ``metrics.jsonl``).

    Example:
        >>> import json, tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> lines = [{"kind": "valid", "step": 10, "epoch": 1.0, "accuracy": 0.4},
        ...          {"kind": "train", "step": 15, "epoch": 1.5, "loss": 3.0}]
        >>> _ = (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in lines))
        >>> convergence_runs({"a": run})[0].points
        [(1.0, 0.4)]
    """
    out = []
    for name, folder in runs.items():
        path = Path(folder) / "metrics.jsonl"
        if not path.is_file():
            raise CsanError(f"{path}: missing (a run folder has metrics.jsonl)")
        points = _read_valid_accuracy(path)
        if not points:
            raise CsanError(f"{path}: no validation line with an accuracy")
        out.append(ConvergenceRun(name, points))
    return out


def _epochs(value: float | None, digits: int | None = None) -> str:
    if value is None:
        return "not reached"
    return f"{value:g}" if digits is None else f"{value:.{digits}f}"


def write_convergence(
    runs: Sequence[ConvergenceRun],
    out_dir: Path,
    thresholds: Sequence[float] = THRESHOLDS,
    *,
    relative_to: str | None = None,
) -> list[Path]:
    """Write ``convergence.md`` / ``.csv`` / ``.png``: accuracy per epoch and epochs to each threshold.

    ``relative_to``: the name of a run; the thresholds are then fractions of its best accuracy.

    Example:
        >>> import tempfile
        >>> runs = [ConvergenceRun("vanilla", [(1.0, 0.8), (2.0, 0.92), (3.0, 0.95)]),
        ...         ConvergenceRun("csan1d", [(1.0, 0.85), (2.0, 0.96)])]
        >>> out = Path(tempfile.mkdtemp())
        >>> [p.name for p in write_convergence(runs, out)]
        ['convergence.md', 'convergence.csv', 'convergence.png']
        >>> for line in (out / "convergence.csv").read_text(encoding="utf-8").splitlines():
        ...     print(line)
        run,to 0.90,≈ to 0.90,to 0.95,≈ to 0.95,ep 1,ep 2,ep 3
        vanilla,2,1.83,3,3.00,0.8000,0.9200,0.9500
        csan1d,2,1.45,2,1.91,0.8500,0.9600,—
        >>> _ = write_convergence(runs, out, [0.9], relative_to="csan1d")
        >>> (out / "convergence.csv").read_text(encoding="utf-8").splitlines()[0]
        'run,to 0.90×csan1d (0.8640),≈ to 0.90×csan1d (0.8640),ep 1,ep 2,ep 3'
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [f"{t:.2f}" for t in thresholds]
    note = ""
    if relative_to is not None:
        base = next((r for r in runs if r.name == relative_to), None)
        if base is None:
            names = ", ".join(r.name for r in runs)
            raise CsanError(f"--relative-to {relative_to!r}: no such run (runs: {names})")
        best = max(acc for _, acc in base.points)
        names = [f"{t:.2f}×{relative_to} ({t * best:.4f})" for t in thresholds]
        thresholds = [t * best for t in thresholds]
        note = (
            f" Thresholds relative to the best validation accuracy of {relative_to} ({best:.4f})."
        )
    n_epochs = max((max(r.per_epoch(), default=0) for r in runs), default=0)
    epochs = list(range(1, n_epochs + 1))
    labels = [label for name in names for label in (f"to {name}", f"≈ to {name}")]
    head = ["run", *labels, *(f"ep {k}" for k in epochs)]
    lines = [
        "# Validation token accuracy per epoch (teacher forcing)",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 1),
    ]
    rows = []
    for run in runs:
        per_epoch = run.per_epoch()
        cells = [
            run.name,
            *(
                cell
                for t in thresholds
                for cell in (_epochs(run.epochs_to(t)), _epochs(run.interpolated_epochs_to(t), 2))
            ),
            *(f"{per_epoch[k]:.4f}" if k in per_epoch else "—" for k in epochs),
        ]
        rows.append(cells)
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "to t: the epoch of the first validation whose accuracy reached t; ≈ to t: where the "
        "curve crosses t, linear between the validations before and after it (an estimate "
        "between measured points). ep k: the last validation inside epoch k." + note,
        "",
    ]
    (out / "convergence.md").write_text("\n".join(lines), encoding="utf-8")
    with open(out / "convergence.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(head)
        writer.writerows(rows)
    curves = [(run.name, run.points) for run in runs]
    png = convergence_plot(curves, out / "convergence.png", thresholds=thresholds)
    return [out / "convergence.md", out / "convergence.csv", png]
