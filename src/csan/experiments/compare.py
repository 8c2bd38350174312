"""``csan compare``: the paper's Table 1 (and the context-aware table) from our own runs.

Every variant x seed is trained by :func:`csan.experiments.grid.run_grid` into ``DIR/runs/``; then

- ``DIR/translations/<variant>-seed<N>.<split>.hyp.gz``: every finished run's test translations
  (:mod:`csan.experiments.translations`);
- ``DIR/results.csv``: one row per variant x seed (:data:`CSV_COLUMNS`), failed runs included, each
  with the machine it trained on (from its ``results.json``);
- ``DIR/table.md``: one row per variant in the layout of the paper's Table 1: parameters, parameters
  added over the first variant (the baseline), training speed in steps/s and relative to the baseline,
  test BLEU as mean ± sample standard deviation over the seeds, its difference to the baseline, and
  sacreBLEU's paired test against the baseline, one per seed (:mod:`csan.experiments.summary`); then
  the per-seed tests with their 95% confidence intervals;
- ``DIR/bleu.png``: BLEU per variant, mean with ± sd error bars, the baseline as a dashed line;
- ``DIR/summary.json`` (the same numbers, the test's signature, the references' sha256) and
  ``DIR/machine.json`` (CPU, threads, torch version of the last call that trained; a report keeps
  it).
  A grid resumed over several sessions may run on several machines: the table's notes then say which
  runs ran where (:func:`csan.experiments.report.machine_note`), since their speeds do not compare.

``train=False`` (``--report-only``) trains nothing: a run that has not finished in ``runs/`` is taken
from the folder's own ``results.csv`` and ``translations/`` when they hold it, so that a folder with
only those files (a kept table, without its runs) gives the same ``table.md``, ``results.csv`` and
``summary.json`` byte for byte. Its recorded command is kept when the new one differs only in ``--out``.

With ``tag`` (``--tag T``) the four files and the machine record are named ``table-T.md``, ``results-T.csv``,
... instead: several tables then share one folder and its runs (the context-aware table beside Table 1
reuses the ``vanilla`` runs).

Statistics: :mod:`csan.experiments.summary`; the files: :mod:`csan.experiments.report`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from csan.config import load_config
from csan.errors import CsanError
from csan.evaluation import describe_method
from csan.experiments.grid import RunRecord, run_grid
from csan.experiments.plots import bleu_bars
from csan.experiments.recorded import recorded_command
from csan.experiments.report import (
    machine_note,
    read_results_csv,
    write_results_csv,
    write_summary,
    write_table_md,
)
from csan.experiments.summary import VariantSummary, _first, summarize
from csan.experiments.translations import (
    TRANSLATIONS,
    check_references,
    keep_translation,
    read_references,
)
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
    significance: str = "bs",
) -> list[VariantSummary]:
    """Train every variant x seed (skipping finished runs) and write the table, CSV, plot and machine.

    ``specs``: variant names, groups or raw placements (:func:`csan.experiments.variants.resolve_variants`).
    ``train=False``: only report (see the module docstring: runs that finished, else kept records).
    ``title``: the heading of ``table.md`` (default :data:`TABLE1_TITLE`).
    ``tag``: suffix of the output files (``table-<tag>.md``, ...), so that several tables share one
    folder and its runs (e.g. the context-aware table next to Table 1, one ``vanilla`` run for both).
    ``significance``: ``"bs"`` (paired bootstrap resampling) or ``"ar"`` (approximate randomization).

    Example (a stand-in trainer; no test translations, so no significance tests):
        >>> import tempfile
        >>> from csan.toy import toy_train
        >>> out = Path(tempfile.mkdtemp())
        >>> rows = run_compare("tiny", ["vanilla", "csan1d"], [1, 2], out,
        ...                    train_fn=toy_train)  # doctest: +ELLIPSIS
        [1/4] vanilla seed 1: training in .../runs/vanilla-seed1
        ...
        wrote .../table.md, .../results.csv, .../bleu.png
        >>> [(r.variant, r.bleu_mean, round(r.bleu_sd, 2)) for r in rows]
        [('vanilla', 21.5, 0.71), ('csan1d', 22.5, 0.71)]
        >>> sorted(p.name for p in out.iterdir())
        ['bleu.png', 'machine.json', 'results.csv', 'runs', 'summary.json', 'table.md']
        >>> table = (out / "table.md").read_text(encoding="utf-8").splitlines()
        >>> [row.split(" | ")[1:2] + row.split(" | ")[6:8] for row in table[6:8]]
        [['vanilla', '21.50 ± 0.71', ''], ['csan1d', '22.50 ± 0.71', '+1.00']]
    """

    if tag is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", tag):
        raise CsanError(f"--tag {tag!r}: use letters, digits, '_', '.' or '-'")
    describe_method(significance)  # an unknown test fails before any training

    def name(stem: str, suffix: str) -> str:
        return f"{stem}-{tag}{suffix}" if tag else f"{stem}{suffix}"

    base_cfg = load_config(source, [*COMPARE_DEFAULTS, *overrides])
    variants = resolve_variants(specs, base_cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {stem: out / name(stem, suffix) for stem, suffix in OUTPUTS.items()}
    previous = _read_summary(files["summary"])
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
        machine=name("machine", ".json"),
        command=command,
    )
    if not train:
        records = _with_kept_records(records, files["results"], say)
    records = [_keep(out, r) for r in records]
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
    if refs is not None and not train:
        check_references(refs, (previous or {}).get("references"))
    machines = machine_note(records)
    if machines:
        notes.append(machines)
    signature = _first(r.signature or None for r in records)
    if signature:
        notes.append(f"sacreBLEU signature: `{signature}`.")
    summary = summarize(records, refs.lines if refs else None, method=significance)
    if summary.test_signature:
        notes.append(f"Test signature: `{summary.test_signature}`.")
    if refs is not None:
        notes.append(
            f"Test translations: `{TRANSLATIONS}/<variant>-seed<N>.<split>.hyp.gz`; references "
            f"`{refs.file.name}` ({len(refs.lines)} lines, sha256 `{refs.sha256}`)."
        )
    write_results_csv(files["results"], records)
    write_table_md(files["table"], summary, title=title or TABLE1_TITLE, notes=notes)
    write_summary(
        files["summary"],
        summary,
        config=source,
        overrides=list(overrides),
        signature=signature,
        references=refs.to_dict() if refs else None,
        command=command if train else recorded_command((previous or {}).get("command"), command),
    )
    seeds_text = ", ".join(map(str, seeds))
    bars = [(r.variant, r.bleu_mean, r.bleu_sd) for r in summary.rows]
    bleu_bars(bars, files["bleu"], title=f"test BLEU over seeds {seeds_text}")
    say(f"wrote {files['table']}, {files['results']}, {files['bleu']}")
    return summary.rows


def _read_summary(path: Path) -> dict[str, Any] | None:
    """The ``summary.json`` a previous call wrote (None if there is none)."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CsanError(f"{path}: not valid JSON (line {e.lineno}): {e.msg}") from None


def _with_kept_records(
    records: list[RunRecord], results_csv: Path, say: Callable[[str], None]
) -> list[RunRecord]:
    """Runs that did not finish in ``runs/``, taken from the folder's ``results.csv`` where it has them."""
    if not results_csv.is_file():
        return records
    kept = {(r.variant, r.seed): r for r in read_results_csv(results_csv)}
    merged = []
    for r in records:
        k = kept.get((r.variant, r.seed))
        merged.append(k if r.status == "not run" and k and k.status != "not run" else r)
    taken = sum(a is not b for a, b in zip(merged, records))
    if taken:
        say(f"{taken} run(s) without a finished folder in runs/: taken from {results_csv}")
    return merged


def _keep(out: Path, record: RunRecord) -> RunRecord:
    """Copy a finished run's test translations into ``out/translations/`` (the record points there)."""
    hyp = Path(record.hyp_file) if record.hyp_file else None
    if record.status != "ok" or hyp is None or hyp.parent == out / TRANSLATIONS:
        return record
    return replace(record, hyp_file=str(keep_translation(out, Path(record.run_dir), hyp)))
