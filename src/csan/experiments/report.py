"""A compare table written out: ``results.csv``, ``table.md`` (with the context grid) and ``summary.json``."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from csan.errors import CsanError
from csan.evaluation import describe_method
from csan.experiments.grid import RunRecord
from csan.experiments.summary import Summary, VariantSummary, _diff, _first
from csan.experiments.variants import CONTEXT_SIDES, CONTEXT_VECTORS

__all__ = [
    "CSV_COLUMNS",
    "caption",
    "context_grid",
    "machine_note",
    "mixed_precision",
    "parse_cell",
    "read_results_csv",
    "seed_rows",
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
    "signature",
    "translation",
    "run_dir",
    "machine",  # written only when some run recorded it (tables kept before stay as they were)
    "precision",  # written only when the finished runs differ in it (see :func:`mixed_precision`)
]


def write_results_csv(path: Path, records: Sequence[RunRecord]) -> None:
    """``results.csv``: :data:`CSV_COLUMNS`, one row per run (``added_params`` against the first).

    ``run_dir`` and ``translation`` (the kept test translations) are written relative to the CSV's
    folder when they lie inside it, so that the file does not depend on where the table was made.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> runs = [RunRecord("vanilla", 1, str(folder / "runs" / "vanilla-seed1"), "ok",
        ...                   params=7578624, bleu=24.6),
        ...         RunRecord("csan1d", 1, "/elsewhere/csan1d-seed1", "ok", params=7588624,
        ...                   bleu=25.1)]
        >>> write_results_csv(folder / "results.csv", runs)
        >>> header, *rows = (folder / "results.csv").read_text().splitlines()
        >>> header.split(",")[:5], header.endswith(",translation,run_dir")
        (['variant', 'seed', 'status', 'params', 'added_params'], True)
        >>> for row in rows:
        ...     cells = row.split(",")
        ...     print(cells[:5], cells[13], cells[-1])
        ['vanilla', '1', 'ok', '7578624', '0'] 24.6 runs/vanilla-seed1
        ['csan1d', '1', 'ok', '7588624', '10000'] 25.1 /elsewhere/csan1d-seed1
    """
    base = _first(r.params for r in records if r.variant == records[0].variant) if records else None
    root = Path(path).parent
    optional = {"machine": any(r.machine for r in records), "precision": mixed_precision(records)}
    columns = [c for c in CSV_COLUMNS if optional.get(c, True)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in records:
            row = asdict(r)
            row["added_params"] = _diff(r.params, base)
            row["run_dir"] = _relative(r.run_dir, root)
            row["translation"] = _relative(r.hyp_file, root)
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})


def read_results_csv(path: Path) -> list[RunRecord]:
    """The run records of a ``results.csv`` (:func:`write_results_csv` read back; writing them again
    gives the same bytes). A column the file lacks (an older table) reads as empty.

    Example:
        >>> import tempfile
        >>> csv_path = Path(tempfile.mkdtemp()) / "results.csv"
        >>> runs = [RunRecord("vanilla", 1, str(csv_path.parent / "runs" / "vanilla-seed1"), "ok",
        ...                   params=7578624, epochs=4.0, steps_per_s=0.8957729300762414, bleu=24.6),
        ...         RunRecord("csan1d", 1, "elsewhere/csan1d-seed1", "failed", error="ValueError: x")]
        >>> write_results_csv(csv_path, runs)
        >>> again = read_results_csv(csv_path)
        >>> [(r.variant, r.status, r.params, r.steps_per_s, r.error) for r in again]
        [('vanilla', 'ok', 7578624, 0.8957729300762414, ''), ('csan1d', 'failed', None, None, 'ValueError: x')]
        >>> copy = csv_path.with_name("copy.csv")
        >>> write_results_csv(copy, again)
        >>> copy.read_bytes() == csv_path.read_bytes(), again[0].run_dir == runs[0].run_dir
        (True, True)
    """
    root = Path(path).parent
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as err:
        raise CsanError(f"{path}: cannot read: {err.strerror or err}") from None
    records = []
    for line, row in enumerate(rows, start=2):
        values = {k: row.get(k) or "" for k in CSV_COLUMNS}
        try:
            kept = {k: parse_cell(k, values[k]) for k in _RECORD_COLUMNS}
        except ValueError as err:
            raise CsanError(f"{path}, line {line}: {err}") from None
        records.append(
            RunRecord(
                **kept,
                run_dir=_absolute(values["run_dir"], root),
                hyp_file=_absolute(values["translation"], root),
            )
        )
    return records


_TEXT_COLUMNS = {"variant", "status", "error", "stop_reason", "signature", "machine", "precision"}
_RECORD_COLUMNS = [c for c in CSV_COLUMNS if c not in ("added_params", "run_dir", "translation")]


def parse_cell(column: str, text: str) -> Any:
    """A CSV cell as :class:`RunRecord` holds it: text, or the int / float that ``str`` wrote.

    Example:
        >>> parse_cell("steps", "512"), parse_cell("bleu", "24.5"), parse_cell("bleu", ""), parse_cell("error", "")
        (512, 24.5, None, '')
    """
    if column in _TEXT_COLUMNS:
        return text
    if text == "":
        return None
    try:
        return int(text) if text.lstrip("-").isdigit() else float(text)
    except ValueError:
        raise ValueError(f"column {column}: {text!r} is not a number") from None


def _relative(path: str, root: Path) -> str:
    if not path:
        return ""
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return path


def _absolute(text: str, root: Path) -> str:
    return str(root / text) if text else ""


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


def table_rows(rows: Sequence[VariantSummary], seeds: Sequence[int]) -> list[str]:
    """The markdown lines of the table (header included); ``p`` lists the per-seed p-values in the
    order of ``seeds`` (``—`` for a seed without a test).

    Example:
        >>> from csan.experiments.summary import SeedTest
        >>> base = VariantSummary("vanilla", 1, 0, [], params=7_500_000, bleu_mean=24.6)
        >>> test = SeedTest(seed=1, bleu=25.1, mean=25.1, ci=0.9, delta=0.5, p_value=0.04)
        >>> new = VariantSummary("csan1d", 1, 0, [], params=7_510_000, added_params=10_000,
        ...                      bleu_mean=25.1, bleu_delta=0.5, tests=[test])
        >>> table_rows([base, new], seeds=[1])[3]
        '| 2 | csan1d | 7.51M | +10.0K | — | — | 25.10 | +0.50 | 0.040 | 1/1 |'
    """
    lines = [
        "| # | Model | Param. | Added | Speed (steps/s) | Speed vs. base | BLEU (mean ± sd) "
        "| Δ | p per seed | Runs |",
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
        lines.append(
            f"| {i} | {row.variant} | {_params(row.params)} | "
            f"{'' if i == 1 else _added(row.added_params)} | {_num(row.steps_per_s, '.3f')} | "
            f"{ratio} | {bleu} | {'' if i == 1 else _num(row.bleu_delta, '.2f', signed=True)} | "
            f"{'' if i == 1 else _p_list(row, seeds)} | {runs} |"
        )
    return lines


def _p_list(row: VariantSummary, seeds: Sequence[int]) -> str:
    """``0.001 / 0.020 / —``: the row's p per seed, in seed order; ``—`` when it has no test at all."""
    if not row.tests:
        return "—"
    p = {t.seed: t.p_value for t in row.tests}
    return " / ".join(_num(p.get(seed), ".3f") for seed in seeds)


