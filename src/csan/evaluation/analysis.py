"""The per-n-gram-order analysis of the paper's Fig. 3 (significance tests: :mod:`.significance`).

It works on sacreBLEU's per-sentence sufficient statistics, one row per sentence:
``[hyp_len, ref_len, correct_1..correct_K, total_1..total_K]`` (``K`` = max n-gram order, 13a tokens).
Corpus BLEU of any subset is then a sum of rows and :func:`bleu_from_stats`, which reproduces
``sacrebleu.BLEU().corpus_score`` (exp smoothing, brevity penalty) for any max order, vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from csan.errors import CsanError
from csan.evaluation.bleu import check_parallel

__all__ = [
    "NgramRow",
    "bleu_from_stats",
    "ngram_analysis",
    "ngram_gaps",
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
class NgramRow:
    """One n-gram order of the phrase analysis (paper Fig. 3); in :func:`ngram_gaps` rows, differences.

    Fields:
        order: n.
        precision: corpus modified n-gram precision of order n, in % (clipped matches / hypothesis n-grams,
            no smoothing; 0 when the hypotheses have no n-gram of that order).
        bleu: corpus BLEU with max n-gram order n (``sacrebleu.BLEU(max_ngram_order=n)``).

    Example:
        >>> row = ngram_analysis(["a b c"], ["a b d"], max_order=1)[0]
        >>> row.order, round(row.precision, 1), round(row.bleu, 1)  # 2 of 3 unigrams match
        (1, 66.7, 66.7)
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
