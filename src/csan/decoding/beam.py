"""Greedy and beam search over a :class:`~csan.models.base.Seq2SeqModel`, with the incremental cache.

Notation: ``B`` sentences, ``K`` beam size, ``V`` vocabulary. Beam search works on ``B*K`` rows (row
``b*K + k`` is beam ``k`` of sentence ``b``); the encoder output and the decoder state are expanded to
those rows and follow the beams by :meth:`EncoderOutput.reorder` and :func:`reorder_state`.

Choices (the same in both searches, so that ``beam_search(beam=1, lenpen=0) == greedy_search``):

- Maximum length of sentence ``i``: ``L_i = int(max_len_a * src_len_i + max_len_b)`` generated tokens
  before EOS, with ``src_len_i`` its non-padding source length (EOS included) and, if the model has an
  attribute ``max_positions``, ``L_i <= max_positions - 1`` (BOS plus ``L_i`` tokens fill the positions).
  At step ``L_i`` EOS is forced, keeping its own log-probability (floored at -1e9, never -inf).
- ``min_len`` (default 1, as fairseq): EOS is forbidden before ``min_len`` tokens were generated, so a
  translation is never empty; ``min_len=0`` allows the empty translation. PAD and BOS are never generated.
- Scores are sums of float32 log-softmax values. Beam search ranks finished hypotheses by
  ``score / ((5 + |y|) / 6) ** lenpen`` (GNMT), where ``|y|`` counts the generated tokens *including* EOS.
- Stopping (as fairseq): a sentence is done once it has ``beam`` finished hypotheses or reached its maximum
  length. Only EOS candidates among the ``beam`` best of a step finish a hypothesis; the others continue
  with the best non-EOS candidates. Done sentences leave the active batch (the batch shrinks).

The model should be in eval mode (dropout off); these functions do not change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from csan.errors import CsanError
from csan.models.base import EncoderOutput, Seq2SeqModel, reorder_state

__all__ = ["Hypothesis", "beam_search", "beam_search_nbest", "greedy_search", "max_lengths"]

_MIN_FORCED_EOS = (
    -1e9
)  # a forced EOS keeps its log-probability, but never -inf (the sentence must end)


@dataclass
class Hypothesis:
    """A finished translation.

    Fields:
        tokens: generated ids, without BOS, EOS or padding.
        score: ``logprob`` divided by the length penalty (the ranking key).
        logprob: sum of the log-probabilities of ``tokens`` and of the final EOS.

    Example:
        >>> from csan.decoding.beam import _ExampleModel
        >>> nbest = beam_search_nbest(_ExampleModel(), torch.tensor([[3, 2]]), beam=2)[0]
        >>> type(nbest[0]).__name__, nbest[0].tokens, nbest[0].score >= nbest[1].score
        ('Hypothesis', [4, 4, 4, 4], True)
    """

    tokens: list[int]
    score: float
    logprob: float


def max_lengths(model: Any, src: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Maximum number of generated tokens (EOS excluded) per sentence, (batch,) int64.

    Example:
        >>> class M:
        ...     pad_id = 0
        >>> max_lengths(M(), torch.tensor([[5, 6, 2], [5, 2, 0]]), 1.2, 10).tolist()
        [13, 12]
    """
    src_len = (src != model.pad_id).sum(dim=1).tolist()
    lengths = [int(max_len_a * n + max_len_b) for n in src_len]
    cap = getattr(model, "max_positions", None)
    if cap is not None:
        lengths = [min(n, int(cap) - 1) for n in lengths]
    if any(n < 0 for n in lengths):
        raise CsanError(
            f"maximum output length {min(lengths)} < 0 (max_len_a={max_len_a}, max_len_b={max_len_b})"
        )
    return torch.tensor(lengths, dtype=torch.long, device=src.device)


def _next_lprobs(
    model: Seq2SeqModel,
    tokens: Tensor,
    enc: EncoderOutput,
    state: dict[str, Any],
    step: int,
    row_max_len: Tensor,
    min_len: int,
) -> Tensor:
    """Log-probabilities (rows, V) for the next token, float32, with PAD/BOS/min_len masked, EOS forced at max length."""
    lprobs = torch.log_softmax(model.decode_step(tokens, enc, state).float(), dim=-1)
    eos = model.eos_id
    eos_lprob = lprobs[:, eos].clone()
    lprobs[:, model.pad_id] = -torch.inf
    lprobs[:, model.bos_id] = -torch.inf
    if step < min_len:
        lprobs[:, eos] = -torch.inf
    force = row_max_len <= step
    if bool(force.any()):
        lprobs[force] = -torch.inf
        lprobs[force, eos] = eos_lprob[force].clamp(min=_MIN_FORCED_EOS)
    return lprobs


