"""Evaluation against sacreBLEU itself: scores, sufficient statistics, n-gram analysis (significance:
test_significance.py)."""

from __future__ import annotations

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU, CHRF
from synthetic_corpus import BAD, GOOD, REFS

from csan.errors import CsanError
from csan.evaluation import (
    NgramRow,
    bleu_from_stats,
    ngram_analysis,
    ngram_gaps,
    score,
    sentence_stats,
)


def test_score_matches_sacrebleu_and_signature():
    s = score(GOOD, REFS)
    assert s.bleu == pytest.approx(sacrebleu.corpus_bleu(GOOD, [REFS]).score)
    assert s.chrf == pytest.approx(CHRF().corpus_score(GOOD, [REFS]).score)
    assert s.signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert s.chrf_signature.startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    assert s.bleu_details.startswith("BLEU = ")
    assert s.n_sentences == len(REFS)
    assert s.to_dict()["bleu"] == s.bleu


def test_score_is_case_sensitive():
    ref = ["the cat sat on the mat"]
    assert score(["The cat sat on the mat"], ref).bleu < score(ref, ref).bleu


def test_score_needs_parallel_input():
    with pytest.raises(CsanError, match=r"^3 hypotheses but 2 references: they must be parallel$"):
        score(["a", "b", "c"], ["a", "b"])
    with pytest.raises(CsanError, match="no sentences to score"):
        score([], [])


sentences = st.lists(st.sampled_from(["a", "b", "c", "d", "."]), max_size=7).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(sentences, sentences), min_size=1, max_size=6), st.integers(1, 4))
def test_stats_reproduce_sacrebleu_corpus_score(pairs, order):
    # Covers empty hypotheses, no match at all, missing higher orders, too short and too long outputs.
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    expected = BLEU(max_ngram_order=order).corpus_score(hyps, [refs]).score
    stats = sentence_stats(hyps, refs, max_order=4)
    assert float(bleu_from_stats(stats.sum(0), order)) == pytest.approx(expected, abs=1e-9)


def test_resampled_stats_equal_corpus_score_of_the_resample():
    idx = np.random.default_rng(0).choice(len(REFS), size=len(REFS))
    stats = sentence_stats(GOOD, REFS)
    resampled = BLEU().corpus_score([GOOD[i] for i in idx], [[REFS[i] for i in idx]]).score
    assert float(bleu_from_stats(stats[idx].sum(0))) == pytest.approx(resampled, abs=1e-9)


def test_ngram_analysis_matches_sacrebleu():
    rows = ngram_analysis(GOOD, REFS)
    full = BLEU().corpus_score(GOOD, [REFS])
    assert [r.order for r in rows] == [1, 2, 3, 4]
    for r in rows:
        assert r.precision == pytest.approx(
            100 * full.counts[r.order - 1] / full.totals[r.order - 1]
        )
        assert r.bleu == pytest.approx(
            BLEU(max_ngram_order=r.order).corpus_score(GOOD, [REFS]).score
        )
    assert [r.precision for r in rows] == sorted((r.precision for r in rows), reverse=True)


def test_ngram_gaps():
    gaps = ngram_gaps(ngram_analysis(GOOD, REFS), ngram_analysis(BAD, REFS))
    assert all(g.precision > 0 and g.bleu > 0 for g in gaps)
    assert ngram_gaps([NgramRow(2, 10.0, 5.0)], [NgramRow(2, 7.5, 6.0)]) == [NgramRow(2, 2.5, -1.0)]
    with pytest.raises(ValueError, match=r"n-gram orders differ: system \[1\], baseline \[2\]"):
        ngram_gaps([NgramRow(1, 0.0, 0.0)], [NgramRow(2, 0.0, 0.0)])