def seed_rows(rows: Sequence[VariantSummary]) -> list[str]:
    """The per-seed table: sacreBLEU, its 95% interval, Δ and p of every tested run (header included).

    Example:
        >>> from csan.experiments.summary import SeedTest
        >>> base = VariantSummary("vanilla", 1, 0, [], tests=[SeedTest(1, 24.61, 24.6, 0.93)])
        >>> new = VariantSummary("csan1d", 1, 0, [], tests=[SeedTest(1, 25.1, 25.12, 0.9, 0.49, 0.04)])
        >>> seed_rows([base, new])[2:]
        ['| vanilla | 1 | 24.61 | 24.60 ± 0.93 |  |  |', '| csan1d | 1 | 25.10 | 25.12 ± 0.90 | +0.49 | 0.040 |']
    """
    lines = ["| Model | Seed | BLEU | 95% CI | Δ | p |", "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        for t in row.tests:
            delta = "" if t.delta is None else f"{t.delta:+.2f}"
            p = "" if t.p_value is None else f"{t.p_value:.3f}"
            lines.append(
                f"| {row.variant} | {t.seed} | {t.bleu:.2f} | {t.mean:.2f} ± {t.ci:.2f} | {delta} | {p} |"
            )
    return lines


def context_grid(rows: Sequence[VariantSummary]) -> list[str]:
    """The context-aware rows (``context-<vector>-<side>``) as the AAAI paper lays them out.

    Rows: where the context is applied (encoder, decoder, both); columns: the context vectors; cells:
    BLEU mean (Δ to the baseline). No lines when the table has no context rows.

    Example:
        >>> row = VariantSummary("context-deep-enc", runs=1, failed=0, errors=[], bleu_mean=27.5,
        ...                      bleu_delta=0.5)
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


def mixed_precision(records: Sequence[RunRecord]) -> bool:
    """Whether the finished runs trained in more than one precision (``RunRecord.precision``).

    Example:
        >>> runs = [RunRecord("vanilla", 1, "", "ok", precision="bf16 + compile"),
        ...         RunRecord("vanilla", 2, "", "ok", precision="bf16 + compile")]
        >>> mixed_precision(runs), mixed_precision([*runs, RunRecord("vanilla", 3, "", "ok")])
        (False, False)
        >>> mixed_precision([*runs, RunRecord("vanilla", 3, "", "ok", precision="float32 eager")])
        True
    """
    return len({r.precision for r in records if r.status == "ok" and r.precision}) > 1


def machine_note(records: Sequence[RunRecord]) -> str | None:
    """Where the finished runs trained: one machine, or which runs ran on which (their speeds then
    mix machines). None when no run recorded its machine (a table kept before runs did).

    Example:
        >>> a, b = "AMD EPYC (AVX2, bf16 emulated)", "Intel Xeon (AVX512, native bf16, AMX)"
        >>> runs = [RunRecord("vanilla", 1, "", "ok", machine=a),
        ...         RunRecord("csan1d", 1, "", "ok", machine=a)]
        >>> machine_note(runs)
        'Machine: AMD EPYC (AVX2, bf16 emulated) (all 2 runs).'
        >>> note = machine_note([*runs, RunRecord("vanilla", 2, "", "ok", machine=b)])
        >>> head, where = note.split(": ", 1)
        >>> print(head)
        Runs on 2 machines, so a speed here may mix them (each run's machine is in `results.csv`)
        >>> for part in where.split("; "):
        ...     print(part)
        AMD EPYC (AVX2, bf16 emulated): vanilla seed 1, csan1d seed 1
        Intel Xeon (AVX512, native bf16, AMX): vanilla seed 2.

    When the runs differ in precision (:func:`mixed_precision`), each machine is named with it:

        >>> bf16 = [RunRecord("vanilla", 1, "", "ok", machine=b, precision="bf16 + compile")]
        >>> fp32 = [RunRecord("vanilla", 3, "", "ok", machine=a, precision="float32 eager")]
        >>> print(machine_note(bf16 + fp32).split(": ", 1)[0])
        Runs on 2 machines or precisions, so a speed here may mix them and a BLEU the precision (each run's machine and precision are in `results.csv`)
        >>> machine_note(bf16 + fp32).split(": ", 1)[1]
        'Intel Xeon (AVX512, native bf16, AMX), bf16 + compile: vanilla seed 1; AMD EPYC (AVX2, bf16 emulated), float32 eager: vanilla seed 3.'
    """
    mixed = mixed_precision(records)
    by_machine: dict[str, list[str]] = {}
    for r in records:
        label = ", ".join(x for x in (r.machine, r.precision if mixed else "") if x)
        if r.status == "ok" and label:
            by_machine.setdefault(label, []).append(f"{r.variant} seed {r.seed}")
    if not by_machine:
        return None
    if len(by_machine) == 1:
        (machine, runs), *_ = by_machine.items()
        return f"Machine: {machine} (all {len(runs)} runs)."
    where = "; ".join(f"{m}: {', '.join(runs)}" for m, runs in by_machine.items())
    kinds, bleu, kept = (
        ("machines or precisions", " and a BLEU the precision", "machine and precision are")
        if mixed
        else ("machines", "", "machine is")
    )
    return (
        f"Runs on {len(by_machine)} {kinds}, so a speed here may mix them{bleu} (each run's {kept} "
        f"in `results.csv`): {where}."
    )


def caption(summary: Summary) -> str:
    """The line under the title that says how Δ and p were computed.

    Example:
        >>> text = caption(Summary([VariantSummary("vanilla", 2, 0, [])], [1, 2], "bs", None))
        >>> text[:41], "against `vanilla`'s" in text, "in seed order (1, 2)" in text
        ('Significance: paired bootstrap resampling', True, True)
    """
    base = summary.rows[0].variant if summary.rows else "-"
    seeds = ", ".join(map(str, summary.seeds))
    return (
        f"Significance: {describe_method(summary.method)}, one test per seed: a "
        f"variant's test translations against `{base}`'s of the same seed. Δ: mean over the seeds "
        f"of the per-seed BLEU differences; p: the per-seed p-values, in seed order ({seeds}). No "
        "test pools the seeds."
    )


def write_table_md(
    path: Path,
    summary: Summary,
    *,
    title: str,
    notes: Sequence[str] = (),
) -> None:
    """``table.md``: a title, the caption, the table (and the context grid, if any), how to read it,
    then the per-seed tests.

    Example:
        >>> import tempfile
        >>> from csan.experiments.summary import summarize
        >>> runs = [RunRecord("vanilla", 1, "", "ok", params=7578624, bleu=24.6),
        ...         RunRecord("csan1d", 1, "", "ok", params=7588624, bleu=25.1)]
        >>> path = Path(tempfile.mkdtemp()) / "table.md"
        >>> write_table_md(path, summarize(runs, None), title="Tiny compare", notes=["Seeds: 1."])
        >>> lines = path.read_text(encoding="utf-8").splitlines()
        >>> lines[0], lines[-1]
        ('# Tiny compare', '- Seeds: 1.')
        >>> for line in lines[6:8]:
        ...     print(line)
        | 1 | vanilla | 7.58M |  | — | — | 24.60 |  |  | 1/1 |
        | 2 | csan1d | 7.59M | +10.0K | — | — | 25.10 | +0.50 | — | 1/1 |
    """
    rows = summary.rows
    base = rows[0].variant if rows else "-"
    grid = context_grid(rows)
    if grid:
        grid = [
            "",
            f"Test BLEU (Δ to `{base}`) by where the context is applied and its vector:",
            "",
            *grid,
        ]
    per_seed = []
    if any(row.tests for row in rows):
        per_seed = [
            f"Per seed: sacreBLEU on the run's test translations (`translations/`), the bootstrap "
            f"estimate with its 95% confidence interval, and Δ and p against `{base}`'s run of the "
            "same seed:",
            "",
            *seed_rows(rows),
            "",
        ]
    text = [
        f"# {title}",
        "",
        caption(summary),
        "",
        *table_rows(rows, summary.seeds),
        *grid,
        "",
        f"- Baseline: `{base}` (the first variant). Added: parameters over it. Speed: training steps "
        "per second of training time after the first epoch (so without torch.compile's compilation; "
        "validation and checkpoints excluded), mean over seeds; `results.csv` also has each run's "
        "rate over its whole training time (`steps_per_s`).",
        "- BLEU: sacreBLEU on test, mean ± sample sd over the seeds that finished; Δ: mean over the "
        "seeds both finished of (variant − baseline); p: two-sided, per seed, `—` where a seed has no "
        "test.",
        *(f"- {note}" for note in notes),
        "",
        *per_seed,
    ]
    path.write_text("\n".join(text), encoding="utf-8")


def write_summary(path: Path, summary: Summary, **extra: Any) -> None:
    """``summary.json``: ``extra`` (config, command, signature, references), the significance test
    and the table's numbers.

    Example:
        >>> import tempfile
        >>> from csan.experiments.summary import summarize
        >>> runs = [RunRecord("vanilla", 1, "", "ok", bleu=24.6),
        ...         RunRecord("csan1d", 1, "", "ok", bleu=25.1)]
        >>> path = Path(tempfile.mkdtemp()) / "summary.json"
        >>> write_summary(path, summarize(runs, None), config="tiny")
        >>> payload = json.loads(path.read_text(encoding="utf-8"))
        >>> list(payload), payload["significance"]["method"]
        (['config', 'seeds', 'significance', 'variants'], 'bs')
        >>> [(v["variant"], v["bleu_mean"], v["bleu_delta"]) for v in payload["variants"]]
        [('vanilla', 24.6, 0.0), ('csan1d', 25.1, 0.5)]
    """
    significance = {
        "method": summary.method,
        "description": describe_method(summary.method),
        "signature": summary.test_signature,
    }
    payload = {
        **extra,
        "seeds": summary.seeds,
        "significance": significance,
        "variants": [asdict(r) for r in summary.rows],
    }
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
