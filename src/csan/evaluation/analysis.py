"""Significance (paired bootstrap, Koehn 2004) and the per-n-gram-order analysis of the paper's Fig. 3.

Both work on sacreBLEU's per-sentence sufficient statistics, one row per sentence:
``[hyp_len, ref_len, correct_1..correct_K, total_1..total_K]`` (``K`` = max n-gram order, 13a tokens).
Corpus BLEU of any subset or resample is then a sum of rows and :func:`bleu_from_stats`, which reproduces
``sacrebleu.BLEU().corpus_score`` (exp smoothing, brevity penalty) vectorised over many samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from csan.errors import CsanError
from csan.evaluation.bleu import check_parallel

__all__ = [
    "BootstrapResult",
    "NgramRow",
    "bleu_from_stats",
    "ngram_analysis",
    "ngram_gaps",
    "paired_bootstrap",
    "sentence_stats",
]


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], max_order: int = 4) -> np.ndarray:
    """Per-sentence BLEU statistics, (n_sentences, 2 + 2 * max_order) float64 (see the module docstring).

    Uses sacreBLEU's own extraction (``BLEU._extract_corpus_statistics``, what its significance tests use).

    Example:
        >>> sentence_stats(["a b c"], ["a b d"], max_order=2).tolist()
        [[3.0, 3.0, 2.0, 1.0, 3.0, 2.0]]
    """
    check_parallel(hyps, refs)
    bleu = BLEU(max_ngram_order=max_order)
    stats = bleu._extract_corpus_statistics(list(hyps), [list(refs)])
    return np.asarray(stats, dtype=np.float64).reshape(len(hyps), 2 + 2 * max_order)


def bleu_from_stats(stats: np.ndarray, max_order: int | None = None) -> np.ndarray:
    """Corpus BLEU (0-100) from *summed* statistics (..., 2 + 2K), using the first ``max_order`` orders.

    Same maths as ``sacrebleu.BLEU.compute_bleu`` with ``smooth_method="exp"``: an order with no match gets
    precision ``100 / (2^k * total)`` (``k``-th such order); no match at all, or an order with no n-gram,
    gives 0; brevity penalty ``exp(1 - ref/hyp)`` when ``hyp < ref``.

    Example:
        >>> round(float(bleu_from_stats(sentence_stats(["a b c d"], ["a b c d"]).sum(0))), 6)
        100.0
    """
    stats = np.asarray(stats, dtype=np.float64)
    k_all = (stats.shape[-1] - 2) // 2
    order = k_all if max_order is None else max_order
    hyp_len, ref_len = stats[..., 0], stats[..., 1]
    correct = stats[..., 2 : 2 + order]
    total = stats[..., 2 + k_all : 2 + k_all + order]
    no_match = correct == 0
    smooth = 2.0 ** np.cumsum(no_match, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(no_match, 100.0 / (smooth * total), 100.0 * correct / total)
        log_mean = np.log(precision).mean(axis=-1)
        bp = np.where(hyp_len < ref_len, np.exp(1.0 - ref_len / hyp_len), 1.0)
    bp = np.where(hyp_len > 0, bp, 0.0)
    zero = no_match.all(axis=-1) | (total == 0).any(axis=-1)
    return np.where(zero, 0.0, bp * np.exp(np.where(zero, 0.0, log_mean)))


@dataclass
class BootstrapResult:
    """Paired bootstrap of a system against a baseline (BLEU, 0-100).

    Fields:
        baseline_bleu, system_bleu: corpus BLEU on the full test set.
        baseline_mean, system_mean: mean BLEU over the bootstrap samples.
        baseline_ci, system_ci: 95% interval (lower, upper) over the samples, as sacreBLEU picks it
            (sorted scores at ``n // 40`` and ``n - n // 40 - 1``; sacreBLEU prints ``±(upper - lower) / 2``).
        p_value: Koehn (2004), one-sided: the fraction of samples where the system's BLEU is not higher
            than the baseline's. Identical systems give 1; below 0.05 means "better with 95% confidence".
        p_value_sacrebleu: ``sacrebleu --paired-bs``'s two-sided value on the same samples: the share (+1
            smoothed) of samples whose centred ``|system - baseline|`` exceeds the observed ``|difference|``.
            Note that it is ``1 / (samples + 1)`` for identical systems.
        samples, seed: the resampling settings (numpy ``default_rng(seed)``, indices as sacreBLEU draws them).
    """

    baseline_bleu: float
    system_bleu: float
    baseline_mean: float
    system_mean: float
    baseline_ci: tuple[float, float]
    system_ci: tuple[float, float]
    p_value: float
    p_value_sacrebleu: float
    samples: int
    seed: int

    def to_dict(self) -> dict[str, object]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


def _resampled_sums(stats: np.ndarray, idx: np.ndarray, chunk_elems: int = 1 << 22) -> np.ndarray:
    """Sum ``stats`` rows over each sample of indices ``idx`` (samples, n) -> (samples, n_stats).

    Counts how often each sentence is drawn, then one matrix product per chunk of samples (exact in float64).
    """
    samples, n = idx.shape
    out = np.empty((samples, stats.shape[1]))
    step = max(1, chunk_elems // n)
    for start in range(0, samples, step):
        block = idx[start : start + step]
        flat = block + n * np.arange(block.shape[0])[:, None]
        counts = np.bincount(flat.ravel(), minlength=block.shape[0] * n).reshape(block.shape[0], n)
        out[start : start + step] = counts @ stats
    return out


def _ci(scores: np.ndarray) -> tuple[float, float]:
    """sacreBLEU's 95% bounds: sorted scores at ``n // 40`` and ``n - n // 40 - 1``."""
    ordered = np.sort(scores)
    low = len(ordered) // 40
    return float(ordered[low]), float(ordered[len(ordered) - low - 1])


