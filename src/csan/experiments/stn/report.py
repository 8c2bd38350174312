"""The distorted-MNIST table: test error mean ± sd per row and distortion, and the paired test.

Significance: **an exact two-sided sign test over the test images** (the same images for every row and
seed). For each image, a row's correctness is averaged over the seeds that both it and its baseline
finished; the images where the row is more often right count as wins, those where it is less often
right as losses, ties are dropped, and ``p = min(1, 2 P[X <= min(wins, losses)])`` with
``X ~ Binomial(wins + losses, 1/2)``. With one seed this is the exact McNemar test. The baseline of an
``st-cnn-*`` row is ``cnn``, of ``st-fcn-*`` ``fcn`` (:data:`csan.experiments.stn.models.ROWS`).

Example:
    >>> sign_test(wins=9, losses=1)
    0.021484375
    >>> format_cell([1.0, 2.0, 3.0])
    '2.00 ± 1.00'
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from csan.experiments.stn.models import ROWS
from csan.textio import atomic_write_text

__all__ = [
    "PAPER",
    "collect",
    "format_cell",
    "paired_test",
    "sign_test",
    "summarize",
    "write_table",
]

# Published test errors (%): the STN paper's Table 1 (R, RTS, P, E) and the MatConvNet STN example
# on cluttered MNIST (their CNN and their affine STN)
PAPER = {
    "cnn": {"R": 1.2, "RTS": 0.8, "P": 1.5, "E": 1.4, "clutter": 14.2},
    "st-cnn-affine": {"R": 0.7, "RTS": 0.5, "P": 0.8, "E": 1.2, "clutter": 5.7},
    "st-cnn-tps": {"R": 0.7, "RTS": 0.5, "P": 0.8, "E": 1.1},
}


def sign_test(*, wins: int, losses: int) -> float:
    """Exact two-sided sign test: ``min(1, 2 P[X <= min(wins, losses)])``, ``X ~ Bin(wins + losses, 1/2)``.

    Example:
        >>> sign_test(wins=8, losses=2), sign_test(wins=0, losses=0)  # 2 * (1 + 10 + 45) / 2**10
        (0.109375, 1.0)
    """
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1))
    return min(1.0, 2 * tail / 2**n)


def read_predictions(run_dir: Path) -> torch.Tensor:
    """A run's predicted classes, one per test image: ``predictions.txt``, or ``predictions.txt.gz`` in
    a kept folder."""
    path = Path(run_dir) / "predictions.txt"
    if not path.is_file() and path.with_suffix(".txt.gz").is_file():
        text = gzip.decompress(path.with_suffix(".txt.gz").read_bytes()).decode("utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    return torch.tensor([int(v) for v in text.split()])


def paired_test(
    row_correct: Sequence[torch.Tensor], base_correct: Sequence[torch.Tensor]
) -> dict[str, Any]:
    """Sign test of a row against its baseline on per-image correctness averaged over common seeds.

    Example:
        >>> a = [torch.tensor([True, True, False])]
        >>> b = [torch.tensor([False, True, False])]
        >>> paired_test(a, b)
        {'wins': 1, 'losses': 0, 'p': 1.0}
    """
    a = torch.stack([c.float() for c in row_correct]).mean(0)
    b = torch.stack([c.float() for c in base_correct]).mean(0)
    wins, losses = int((a > b).sum()), int((a < b).sum())
    return {"wins": wins, "losses": losses, "p": sign_test(wins=wins, losses=losses)}


def collect(out_dir: Path, distortions: Sequence[str], rows: Sequence[str], seeds: Sequence[int]):
    """``{(distortion, row, seed): result dict}`` of the finished runs under ``out_dir/runs``.

    Example (seed 2 has not finished, so it is left out):
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> run = out / "runs" / "RTS" / "cnn-seed1"
        >>> run.mkdir(parents=True)
        >>> _ = (run / "result.json").write_text('{"test_error": 1.5}')
        >>> collect(out, ["RTS"], ["cnn"], [1, 2])
        {('RTS', 'cnn', 1): {'test_error': 1.5}}
    """
    found = {}
    for d in distortions:
        for r in rows:
            for s in seeds:
                path = Path(out_dir) / "runs" / d / f"{r}-seed{s}" / "result.json"
                if path.is_file():
                    found[(d, r, s)] = json.loads(path.read_text(encoding="utf-8"))
    return found


def format_cell(errors: Sequence[float]) -> str:
    """``mean ± sd`` (sample sd; the mean alone with one value; ``—`` with none).

    Example:
        >>> format_cell([1.0, 2.0, 3.0]), format_cell([1.25]), format_cell([])
        ('2.00 ± 1.00', '1.25', '—')
    """
    if not errors:
        return "—"
    mean = statistics.fmean(errors)
    if len(errors) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {statistics.stdev(errors):.2f}"


def summarize(
    out_dir: Path,
    results: dict,
    distortions: Sequence[str],
    rows: Sequence[str],
    seeds: Sequence[int],
    labels: dict[str, torch.Tensor],
) -> list[dict[str, Any]]:
    """One record per (row, distortion): errors over seeds, mean, sd, and the test against the baseline.

    Example (5 test images; the ST-CNN gets one more right than its baseline, the CNN):
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> runs = [("cnn", "3 1 4 7 0", 40.0), ("st-cnn-affine", "3 1 4 1 0", 20.0)]
        >>> for row, predicted, error in runs:
        ...     run = out / "runs" / "RTS" / f"{row}-seed1"
        ...     run.mkdir(parents=True)
        ...     _ = (run / "result.json").write_text(json.dumps({"test_error": error}))
        ...     _ = (run / "predictions.txt").write_text(predicted)
        >>> rows, labels = ["cnn", "st-cnn-affine"], {"RTS": torch.tensor([3, 1, 4, 1, 5])}
        >>> records = summarize(out, collect(out, ["RTS"], rows, [1]), ["RTS"], rows, [1], labels)
        >>> cnn = records[0]  # a baseline: no test of its own
        >>> cnn["row"], cnn["errors"], cnn["mean"], cnn["sd"], cnn["paper"], "p" in cnn
        ('cnn', [40.0], 40.0, None, 0.8, False)
        >>> {k: records[1][k] for k in ("baseline", "delta", "wins", "losses", "p")}
        {'baseline': 'cnn', 'delta': -20.0, 'wins': 1, 'losses': 0, 'p': 1.0}
    """
    out = []
    for r in rows:
        for d in distortions:
            errors = [results[(d, r, s)]["test_error"] for s in seeds if (d, r, s) in results]
            record: dict[str, Any] = {
                "row": r,
                "distortion": d,
                "errors": errors,
                "mean": statistics.fmean(errors) if errors else None,
                "sd": statistics.stdev(errors) if len(errors) > 1 else None,
                "paper": PAPER.get(r, {}).get(d),
            }
            base = ROWS[r].baseline
            common = [s for s in seeds if (d, r, s) in results and (d, base, s) in results]
            if base is not None and common and d in labels:

                def correct(row: str, seed: int, d: str = d) -> torch.Tensor:
                    run = Path(out_dir) / "runs" / d / f"{row}-seed{seed}"
                    return read_predictions(run) == labels[d]

                test = paired_test(
                    [correct(r, s) for s in common], [correct(base, s) for s in common]
                )
                base_errors = [results[(d, base, s)]["test_error"] for s in common]
                own = [results[(d, r, s)]["test_error"] for s in common]
                delta = statistics.fmean(own) - statistics.fmean(base_errors)
                record.update(baseline=base, seeds_tested=common, delta=delta, **test)
            out.append(record)
    return out


def write_table(
    out_dir: Path,
    records: list[dict[str, Any]],
    distortions: Sequence[str],
    rows: Sequence[str],
    *,
    notes: Sequence[str] = (),
) -> Path:
    """``table.md`` (errors, the paired tests, the published numbers) and ``results.csv``.

    Example (records as :func:`summarize` gives them):
        >>> import tempfile
        >>> records = [
        ...     {"row": "cnn", "distortion": "RTS", "errors": [1.2, 1.0], "mean": 1.1, "sd": 0.14},
        ...     {"row": "st-cnn-affine", "distortion": "RTS", "errors": [0.7, 0.6], "mean": 0.65,
        ...      "sd": 0.07, "delta": -0.45, "wins": 30, "losses": 9, "p": 0.001}]
        >>> out = Path(tempfile.mkdtemp())
        >>> table = write_table(out, records, ["RTS"], ["cnn", "st-cnn-affine"])
        >>> lines = table.read_text(encoding="utf-8").splitlines()
        >>> for line in lines[6:8] + [text for text in lines if " vs " in text]:
        ...     print(line)
        | CNN | 1.10 ± 0.14 |
        | ST-CNN affine | 0.65 ± 0.07 |
        | ST-CNN affine vs CNN | -0.45 (30/9, p=0.001) |
        >>> (out / "results.csv").read_text(encoding="utf-8").splitlines()[2]
        'st-cnn-affine,RTS,2,0.65,0.07,-0.45,30,9,0.001'
    """
    by = {(rec["row"], rec["distortion"]): rec for rec in records}
    head = "| model | " + " | ".join(distortions) + " |"
    rule = "|---|" + "---:|" * len(distortions)
    lines = ["# Distorted MNIST: test error (%)", "", "Mean ± sd over seeds.", "", head, rule]
    for r in rows:
        cells = [format_cell(by[(r, d)]["errors"]) for d in distortions]
        lines.append(f"| {ROWS[r].label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Against the baseline: difference in error (points), wins/losses, p",
        "",
        head,
        rule,
    ]
    for r in rows:
        if ROWS[r].baseline is None:
            continue
        cells = []
        for d in distortions:
            rec = by[(r, d)]
            if "p" not in rec:
                cells.append("—")
                continue
            cells.append(f"{rec['delta']:+.2f} ({rec['wins']}/{rec['losses']}, p={_p(rec['p'])})")
        lines.append(
            f"| {ROWS[r].label} vs {ROWS[ROWS[r].baseline].label} | " + " | ".join(cells) + " |"
        )
    published = [r for r in rows if r in PAPER]
    if published:
        lines += ["", "## Published", "", head, rule]
        for r in published:
            cells = [_num(PAPER[r].get(d)) for d in distortions]
            lines.append(f"| {ROWS[r].label} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- {n}" for n in notes]]
    path = Path(out_dir) / "table.md"
    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    f = io.StringIO(newline="")
    writer = csv.writer(f)
    writer.writerow(["row", "distortion", "seeds", "mean", "sd", "delta", "wins", "losses", "p"])
    for rec in records:
        writer.writerow(
            [rec["row"], rec["distortion"], len(rec["errors"]), rec["mean"], rec["sd"],
             rec.get("delta"), rec.get("wins"), rec.get("losses"), rec.get("p")]
        )  # fmt: skip
    atomic_write_text(Path(out_dir) / "results.csv", f.getvalue())
    return path


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"
