"""The statistics of a compare table: one :class:`VariantSummary` per variant from its runs.

Significance comes from sacreBLEU (:func:`csan.evaluation.paired_test`: paired bootstrap resampling by
default, approximate randomization as an option), **one test per seed**: the variant's test
translations of seed ``s`` against the baseline's of the same seed, on the test set as it is. Each test
is thus exactly ``sacrebleu REF -i BASELINE SYSTEM --paired-bs`` on two kept files, and measures what
the test set's sampling does to one pair of trained models. Across seeds:

- BLEU: mean ± sample sd over the seeds that finished (the training seed's spread);
- Δ: the mean over the seeds both finished of the per-seed differences ``BLEU(variant, s) -
  BLEU(baseline, s)``: the same statistic each test looks at;
- p: the per-seed p-values, listed; no test pools the seeds (joining their translations into one
  corpus would count a seed's luck as test sentences).

The tests rescore the translations; a run whose translations do not give its recorded test BLEU
(another test set, an edited file) is an error, so that Δ and p always rest on the same numbers.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from csan.errors import CsanError
from csan.evaluation import paired_test
from csan.experiments.grid import RunRecord
from csan.experiments.translations import read_translations

__all__ = ["SeedTest", "Summary", "VariantSummary", "summarize"]


RESCORE_TOLERANCE = 1e-6  # BLEU points between a run's recorded test BLEU and its rescored file


@dataclass
class SeedTest:
    """One seed of a variant: sacreBLEU on its test translations and, except for the baseline, the
    paired test against the baseline's run of the same seed.

    Fields:
        seed: the training seed.
        bleu: corpus BLEU of the translations (the run's recorded test BLEU).
        mean, ci: the bootstrap estimate of that BLEU and the half-width of its 95% interval.
        delta: ``bleu`` minus the baseline's on this seed (None for the baseline).
        p_value: two-sided p of the paired test (None for the baseline).

    Example:
        >>> t = SeedTest(seed=1, bleu=25.1, mean=25.12, ci=0.9, delta=0.49, p_value=0.04)
        >>> f"{t.mean:.2f} ± {t.ci:.2f}", t.p_value < 0.05, SeedTest(1, 24.6, 24.6, 0.93).delta
        ('25.12 ± 0.90', True, None)
    """

    seed: int
    bleu: float
    mean: float
    ci: float
    delta: float | None = None
    p_value: float | None = None


@dataclass
class VariantSummary:
    """One table row: a variant's runs folded over seeds (None where no run finished).

    Example:
        >>> row = VariantSummary("csan1d", runs=2, failed=2, errors=["seeds 1, 2: ValueError: x"])
        >>> row.runs - row.failed, row.bleu_mean, row.tests
        (0, None, [])
    """

    variant: str
    runs: int
    failed: int
    errors: list[str]
    params: int | None = None
    added_params: int | None = None
    steps_per_s: float | None = None  # steady steps/s (after the first epoch), mean over seeds
    speed_ratio: float | None = None  # steps/s over the baseline's
    bleu_mean: float | None = None
    bleu_sd: float | None = None  # sample sd over seeds (None with one seed)
    bleu_delta: float | None = None  # mean over delta_seeds of the per-seed BLEU differences
    delta_seeds: list[int] = field(default_factory=list)  # seeds both it and the baseline finished
    chrf_mean: float | None = None
    tests: list[SeedTest] = field(default_factory=list)  # per seed, in the table's seed order


@dataclass
class Summary:
    """A table's rows (the first is the baseline), its seeds and how significance was tested.

    Example:
        >>> table = summarize([RunRecord("vanilla", 1, "", "ok", bleu=25.0),
        ...                    RunRecord("csan1d", 1, "", "ok", bleu=25.5)], None)
        >>> [r.variant for r in table.rows], table.seeds, table.method, table.test_signature
        (['vanilla', 'csan1d'], [1], 'bs', None)
    """

    rows: list[VariantSummary]
    seeds: list[int]
    method: str  # "bs" (paired bootstrap) or "ar" (approximate randomization)
    test_signature: str | None  # sacreBLEU's signature of the tests; None when none ran


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def _sd(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.stdev(kept) if len(kept) > 1 else None


def _tested(record: RunRecord | None) -> bool:
    return record is not None and record.status == "ok" and bool(record.hyp_file)


def _seed_tests(
    by_seed: dict[str, dict[int, RunRecord]], seeds: list[int], refs: list[str], method: str
) -> tuple[dict[str, list[SeedTest]], str | None]:
    """Per variant, one :class:`SeedTest` per seed its run and the baseline's both have translations."""
    names = list(by_seed)
    tests: dict[str, list[SeedTest]] = {name: [] for name in names}
    signature = None
    for seed in seeds:
        base = by_seed[names[0]].get(seed)
        if not _tested(base):
            continue
        runs = {names[0]: base}
        runs |= {n: by_seed[n][seed] for n in names[1:] if _tested(by_seed[n].get(seed))}
        hyps = {name: _translations(run, len(refs)) for name, run in runs.items()}
        result = paired_test(
            (names[0], hyps[names[0]]),
            [(n, hyps[n]) for n in names[1:] if n in hyps],
            refs,
            method=method,
        )
        signature = result.signature
        for r in [result.baseline, *result.systems]:
            run = runs[r.name]
            if run.bleu is None or abs(r.bleu - run.bleu) > RESCORE_TOLERANCE:
                raise CsanError(
                    f"{run.hyp_file}: sacreBLEU gives {r.bleu:.4f} on these translations, but "
                    f"{r.name} seed {seed} recorded test BLEU {run.bleu}: not the translations "
                    "it was scored on, or not the same references"
                )
            delta = None if r.p_value is None else r.bleu - result.baseline.bleu
            tests[r.name].append(SeedTest(seed, r.bleu, r.mean, r.ci, delta, r.p_value))
    return tests, signature


def _translations(run: RunRecord, n_refs: int) -> list[str]:
    hyps = read_translations(run.hyp_file)
    if len(hyps) != n_refs:
        raise CsanError(
            f"{run.hyp_file}: {len(hyps)} translations, but the test set has {n_refs} references"
        )
    return hyps


def summarize(
    records: Sequence[RunRecord], refs: list[str] | None, *, method: str = "bs"
) -> Summary:
    """Fold the run records into one :class:`VariantSummary` per variant; the first is the baseline.

    ``refs``: the test references, for the paired tests (None: no tests). ``method``: ``"bs"``
    (paired bootstrap resampling) or ``"ar"`` (approximate randomization).

    Example:
        >>> from csan.experiments.grid import RunRecord
        >>> def run(variant, seed, bleu):
        ...     return RunRecord(variant, seed, "", "ok", params=100, steps_per_s=2.0, bleu=bleu)
        >>> table = summarize([run("vanilla", 1, 25.0), run("vanilla", 2, 26.0),
        ...                    run("csan1d", 1, 26.0), run("csan1d", 2, 27.5)], None)
        >>> base, csan = table.rows
        >>> csan.bleu_mean, csan.bleu_delta, csan.delta_seeds, round(csan.bleu_sd, 3), csan.speed_ratio
        (26.75, 1.25, [1, 2], 1.061, 1.0)
    """
    order = list(dict.fromkeys(r.variant for r in records))
    seeds = list(dict.fromkeys(r.seed for r in records))
    by_variant = {name: [r for r in records if r.variant == name] for name in order}
    by_seed = {name: {r.seed: r for r in runs} for name, runs in by_variant.items()}
    tests, signature = _seed_tests(by_seed, seeds, refs, method) if refs and order else ({}, None)
    base_runs = by_variant[order[0]] if order else []
    base_params = _first(r.params for r in base_runs if r.status == "ok")
    base_speed = _mean([_speed(r) for r in base_runs if r.status == "ok"])
    base_bleu = {r.seed: r.bleu for r in base_runs if r.status == "ok" and r.bleu is not None}
    rows = []
    for name in order:
        runs = by_variant[name]
        ok = [r for r in runs if r.status == "ok"]
        params = _first(r.params for r in ok)
        speed = _mean([_speed(r) for r in ok])
        paired = [r for r in ok if r.bleu is not None and r.seed in base_bleu]
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
                bleu_mean=_mean([r.bleu for r in ok]),
                bleu_sd=_sd([r.bleu for r in ok]),
                bleu_delta=_mean([r.bleu - base_bleu[r.seed] for r in paired]),
                delta_seeds=[r.seed for r in paired],
                chrf_mean=_mean([r.chrf for r in ok]),
                tests=tests.get(name, []),
            )
        )
    return Summary(rows=rows, seeds=seeds, method=method, test_signature=signature)


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