def paired_bootstrap(
    baseline: Sequence[str],
    system: Sequence[str],
    refs: Sequence[str],
    *,
    samples: int = 1000,
    seed: int = 12345,
) -> BootstrapResult:
    """Paired bootstrap resampling (Koehn 2004) of ``system`` against ``baseline``; see :class:`BootstrapResult`.

    The same ``samples`` resamples of sentence indices (with replacement) score both systems; the default
    seed and the index draw are sacreBLEU's, so its ``--paired-bs`` numbers are reproduced.

    Example:
        >>> refs = ["the cat sat on the mat", "a dog barked loudly today"]
        >>> r = paired_bootstrap(refs, refs, refs, samples=100)
        >>> round(r.system_bleu, 6), r.p_value
        (100.0, 1.0)
    """
    check_parallel(baseline, refs)
    check_parallel(system, refs)
    if samples < 1:
        raise CsanError(f"bootstrap samples must be >= 1, got {samples}")
    bl_stats, sys_stats = sentence_stats(baseline, refs), sentence_stats(system, refs)
    idx = np.random.default_rng(seed).choice(len(refs), size=(samples, len(refs)), replace=True)
    bl = bleu_from_stats(_resampled_sums(bl_stats, idx))
    sy = bleu_from_stats(_resampled_sums(sys_stats, idx))
    bl_full, sys_full = (
        float(bleu_from_stats(bl_stats.sum(0))),
        float(bleu_from_stats(sys_stats.sum(0))),
    )
    sample_diffs = np.abs(sy - bl)
    exceed = np.sum(sample_diffs - sample_diffs.mean() > abs(bl_full - sys_full))
    return BootstrapResult(
        baseline_bleu=bl_full,
        system_bleu=sys_full,
        baseline_mean=float(bl.mean()),
        system_mean=float(sy.mean()),
        baseline_ci=_ci(bl),
        system_ci=_ci(sy),
        p_value=float(np.mean(sy <= bl)),
        p_value_sacrebleu=float((exceed + 1) / (samples + 1)),
        samples=samples,
        seed=seed,
    )


@dataclass
class NgramRow:
    """One n-gram order of the phrase analysis (paper Fig. 3); in :func:`ngram_gaps` rows, differences.

    Fields:
        order: n.
        precision: corpus modified n-gram precision of order n, in % (clipped matches / hypothesis n-grams,
            no smoothing; 0 when the hypotheses have no n-gram of that order).
        bleu: corpus BLEU with max n-gram order n (``sacrebleu.BLEU(max_ngram_order=n)``).
    """

    order: int
    precision: float
    bleu: float


def ngram_analysis(hyps: Sequence[str], refs: Sequence[str], max_order: int = 4) -> list[NgramRow]:
    """Modified precision and BLEU with max order n, for n = 1 .. ``max_order``.

    Example:
        >>> rows = ngram_analysis(["a b c"], ["a b d"], max_order=2)
        >>> [(r.order, round(r.precision, 1)) for r in rows]
        [(1, 66.7), (2, 50.0)]
    """
    if max_order < 1:
        raise CsanError(f"max n-gram order must be >= 1, got {max_order}")
    totals = sentence_stats(hyps, refs, max_order).sum(0)
    rows = []
    for n in range(1, max_order + 1):
        correct, total = totals[1 + n], totals[1 + max_order + n]
        precision = 100.0 * correct / total if total > 0 else 0.0
        rows.append(
            NgramRow(order=n, precision=float(precision), bleu=float(bleu_from_stats(totals, n)))
        )
    return rows


def ngram_gaps(
    system_rows: Sequence[NgramRow], baseline_rows: Sequence[NgramRow]
) -> list[NgramRow]:
    """Per order, ``system - baseline`` for precision and BLEU (the gaps plotted in Fig. 3).

    Example:
        >>> ngram_gaps([NgramRow(1, 60.0, 30.0)], [NgramRow(1, 58.5, 29.0)])
        [NgramRow(order=1, precision=1.5, bleu=1.0)]
    """
    if [r.order for r in system_rows] != [r.order for r in baseline_rows]:
        raise ValueError(
            f"n-gram orders differ: system {[r.order for r in system_rows]}, "
            f"baseline {[r.order for r in baseline_rows]}"
        )
    return [
        NgramRow(order=s.order, precision=s.precision - b.precision, bleu=s.bleu - b.bleu)
        for s, b in zip(system_rows, baseline_rows)
    ]
