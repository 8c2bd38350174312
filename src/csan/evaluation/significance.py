"""Paired significance tests of corpus BLEU, done by sacreBLEU itself (``sacrebleu.significance``).

:func:`paired_test` hands the systems to ``sacrebleu.significance.PairedTest``, the code behind
``sacrebleu REF -i BASE SYS ... --paired-bs`` (or ``--paired-ar``), so every number here is what that
command prints for the same files:

- ``"bs"``: paired bootstrap resampling (Koehn 2004), 1,000 resamples of the test sentences;
- ``"ar"``: approximate randomisation (Riezler and Maxwell 2005), 10,000 trials of swapping the two
  systems' translations sentence by sentence; the confidence interval then comes from a separate
  1,000-resample bootstrap (``PairedTest``'s ``n_ar_confidence``; drawn after the trials, so p is
  what ``--paired-ar`` prints, which shows no interval).

p is two-sided: roughly the chance of a BLEU difference at least as large as the observed one if both
translations came from the same system. The 95% confidence interval is sacreBLEU's, of each system's
own BLEU: the bootstrap estimate ``mean`` and the half-width ``ci`` (sacreBLEU prints
``mean ± ci``). The random draws use sacreBLEU's seed (``SACREBLEU_SEED``, default 12345), which the
test's signature records. One quirk of the library: two systems with the same BLEU on every resample
(identical translations, or both at 0) get the smallest p, ``1 / (samples + 1)``, not 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from sacrebleu import __version__ as SACREBLEU_VERSION
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from csan.errors import CsanError
from csan.evaluation.bleu import check_parallel

__all__ = ["METHODS", "PairedTestResult", "SystemResult", "describe_method", "paired_test"]


METHODS = {"bs": "paired bootstrap resampling", "ar": "paired approximate randomization"}
SAMPLES = {"bs": 1000, "ar": 10000}  # sacreBLEU's defaults (resamples / trials)
AR_CONFIDENCE_SAMPLES = 1000  # bootstrap resamples behind the interval of an "ar" test


@dataclass
class SystemResult:
    """One system in a paired test (BLEU 0-100).

    Fields:
        name: the system's name.
        bleu: its corpus BLEU on the full test set.
        mean: the bootstrap estimate of its BLEU.
        ci: half-width of the 95% confidence interval around ``mean``.
        p_value: two-sided p against the baseline; None for the baseline itself.

    Example:
        >>> base = SystemResult("vanilla", bleu=24.61, mean=24.6, ci=0.93, p_value=None)
        >>> f"{base.mean:.2f} ± {base.ci:.2f}", base.p_value is None  # as sacreBLEU prints it
        ('24.60 ± 0.93', True)
    """

    name: str
    bleu: float
    mean: float
    ci: float
    p_value: float | None


@dataclass
class PairedTestResult:
    """The baseline and every system tested against it, with the test's signature.

    Example:
        >>> base = SystemResult("vanilla", 24.61, 24.6, 0.93, None)
        >>> new = SystemResult("csan1d", 25.1, 25.12, 0.9, 0.04)
        >>> result = PairedTestResult("bs", 1000, "nrefs:1|bs:1000|seed:12345", base, [new])
        >>> [(s["name"], s["p_value"]) for s in result.to_dict()["systems"]]
        [('csan1d', 0.04)]
    """

    method: str  # "bs" or "ar"
    samples: int  # resamples ("bs") or trials ("ar")
    signature: str  # sacreBLEU's, e.g. "nrefs:1|bs:1000|seed:12345|case:mixed|...|version:2.6.0"
    baseline: SystemResult
    systems: list[SystemResult]

    def to_dict(self) -> dict[str, object]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


def describe_method(method: str) -> str:
    """The test in words, for a table's caption.

    Example:
        >>> describe_method("bs").split(" (")[0]
        'paired bootstrap resampling'
        >>> describe_method("xx")
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: significance test 'xx': use 'bs' (paired bootstrap resampling) or 'ar' (paired approximate randomization)
    """
    _check_method(method)
    if method == "bs":
        how = f"{SAMPLES['bs']:,} resamples"
    else:
        how = f"{SAMPLES['ar']:,} trials; 95% CI from {AR_CONFIDENCE_SAMPLES:,} bootstrap resamples"
    return f"{METHODS[method]} ({how}, two-sided; sacreBLEU {SACREBLEU_VERSION} PairedTest)"


def _check_method(method: str) -> None:
    if method not in METHODS:
        choices = " or ".join(f"{m!r} ({text})" for m, text in METHODS.items())
        raise CsanError(f"significance test {method!r}: use {choices}")


def paired_test(
    baseline: tuple[str, Sequence[str]],
    systems: Sequence[tuple[str, Sequence[str]]],
    refs: Sequence[str],
    *,
    method: str = "bs",
) -> PairedTestResult:
    """Test every ``(name, translations)`` of ``systems`` against ``baseline`` on ``refs``.

    What ``sacrebleu REF -i BASE SYS1 SYS2 -m bleu --paired-bs`` (``method="ar"``: ``--paired-ar``)
    computes, with its default numbers of samples and seed.

    Example:
        >>> refs = ["the cat sat on the mat", "a dog barked at the red car", "two men play chess"]
        >>> sys = ["the cat sat on a mat", "a dog barked at the car", "two men play chess"]
        >>> r = paired_test(("base", refs), [("sys", sys)], refs)
        >>> round(r.baseline.bleu, 2), r.baseline.p_value, r.systems[0].name, r.samples
        (100.0, None, 'sys', 1000)
        >>> 0 < r.systems[0].p_value <= 1 and "bs:1000|seed:12345" in r.signature
        True
    """
    _check_method(method)
    for _, hyps in (baseline, *systems):
        check_parallel(hyps, refs)
    names = [name for name, _ in (baseline, *systems)]
    if len(set(names)) != len(names):
        raise CsanError(f"paired test: system names must differ, got {names}")
    test = PairedTest(
        [(name, list(hyps)) for name, hyps in (baseline, *systems)],
        {"BLEU": BLEU()},
        [list(refs)],
        test_type=method,
        n_samples=SAMPLES[method],
        n_ar_confidence=AR_CONFIDENCE_SAMPLES if method == "ar" else -1,
    )
    signatures, scores = test()
    (metric,) = signatures  # one metric: its name as sacreBLEU gives it ("BLEU")
    results = [
        SystemResult(
            name=name,
            bleu=float(r.score),
            mean=float(r.mean),
            ci=float(r.ci),
            p_value=None if i == 0 else float(r.p_value),
        )
        for i, (name, r) in enumerate(zip(scores["System"], scores[metric]))
    ]
    return PairedTestResult(
        method=method,
        samples=test.n_samples,
        signature=signatures[metric].format(),
        baseline=results[0],
        systems=results[1:],
    )
