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

Statistics: :mod:`csan.experiments.summary`; the files: :mod:`csan.experiments.report`.

"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from csan.config import load_config
from csan.errors import CsanError
from csan.experiments.grid import run_grid, write_machine
from csan.experiments.plots import bleu_bars
from csan.experiments.report import write_results_csv, write_summary, write_table_md
from csan.experiments.summary import VariantSummary, _first, read_references, summarize
from csan.experiments.variants import resolve_variants

log = logging.getLogger("csan")

__all__ = ["COMPARE_DEFAULTS", "TABLE1_TITLE", "run_compare"]


TABLE1_TITLE = "Comparison of self-attention variants (after Yang et al. 2019, Table 1)"


OUTPUTS = {"results": ".csv", "table": ".md", "summary": ".json", "bleu": ".png"}


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