@torch.no_grad()
def greedy_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    min_len: int = 1,
) -> list[list[int]]:
    """Batched greedy decoding; returns the generated ids of each sentence, without BOS/EOS/padding.

    ``src`` is (batch, src_len), right-padded, each row ending with EOS. See the module docstring for
    the length rules.

    Example:
        >>> from csan.decoding.beam import _ExampleModel
        >>> greedy_search(_ExampleModel(), torch.tensor([[3, 2]]))
        [[4, 4, 4, 4]]
    """
    batch = src.size(0)
    enc = model.encode(src)
    row_max_len = max_lengths(model, src, max_len_a, max_len_b)
    ids = torch.arange(batch, device=src.device)  # original sentence index of each active row
    tokens = torch.full((batch, 1), model.bos_id, dtype=torch.long, device=src.device)
    state: dict[str, Any] = {}
    out: list[list[int]] = [[] for _ in range(batch)]
    for step in range(int(row_max_len.max()) + 1):
        lprobs = _next_lprobs(model, tokens[:, -1:], enc, state, step, row_max_len, min_len)
        best = lprobs.argmax(dim=-1)
        done = best == model.eos_id
        for row in torch.nonzero(done).flatten().tolist():
            out[int(ids[row])] = tokens[row, 1:].tolist()
        keep = torch.nonzero(~done).flatten()
        if keep.numel() == 0:
            break
        tokens = torch.cat([tokens, best.unsqueeze(1)], dim=1)
        if keep.numel() < done.numel():
            ids, tokens, row_max_len = ids[keep], tokens[keep], row_max_len[keep]
            enc, state = enc.reorder(keep), reorder_state(state, keep)
    return out


def _length_penalty(length: int, lenpen: float) -> float:
    """GNMT length penalty ``((5 + length) / 6) ** lenpen``."""
    return ((5.0 + length) / 6.0) ** lenpen


@dataclass
class _Beams:
    """The active part of a beam search: ``n`` sentences times ``K`` rows."""

    ids: Tensor  # (n,) original sentence index
    tokens: Tensor  # (n*K, step+1) BOS + generated
    scores: Tensor  # (n*K,) cumulative log-probability
    max_len: Tensor  # (n*K,) maximum length of the row's sentence
    enc: EncoderOutput
    state: dict[str, Any]


def _start(model: Seq2SeqModel, src: Tensor, beam: int, max_len_a: float, max_len_b: int) -> _Beams:
    """Encode, expand to batch*beam rows; only beam 0 starts live (score 0, the others -inf)."""
    batch = src.size(0)
    expand = torch.arange(batch, device=src.device).repeat_interleave(beam)
    scores = torch.full((batch, beam), -torch.inf, device=src.device)
    scores[:, 0] = 0.0
    return _Beams(
        ids=torch.arange(batch, device=src.device),
        tokens=torch.full((batch * beam, 1), model.bos_id, dtype=torch.long, device=src.device),
        scores=scores.view(-1),
        max_len=max_lengths(model, src, max_len_a, max_len_b)[expand],
        enc=model.encode(src).reorder(expand),
        state={},
    )


def _finish(
    beams: _Beams,
    finished: list[list[Hypothesis]],
    rows: Tensor,
    top_scores: Tensor,
    is_eos: Tensor,
    beam: int,
    lenpen: float,
) -> None:
    """Record the EOS candidates among the ``beam`` best of each sentence (finite scores only)."""
    mask = is_eos[:, :beam] & torch.isfinite(top_scores[:, :beam])
    if not bool(mask.any()):
        return
    length = beams.tokens.size(1)  # generated tokens so far + EOS
    penalty = _length_penalty(length, lenpen)
    for i, j in torch.nonzero(mask).tolist():
        logprob = float(top_scores[i, j])
        tokens = beams.tokens[int(rows[i, j]), 1:].tolist()
        finished[int(beams.ids[i])].append(Hypothesis(tokens, logprob / penalty, logprob))


