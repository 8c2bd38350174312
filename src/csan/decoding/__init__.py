"""Decoding: greedy and beam search with the incremental cache, and line-by-line translation."""

from csan.decoding.beam import (
    Hypothesis,
    beam_search,
    beam_search_nbest,
    greedy_search,
    max_lengths,
)
from csan.decoding.translate import iter_translate, translate_lines
from csan.decoding.translator import LoadedModel, Translator, load_model

__all__ = [
    "Hypothesis",
    "LoadedModel",
    "Translator",
    "beam_search",
    "beam_search_nbest",
    "greedy_search",
    "iter_translate",
    "load_model",
    "max_lengths",
    "translate_lines",
]
