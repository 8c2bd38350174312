"""Translate raw text lines: normalise, encode to subwords, batch by token budget, search, decode.

Choices:

- Each line goes through :func:`csan.textio.normalize`, as the training text did: control characters
  (category Cc) are dropped, every run of Unicode whitespace becomes one space, the ends are stripped.
- A line that is empty after normalisation (or encodes to no subword) gives an empty output line and
  never reaches the model; the output always has exactly one line per input line, in input order.
- Each translation goes through :func:`csan.textio.normalize` as well, so it is always one line: a byte
  piece the model emits for a newline or another control character cannot split it.
- Sources longer than ``max_src_len`` subwords (default: the model's ``max_positions - 1``, leaving room for
  EOS; no limit if the model has no ``max_positions``) are cut to that length, with one warning on the
  ``csan`` logger naming how many lines and the first one.
- Batches: sentences sorted by length (longest first); a batch holds as many as fit in ``max_tokens``
  source tokens counted with padding and EOS (beam search then works on ``beam`` times as many rows).
  A sentence longer than the budget goes alone.
- The model must already sit on ``device``; it is switched to eval mode during translation and back after.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, Protocol

import torch
from torch import Tensor

from csan.data.batching import cut_batches
from csan.decoding.beam import beam_search, greedy_search
from csan.errors import CsanError
from csan.models.base import Seq2SeqModel
from csan.textio import normalize, on_terminal

__all__ = ["SubwordCodec", "iter_translate", "translate_lines"]

logger = logging.getLogger("csan")


class SubwordCodec(Protocol):
    """What translation needs from a subword model (the SentencePiece wrapper provides it).

    Example:
        >>> class Chars:  # any class with these two methods will do: ids 3.. are 'a', 'b', ...
        ...     def encode(self, lines): return [[ord(c) - 94 for c in s] for s in lines]
        ...     def decode(self, ids): return ["".join(chr(i + 94) for i in s) for s in ids]
        >>> codec: SubwordCodec = Chars()
        >>> codec.encode(["abc"]), codec.decode(codec.encode(["abc"]))
        ([[3, 4, 5]], ['abc'])
    """

    def encode(self, lines: list[str]) -> list[list[int]]: ...

    def decode(self, ids: list[list[int]]) -> list[str]: ...


def _pad(seqs: list[list[int]], pad_id: int, device: torch.device | str) -> Tensor:
    """Right-pad to a (batch, longest) int64 tensor."""
    width = max(len(s) for s in seqs)
    return torch.tensor(
        [s + [pad_id] * (width - len(s)) for s in seqs], dtype=torch.long, device=device
    )


def _truncate(ids: list[list[int]], limit: int | None, line_numbers: list[int]) -> list[list[int]]:
    """Cut sources to ``limit`` subwords, warning once on the ``csan`` logger."""
    if limit is None:
        return ids
    if limit < 1:
        raise CsanError(f"max_src_len must be >= 1, got {limit}")
    long = [k for k, seq in enumerate(ids) if len(seq) > limit]
    if long:
        first = long[0]
        logger.warning(
            "%d source line(s) longer than %d subwords truncated (first: line %d, %d subwords)",
            len(long),
            limit,
            line_numbers[first],
            len(ids[first]),
        )
    return [seq[:limit] for seq in ids]


def _default_max_src_len(model: Any) -> int | None:
    """``max_positions - 1`` (room for EOS) if the model declares ``max_positions``."""
    cap = getattr(model, "max_positions", None)
    return None if cap is None else int(cap) - 1


def translate_lines(
    model: Seq2SeqModel,
    spm: SubwordCodec,
    lines: Sequence[str],
    *,
    beam: int = 4,
    lenpen: float = 0.6,
    max_tokens: int = 4096,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    max_src_len: int | None = None,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> list[str]:
    """Translate ``lines``; one output line per input line, in order (see the module docstring).

    ``beam=1`` runs greedy search, else beam search with length penalty ``lenpen``.

    Example:
        >>> from csan.decoding.beam import _ExampleModel
        >>> class Chars:  # ids 3.. are the characters 'a', 'b', ...
        ...     def encode(self, lines): return [[ord(c) - 94 for c in s] for s in lines]
        ...     def decode(self, ids): return ["".join(chr(i + 94) for i in s) for s in ids]
        >>> translate_lines(_ExampleModel(), Chars(), ["a", "  ", "b"], beam=2)
        ['bbbb', '', 'bbbb']
    """
    if beam < 1:
        raise CsanError(f"beam size must be >= 1, got {beam}")
    if max_tokens < 1:
        raise CsanError(f"max_tokens must be >= 1, got {max_tokens}")
    texts = [normalize(line) for line in lines]
    todo = [k for k, text in enumerate(texts) if text]
    ids = spm.encode([texts[k] for k in todo]) if todo else []
    limit = max_src_len if max_src_len is not None else _default_max_src_len(model)
    ids = _truncate(ids, limit, [k + 1 for k in todo])
    kept = [(k, seq) for k, seq in zip(todo, ids) if seq]
    sources = [[*seq, model.eos_id] for _, seq in kept]
    hyps = _search_all(
        model, sources, beam, lenpen, max_tokens, max_len_a, max_len_b, device, progress
    )
    outputs = [""] * len(lines)
    if kept:
        for (k, _), text in zip(kept, spm.decode(hyps)):
            outputs[k] = normalize(text)  # one line, whatever pieces the model chose
    return outputs


def _search_all(
    model: Seq2SeqModel,
    sources: list[list[int]],
    beam: int,
    lenpen: float,
    max_tokens: int,
    max_len_a: float,
    max_len_b: int,
    device: torch.device | str,
    progress: bool,
) -> list[list[int]]:
    """Decode every source (ids ending in EOS) by token-budget batches; results in input order."""
    results: list[list[int]] = [[] for _ in sources]
    lengths = [len(s) for s in sources]
    longest_first = sorted(range(len(sources)), key=lambda i: -lengths[i])
    batches = cut_batches(longest_first, lengths, max_tokens)
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        for batch in _maybe_progress(batches, progress):
            src = _pad([sources[i] for i in batch], model.pad_id, device)
            if beam == 1:
                out = greedy_search(model, src, max_len_a=max_len_a, max_len_b=max_len_b)
            else:
                out = beam_search(
                    model, src, beam=beam, lenpen=lenpen, max_len_a=max_len_a, max_len_b=max_len_b
                )
            for i, tokens in zip(batch, out):
                results[i] = tokens
    finally:
        if was_training:
            model.train()
    return results


def _maybe_progress(batches: list[list[int]], progress: bool) -> Iterable[list[int]]:
    """Wrap in a tqdm bar (stderr) when asked and available, on a terminal only."""
    if not progress:
        return batches
    try:
        from tqdm import tqdm
    except ImportError:
        return batches
    return tqdm(batches, desc="translate", unit="batch", disable=not on_terminal(sys.stderr))


def iter_translate(
    model: Seq2SeqModel,
    spm: SubwordCodec,
    lines: Iterable[str],
    *,
    chunk_size: int = 1000,
    **kwargs: Any,
) -> Iterator[str]:
    """Translate a stream chunk by chunk (``chunk_size`` lines each) with :func:`translate_lines`.

    Example:
        >>> from csan.decoding.beam import _ExampleModel
        >>> class Chars:
        ...     def encode(self, lines): return [[ord(c) - 94 for c in s] for s in lines]
        ...     def decode(self, ids): return ["".join(chr(i + 94) for i in s) for s in ids]
        >>> list(iter_translate(_ExampleModel(), Chars(), iter(["a", "", "c"]), chunk_size=2, beam=1))
        ['bbbb', '', 'bbbb']
    """
    if chunk_size < 1:
        raise CsanError(f"chunk_size must be >= 1, got {chunk_size}")
    stream = iter(lines)
    while chunk := list(islice(stream, chunk_size)):
        yield from translate_lines(model, spm, chunk, **kwargs)
