"""Evaluation: sacreBLEU scores with signatures, sacreBLEU's paired significance tests, n-gram analysis."""

from csan.evaluation.analysis import (
    NgramRow,
    bleu_from_stats,
    ngram_analysis,
    ngram_gaps,
    sentence_stats,
)
from csan.evaluation.bleu import Scores, check_parallel, score
from csan.evaluation.significance import (
    PairedTestResult,
    SystemResult,
    describe_method,
    paired_test,
)

__all__ = [
    "NgramRow",
    "PairedTestResult",
    "Scores",
    "SystemResult",
    "bleu_from_stats",
    "check_parallel",
    "describe_method",
    "ngram_analysis",
    "ngram_gaps",
    "paired_test",
    "score",
    "sentence_stats",
]
