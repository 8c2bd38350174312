"""Evaluation: sacreBLEU scores with signatures, paired bootstrap significance, n-gram order analysis."""

from csan.evaluation.analysis import (
    BootstrapResult,
    NgramRow,
    bleu_from_stats,
    ngram_analysis,
    ngram_gaps,
    paired_bootstrap,
    sentence_stats,
)
from csan.evaluation.bleu import Scores, check_parallel, score

__all__ = [
    "BootstrapResult",
    "NgramRow",
    "Scores",
    "bleu_from_stats",
    "check_parallel",
    "ngram_analysis",
    "ngram_gaps",
    "paired_bootstrap",
    "score",
    "sentence_stats",
]
