"""The statistics of a compare table: one :class:`VariantSummary` per variant from its runs.

Significance (SPEC "Evaluation"): paired bootstrap resampling (Koehn 2004), 1000 samples, sacreBLEU's
index draw, one-sided p = share of samples where the variant's BLEU is not above the baseline's.
**Choice:** with several seeds, the test translations of all seeds that both the variant and the baseline
finished are concatenated, seed by seed, against the references repeated as often (a corpus of
``seeds x 1000`` sentences, pairs kept aligned); the test thus sees seed-to-seed variation in both
systems instead of one lucky seed.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from csan.data.corpus import read_parallel
from csan.evaluation.analysis import paired_bootstrap
from csan.experiments.grid import RunRecord
from csan.textio import read_text_lines
from csan.training.data import corpus_files

log = logging.getLogger("csan")

__all__ = ["BOOTSTRAP_SAMPLES", "VariantSummary", "read_references", "summarize"]


BOOTSTRAP_SAMPLES = 1000


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
    """The references of the (first) test set the trainer scored against."""
    files = corpus_files(cfg.data, download=False)
    test = next(pair for name, pair in files.items() if name.startswith("test:"))
    return [tgt for _, tgt in read_parallel(*test)]


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