def _advance(
    beams: _Beams, keep: Tensor, rows: Tensor, next_tok: Tensor, next_scores: Tensor
) -> _Beams:
    """Follow the chosen (n, K) source ``rows``/tokens for the sentences in ``keep``; shrink the batch."""
    index = rows[keep].reshape(-1)
    enc = beams.enc if bool(keep.all()) else beams.enc.reorder(index)
    return _Beams(
        ids=beams.ids[keep],
        tokens=torch.cat([beams.tokens[index], next_tok[keep].reshape(-1, 1)], dim=1),
        scores=next_scores[keep].reshape(-1),
        max_len=beams.max_len[index],
        enc=enc,
        state=reorder_state(beams.state, index),
    )


@torch.no_grad()
def beam_search_nbest(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    beam: int = 4,
    lenpen: float = 0.6,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    min_len: int = 1,
) -> list[list[Hypothesis]]:
    """Batched beam search; per sentence the finished hypotheses, best (highest ``score``) first.

    Every sentence gets at least one hypothesis. See the module docstring for lengths, scores and stopping.

    Example:
        >>> from csan.decoding.beam import _ExampleModel
        >>> best = beam_search_nbest(_ExampleModel(), torch.tensor([[3, 2]]), beam=2)[0][0]
        >>> best.tokens, best.score > best.logprob  # the length penalty divides a negative sum
        ([4, 4, 4, 4], True)
    """
    if beam < 1:
        raise CsanError(f"beam size must be >= 1, got {beam}")
    beams = _start(model, src, beam, max_len_a, max_len_b)
    finished: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
    for step in range(int(beams.max_len.max()) + 1):
        lprobs = _next_lprobs(
            model, beams.tokens[:, -1:], beams.enc, beams.state, step, beams.max_len, min_len
        )
        vocab = lprobs.size(1)
        n = beams.ids.numel()
        cand = (beams.scores.unsqueeze(1) + lprobs).view(n, beam * vocab)
        top_scores, top_idx = cand.topk(min(2 * beam, beam * vocab), dim=1)  # (n, 2K), sorted
        rows = torch.arange(n, device=src.device).unsqueeze(1) * beam + top_idx // vocab
        top_tok = top_idx % vocab
        is_eos = top_tok == model.eos_id
        _finish(beams, finished, rows, top_scores, is_eos, beam, lenpen)
        # The K best non-EOS candidates continue (at most K of the 2K are EOS: one per source row).
        order = torch.sort(is_eos.to(torch.uint8), dim=1, stable=True).indices[:, :beam]
        count = torch.tensor([len(finished[i]) for i in beams.ids.tolist()], device=src.device)
        sent_max = beams.max_len.view(n, beam)[:, 0]
        keep = (count < beam) & (sent_max > step)
        if not bool(keep.any()):
            break
        beams = _advance(
            beams,
            keep,
            rows.gather(1, order),
            top_tok.gather(1, order),
            top_scores.gather(1, order),
        )
    return [sorted(hyps, key=lambda h: -h.score) for hyps in finished]


def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    beam: int = 4,
    lenpen: float = 0.6,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    min_len: int = 1,
) -> list[list[int]]:
    """Batched beam search; the best hypothesis' ids of each sentence (no BOS/EOS/padding).

    Example:
        >>> from csan.decoding.beam import _ExampleModel
        >>> beam_search(_ExampleModel(), torch.tensor([[3, 2], [3, 0]]), beam=2)
        [[4, 4, 4, 4], [4, 4, 4, 4]]
    """
    nbest = beam_search_nbest(
        model,
        src,
        beam=beam,
        lenpen=lenpen,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        min_len=min_len,
    )
    return [hyps[0].tokens for hyps in nbest]


class _ExampleModel:
    """A four-step toy for the docstring examples: token 4 until the step counter reaches 4, then EOS."""

    pad_id, bos_id, eos_id, vocab = 0, 1, 2, 6

    def encode(self, src: Tensor) -> EncoderOutput:
        return EncoderOutput(out=src.float().unsqueeze(-1), padding_mask=src == self.pad_id)

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, state: dict[str, Any]) -> Tensor:
        step = state.get("step", 0)
        state["step"] = step + 1
        logits = torch.zeros(tokens.size(0), self.vocab)
        logits[:, 2 if step >= 4 else 4] = 3.0
        return logits
