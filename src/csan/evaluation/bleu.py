"""Corpus BLEU and chrF with sacreBLEU (detokenized text, case-sensitive, 13a), with their signatures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF

from csan.errors import CsanError

__all__ = ["Scores", "check_parallel", "score"]


@dataclass
class Scores:
    """Corpus scores of one system.

    Fields:
        bleu: sacreBLEU corpus BLEU (0-100).
        chrf: chrF2 (0-100).
        signature: BLEU signature, e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``.
        chrf_signature: chrF signature.
        bleu_details: sacreBLEU's BLEU line (precisions, brevity penalty, lengths).
        n_sentences: number of segments scored.

    Example:
        >>> s = score(["the cat sat on the mat"], ["the cat sat on a mat"])
        >>> round(s.bleu, 2), round(s.chrf, 2), s.n_sentences, s.bleu_details.split(" (")[0]
        (53.73, 72.08, 1, 'BLEU = 53.73 83.3/60.0/50.0/33.3')
    """

    bleu: float
    chrf: float
    signature: str
    chrf_signature: str
    bleu_details: str
    n_sentences: int

    def to_dict(self) -> dict[str, float | str | int]:
        """Plain dict (JSON-ready).

        Example:
            >>> sorted(score(["a b c d"], ["a b c d"]).to_dict())[:3]
            ['bleu', 'bleu_details', 'chrf']
        """
        return asdict(self)


def check_parallel(hyps: Sequence[str], refs: Sequence[str]) -> None:
    """Raise :class:`CsanError` unless there are as many hypotheses as references (and at least one).

    Example:
        >>> check_parallel(["a"], ["a", "b"])
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: 1 hypotheses but 2 references: they must be parallel
    """
    if len(hyps) != len(refs):
        raise CsanError(f"{len(hyps)} hypotheses but {len(refs)} references: they must be parallel")
    if not hyps:
        raise CsanError("no sentences to score")


def score(hyps: Sequence[str], refs: Sequence[str]) -> Scores:
    """Corpus BLEU (sacreBLEU defaults: 13a, case-sensitive, exp smoothing) and chrF of ``hyps`` vs ``refs``.

    Example:
        >>> s = score(["the cat sat on the mat"], ["the cat sat on the mat"])
        >>> round(s.bleu, 6), s.n_sentences, s.signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        (100.0, 1, True)
    """
    check_parallel(hyps, refs)
    hyps, refs = list(hyps), [list(refs)]
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hyps, refs)
    chrf_score = chrf.corpus_score(hyps, refs)
    return Scores(
        bleu=float(bleu_score.score),
        chrf=float(chrf_score.score),
        signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_details=str(bleu_score),
        n_sentences=len(hyps),
    )
