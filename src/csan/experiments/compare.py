"""``csan compare``: the paper's Table 1 (and the context-aware table) from our own runs.

Every variant x seed is trained by :func:`csan.experiments.grid.run_grid` into ``DIR/runs/``; then

- ``DIR/results.csv``: one row per variant x seed (:data:`CSV_COLUMNS`), failed runs included;
- ``DIR/table.md``: one row per variant in the layout of the paper's Table 1: parameters, parameters
  added over the first variant (the baseline), training speed in steps/s and relative to the baseline,
  test BLEU as mean ± sample standard deviation over the seeds, its difference to the baseline, and
  the paired bootstrap p-value against the baseline;
- ``DIR/bleu.png``: BLEU per variant, mean with ± sd error bars, the baseline as a dashed line;
- ``DIR/summary.json`` (the same numbers) and ``DIR/machine.json`` (CPU, threads, torch version).

With ``tag`` (``--tag T``) the four files and the machine record are named ``table-T.md``, ``results-T.csv``,
... instead: several tables then share one folder and its runs (the context-aware table beside Table 1
reuses the ``vanilla`` runs).

Significance (SPEC "Evaluation"): paired bootstrap resampling (Koehn 2004), 1000 samples, sacreBLEU's
index draw, one-sided p = share of samples where the variant's BLEU is not above the baseline's.
**Choice:** with several seeds, the test translations of all seeds that both the variant and the baseline
finished are concatenated, seed by seed, against the references repeated as often (a corpus of
``seeds x 1000`` sentences, pairs kept aligned); the test thus sees seed-to-seed variation in both
systems instead of one lucky seed.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from csan.config import load_config
from csan.data.corpus import read_parallel
from csan.data.datasets import resolve_data_dir, split_paths
from csan.errors import CsanError
from csan.evaluation.analysis import paired_bootstrap
from csan.experiments.grid import RunRecord, run_grid, write_machine
from csan.experiments.plots import bleu_bars
from csan.experiments.variants import CONTEXT_SIDES, CONTEXT_VECTORS, resolve_variants
from csan.textio import read_text_lines

log = logging.getLogger("csan")

__all__ = [
    "BOOTSTRAP_SAMPLES",
    "CSV_COLUMNS",
    "VariantSummary",
    "context_grid",
    "read_references",
    "run_compare",
    "summarize",
    "write_results_csv",
    "write_summary",
    "write_table_md",
]

BOOTSTRAP_SAMPLES = 1000
TABLE1_TITLE = "Comparison of self-attention variants (after Yang et al. 2019, Table 1)"
OUTPUTS = {"results": ".csv", "table": ".md", "summary": ".json", "bleu": ".png"}

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


@dataclass
class VariantSummary:
    """One table row: a variant's runs folded over seeds (None where no run finished)."""

    variant: str
    runs: int
    failed: int
    errors: list[str]
    params: int | None
    added_params: int | None
    steps_per_s: float | None  # steady steps/s (after the first epoch), mean over seeds
    speed_ratio: float | None  # steps/s over the baseline's
    bleu_mean: float | None
    bleu_sd: float | None  # sample sd over seeds (None with one seed)
    bleu_delta: float | None
    chrf_mean: float | None
    p_value: float | None  # paired bootstrap against the baseline (None for the baseline itself)
    p_seeds: list[int]  # the seeds whose translations the bootstrap concatenated


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def _sd(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.stdev(kept) if len(kept) > 1 else None


def read_references(cfg) -> list[str]:
    """The test references the trainer scored against (``<data_dir>/<test_split>.<tgt_lang>``)."""

    dc = cfg.data
    folder = resolve_data_dir(dc.dataset, dc.data_dir, download=False)
    pairs = read_parallel(*split_paths(folder, dc.test_split, dc.src_lang, dc.tgt_lang))
    return [tgt for _, tgt in pairs]


def _hyps(record: RunRecord) -> list[str] | None:

    return read_text_lines(record.hyp_file) if record.hyp_file else None


def _p_value(
    base: list[RunRecord], runs: list[RunRecord], refs: list[str] | None
) -> tuple[float | None, list[int]]:
    """Paired bootstrap of ``runs`` against ``base`` on the concatenation over common seeds."""

    if refs is None:
        return None, []
    base_by_seed = {r.seed: r for r in base if r.status == "ok" and r.hyp_file}
    system, baseline, seeds = [], [], []
    for r in runs:
        if r.status != "ok" or not r.hyp_file or r.seed not in base_by_seed:
            continue
        sys_hyps, base_hyps = _hyps(r), _hyps(base_by_seed[r.seed])
        if sys_hyps is None or base_hyps is None:
            continue
        if len(sys_hyps) != len(refs) or len(base_hyps) != len(refs):
            log.warning(
                "seed %d left out of the bootstrap: %s has %d lines, %s %d, the references %d",
                r.seed,
                r.hyp_file,
                len(sys_hyps),
                base_by_seed[r.seed].hyp_file,
                len(base_hyps),
                len(refs),
            )
            continue
        system += sys_hyps
        baseline += base_hyps
        seeds.append(r.seed)
    if not seeds:
        return None, []
    result = paired_bootstrap(baseline, system, refs * len(seeds), samples=BOOTSTRAP_SAMPLES)
    return result.p_value, seeds


def summarize(records: Sequence[RunRecord], refs: list[str] | None) -> list[VariantSummary]:
    """Fold the run records into one :class:`VariantSummary` per variant; the first is the baseline.

    ``refs``: the test references, for the paired bootstrap p-values (None: no p-values).

    Example:
        >>> from csan.experiments.grid import RunRecord
        >>> def run(variant, seed, bleu):
        ...     return RunRecord(variant, seed, "", "ok", params=100, steps_per_s=2.0, bleu=bleu)
        >>> base, csan = summarize([run("vanilla", 1, 25.0), run("vanilla", 2, 26.0),
        ...                         run("csan1d", 1, 26.0), run("csan1d", 2, 27.0)], None)
        >>> csan.bleu_mean, csan.bleu_delta, round(csan.bleu_sd, 3), csan.speed_ratio
        (26.5, 1.0, 0.707, 1.0)
    """
    order = list(dict.fromkeys(r.variant for r in records))
    by_variant = {name: [r for r in records if r.variant == name] for name in order}
    base_runs = by_variant[order[0]] if order else []
    base_params = _first(r.params for r in base_runs if r.status == "ok")
    base_speed = _mean([_speed(r) for r in base_runs if r.status == "ok"])
    base_bleu = _mean([r.bleu for r in base_runs if r.status == "ok"])
    rows = []
    for i, name in enumerate(order):
        runs = by_variant[name]
        ok = [r for r in runs if r.status == "ok"]
        params = _first(r.params for r in ok)
        speed = _mean([_speed(r) for r in ok])
        bleu = _mean([r.bleu for r in ok])
        p, p_seeds = (None, []) if i == 0 else _p_value(base_runs, runs, refs)
        rows.append(
            VariantSummary(
                variant=name,
                runs=sum(r.status != "not run" for r in runs),
                failed=sum(r.status == "failed" for r in runs),
                errors=_errors(runs),
                params=params,
                added_params=_diff(params, base_params),
                steps_per_s=speed,
                speed_ratio=speed / base_speed if speed and base_speed else None,
                bleu_mean=bleu,
                bleu_sd=_sd([r.bleu for r in ok]),
                bleu_delta=_diff(bleu, base_bleu),
                chrf_mean=_mean([r.chrf for r in ok]),
                p_value=p,
                p_seeds=p_seeds,
            )
        )
    return rows


def _speed(record: RunRecord) -> float | None:
    """The table's speed of a run: steady steps/s after the first epoch, else over the whole run."""
    if record.steady_steps_per_s is not None:
        return record.steady_steps_per_s
    return record.steps_per_s


def _errors(runs: Sequence[RunRecord]) -> list[str]:
    """Failed runs' messages, identical ones merged: ``seeds 1, 2: ValueError: ...``."""
    seeds: dict[str, list[int]] = {}
    for r in runs:
        if r.status == "failed":
            seeds.setdefault(r.error, []).append(r.seed)
    return [
        f"seed{'s' if len(ss) > 1 else ''} {', '.join(map(str, ss))}: {error}"
        for error, ss in seeds.items()
    ]


def _first(values) -> Any:
    return next((v for v in values if v is not None), None)


def _diff(a, b):
    return None if a is None or b is None else a - b


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


COMPARE_DEFAULTS = (
    "train.evaluate_test=true",
)  # the table needs test BLEU; a --set may turn it off


def run_compare(
    source: str,
    specs: Sequence[str],
    seeds: Sequence[int],
    out_dir: str | Path,
    *,
    overrides: Sequence[str] = (),
    train_fn: Any = None,
    progress: bool = False,
    say: Any = print,
    command: str | None = None,
    title: str | None = None,
    train: bool = True,
    tag: str | None = None,
) -> list[VariantSummary]:
    """Train every variant x seed (skipping finished runs) and write the table, CSV, plot and machine.

    ``specs``: variant names, groups or raw placements (:func:`csan.experiments.variants.resolve_variants`).
    ``train=False``: only report the runs that finished (the others are listed as not run).
    ``title``: the heading of ``table.md`` (default :data:`TABLE1_TITLE`).
    ``tag``: suffix of the output files (``table-<tag>.md``, ...), so that several tables share one
    folder and its runs (e.g. the context-aware table next to Table 1, one ``vanilla`` run for both).
    """

    if tag is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", tag):
        raise CsanError(f"--tag {tag!r}: use letters, digits, '_', '.' or '-'")

    def name(stem: str, suffix: str) -> str:
        return f"{stem}-{tag}{suffix}" if tag else f"{stem}{suffix}"

    base_cfg = load_config(source, [*COMPARE_DEFAULTS, *overrides])
    variants = resolve_variants(specs, base_cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_machine(
        out,
        base_cfg,
        name=name("machine", ".json"),
        command=command,
        config=source,
        overrides=list(overrides),
    )
    records = run_grid(
        source,
        variants,
        seeds,
        out,
        overrides=overrides,
        defaults=COMPARE_DEFAULTS,
        train_fn=train_fn,
        progress=progress,
        say=say,
        train=train,
    )
    notes = [f"Config: `{source}`" + (f" with `{' '.join(overrides)}`" if overrides else "") + "."]
    notes += [f"`{v.name}`: {v.description}." for v in variants]
    missing = [f"{r.variant} seed {r.seed}" for r in records if r.status == "not run"]
    if missing:
        notes.append(f"Not run yet (report only): {', '.join(missing)}.")
    refs = None
    if any(r.hyp_file for r in records):
        try:
            refs = read_references(base_cfg)
        except CsanError as e:
            notes.append(f"No p-values: the test references could not be read ({e}).")
    signature = _first(r.signature or None for r in records)
    if signature:
        notes.append(f"sacreBLEU signature: `{signature}`.")
    rows = summarize(records, refs)
    files = {stem: out / name(stem, suffix) for stem, suffix in OUTPUTS.items()}
    write_results_csv(files["results"], records)
    write_table_md(files["table"], rows, title=title or TABLE1_TITLE, notes=notes)
    write_summary(
        files["summary"],
        rows,
        config=source,
        overrides=list(overrides),
        seeds=list(seeds),
        signature=signature,
        command=command,
    )
    seeds_text = ", ".join(map(str, seeds))
    bars = [(r.variant, r.bleu_mean, r.bleu_sd) for r in rows]
    bleu_bars(bars, files["bleu"], title=f"test BLEU over seeds {seeds_text}")
    say(f"wrote {files['table']}, {files['results']}, {files['bleu']}")
    return rows
