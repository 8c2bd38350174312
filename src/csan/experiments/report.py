"""A compare table written out: ``results.csv``, ``table.md`` (with the context grid) and ``summary.json``."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from csan.experiments.grid import RunRecord
from csan.experiments.summary import BOOTSTRAP_SAMPLES, VariantSummary, _diff, _first
from csan.experiments.variants import CONTEXT_SIDES, CONTEXT_VECTORS

__all__ = [
    "CSV_COLUMNS",
    "context_grid",
    "table_rows",
    "write_results_csv",
    "write_summary",
    "write_table_md",
]


CSV_COLUMNS = [
    "variant",
    "seed",
    "status",
    "params",
    "added_params",
    "steps",
    "epochs",
    "steps_per_s",
    "steady_steps_per_s",
    "tokens_per_s",
    "train_minutes",
    "wall_minutes",
    "stop_reason",
    "bleu",
    "chrf",
    "valid_bleu",
    "valid_accuracy",
    "error",
    "run_dir",
]


def write_results_csv(path: Path, records: Sequence[RunRecord]) -> None:
    """``results.csv``: :data:`CSV_COLUMNS`, one row per run (``added_params`` against the first)."""
    base = _first(r.params for r in records if r.variant == records[0].variant) if records else None
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for r in records:
            row = asdict(r)
            row["added_params"] = _diff(r.params, base)
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS})


def _num(value: float | None, fmt: str, *, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, ("+" if signed else "") + fmt)


def _params(n: int | None) -> str:
    return "—" if n is None else f"{n / 1e6:.2f}M"


def _added(n: int | None) -> str:
    if n is None:
        return "—"
    if abs(n) < 1000:
        return f"{n:+d}"
    return f"{n / 1e3:+.1f}K" if abs(n) < 1e6 else f"{n / 1e6:+.2f}M"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def table_rows(rows: Sequence[VariantSummary]) -> list[str]:
    """The markdown lines of the table (header included)."""
    lines = [
        "| # | Model | Param. | Added | Speed (steps/s) | Speed vs. base | BLEU (mean ± sd) "
        "| Δ | p | Runs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i, row in enumerate(rows, start=1):
        bleu = _num(row.bleu_mean, ".2f")
        if row.bleu_sd is not None:
            bleu += f" ± {row.bleu_sd:.2f}"
        ok = row.runs - row.failed
        runs = f"{ok}/{row.runs}"
        if row.errors:
            runs += " — failed: " + "; ".join(_short(e).replace("|", "/") for e in row.errors)
        ratio = "—" if row.speed_ratio is None else f"{row.speed_ratio:.2f}×"
        p = "—" if row.p_value is None else f"{row.p_value:.3f}"
        lines.append(
            f"| {i} | {row.variant} | {_params(row.params)} | "
            f"{'' if i == 1 else _added(row.added_params)} | {_num(row.steps_per_s, '.3f')} | "
            f"{ratio} | {bleu} | {'' if i == 1 else _num(row.bleu_delta, '.2f', signed=True)} | "
            f"{'' if i == 1 else p} | {runs} |"
        )
    return lines


def context_grid(rows: Sequence[VariantSummary]) -> list[str]:
    """The context-aware rows (``context-<vector>-<side>``) as the AAAI paper lays them out.

    Rows: where the context is applied (encoder, decoder, both); columns: the context vectors; cells:
    BLEU mean (Δ to the baseline). No lines when the table has no context rows.

    Example:
        >>> row = VariantSummary("context-deep-enc", 1, 0, [], None, None, None, None, 27.5, None,
        ...                      0.5, None, None, [])
        >>> context_grid([row])[2]
        '| encoder | — | 27.50 (+0.50) | — | — |'
    """

    by_name = {r.variant: r for r in rows}
    if not any(f"context-{v}-{s}" in by_name for v in CONTEXT_VECTORS for s in CONTEXT_SIDES):
        return []
    lines = [
        "| Applied to | " + " | ".join(CONTEXT_VECTORS) + " |",
        "|---|" + "---:|" * len(CONTEXT_VECTORS),
    ]
    for side, where in CONTEXT_SIDES.items():
        cells = []
        for vector in CONTEXT_VECTORS:
            row = by_name.get(f"context-{vector}-{side}")
            if row is None or row.bleu_mean is None:
                cells.append("—")
            else:
                cells.append(f"{row.bleu_mean:.2f} ({_num(row.bleu_delta, '.2f', signed=True)})")
        lines.append(f"| {where} | " + " | ".join(cells) + " |")
    return lines


def write_table_md(
    path: Path,
    rows: Sequence[VariantSummary],
    *,
    title: str,
    notes: Sequence[str] = (),
) -> None:
    """``table.md``: a title, the table (and the context grid, if any), then how to read it."""
    base = rows[0].variant if rows else "-"
    grid = context_grid(rows)
    if grid:
        grid = [
            "",
            f"Test BLEU (Δ to `{base}`) by where the context is applied and its vector:",
            "",
            *grid,
        ]
    text = [
        f"# {title}",
        "",
        *table_rows(rows),
        *grid,
        "",
        f"- Baseline: `{base}` (the first variant). Added: parameters over it. Speed: training steps "
        "per second of training time after the first epoch (so without torch.compile's compilation; "
        "validation and checkpoints excluded), mean over seeds; `results.csv` also has each run's "
        "rate over its whole training time (`steps_per_s`).",
        "- BLEU: sacreBLEU on test, mean ± sample sd over the seeds that finished; Δ: mean minus the "
        "baseline's mean.",
        f"- p: paired bootstrap (Koehn 2004), {BOOTSTRAP_SAMPLES} samples, one-sided (share of samples "
        "where the variant is not better than the baseline), on the test translations of all seeds "
        "both systems finished, concatenated seed by seed.",
        *(f"- {note}" for note in notes),
        "",
    ]
    path.write_text("\n".join(text), encoding="utf-8")


def write_summary(path: Path, rows: Sequence[VariantSummary], **extra: Any) -> None:
    """``summary.json``: the table's numbers, plus ``extra`` (config, command, signature)."""
    payload = {**extra, "variants": [asdict(r) for r in rows]}
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
