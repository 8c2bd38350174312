"""Greedy and beam search: hand-built score tables and a tiny real model with an incremental cache."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from csan.decoding.beam import beam_search, beam_search_nbest, greedy_search
from csan.errors import CsanError
from csan.models.base import EncoderOutput, reorder_state

PAD, BOS, EOS, A, B, C, D = 0, 1, 2, 3, 4, 5, 6
VOCAB = 7
TINY = 1e-4  # probability of every token a table does not name, except D, which takes what is left


class TableModel:
    """Next-token probabilities looked up by the previous token (OpenNMT-py style hand-built scores).

    Each row sums to one (D takes the rest), so log-softmax gives back exactly the logs of the table.
    """

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def __init__(
        self, table: dict[int, dict[int, float]], default: dict[int, float] | None = None
    ) -> None:
        self.table = table
        self.default = default or {EOS: 0.9}
        self.calls = 0

    def encode(self, src: Tensor) -> EncoderOutput:
        return EncoderOutput(out=src.float().unsqueeze(-1), padding_mask=src == PAD)

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, state: dict[str, Any]) -> Tensor:
        self.calls += 1
        rows = []
        for prev in tokens[:, 0].tolist():
            probs = torch.full((VOCAB,), TINY)
            for tok, p in self.table.get(prev, self.default).items():
                probs[tok] = p
            probs[D] = 0.0
            probs[D] = 1.0 - probs.sum()
            assert probs[D] >= 0
            rows.append(probs.log())
        return torch.stack(rows)


def lp(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


def one_src() -> Tensor:
    return torch.tensor([[A, B, EOS]])


def test_beam_escapes_greedy_trap():
    # a looks best first (0.58 vs 0.4) but ends badly: P(a, EOS) = 0.58 * 0.35 < P(b, EOS) = 0.4 * 0.9.
    model = TableModel({BOS: {A: 0.58, B: 0.4}, A: {EOS: 0.35, C: 0.3, B: 0.25}, B: {EOS: 0.9}})
    assert greedy_search(model, one_src()) == [[A]]
    assert beam_search(model, one_src(), beam=2, lenpen=0.0) == [[B]]
    best = beam_search_nbest(model, one_src(), beam=2, lenpen=0.0)[0][0]
    assert best.logprob == pytest.approx(math.log(0.4 * 0.9), abs=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_length_penalty_changes_choice_as_computed_by_hand(alpha):
    model = TableModel(
        {
            BOS: {A: 0.5, B: 0.45},
            A: {EOS: 0.5, C: 0.25, B: 0.15, A: 0.09},
            B: {C: 0.55},
            C: {EOS: 0.9},
        }
    )
    short = math.log(0.5 * 0.5) / lp(2, alpha)  # [a] + EOS: 2 tokens
    long = math.log(0.45 * 0.55 * 0.9) / lp(3, alpha)  # [b, c] + EOS: 3 tokens
    expected = [A] if short > long else [B, C]
    assert (short > long) == (alpha == 0.0)  # the two settings really disagree
    nbest = beam_search_nbest(model, one_src(), beam=2, lenpen=alpha)[0]
    assert nbest[0].tokens == expected
    assert nbest[0].score == pytest.approx(max(short, long), abs=1e-5)


def test_max_length_forces_eos():
    never_ends = TableModel({}, default={A: 0.5, B: 0.4, EOS: TINY})
    src = torch.tensor([[A, A, A, EOS], [A, EOS, PAD, PAD]])
    for out in (
        greedy_search(never_ends, src, max_len_a=1.0, max_len_b=1),
        beam_search(never_ends, src, beam=3, max_len_a=1.0, max_len_b=1),
    ):
        assert [len(t) for t in out] == [5, 3]  # int(1.0 * src_len + 1), src_len counts EOS


def test_max_positions_caps_length():
    never_ends = TableModel({}, default={A: 0.5, B: 0.4, EOS: TINY})
    never_ends.max_positions = 4
    assert [len(t) for t in beam_search(never_ends, one_src(), beam=2)] == [3]
    assert [len(t) for t in greedy_search(never_ends, one_src())] == [3]


def test_min_len_decides_whether_empty_output_is_allowed():
    wants_eos = TableModel({BOS: {EOS: 0.9, A: 0.06}}, default={EOS: 0.9})
    assert greedy_search(wants_eos, one_src(), min_len=0) == [[]]
    assert beam_search(wants_eos, one_src(), beam=3, min_len=0) == [[]]
    assert greedy_search(wants_eos, one_src()) == [[A]]
    assert beam_search(wants_eos, one_src(), beam=3) == [[A]]


def test_nbest_sorted_and_scores_normalised():
    model = TableModel(
        {BOS: {A: 0.5, B: 0.3, C: 0.15}, A: {EOS: 0.5, B: 0.4}, B: {EOS: 0.6, C: 0.3}}
    )
    nbest = beam_search_nbest(model, one_src(), beam=3, lenpen=0.6)[0]
    assert len(nbest) >= 3
    assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
    for h in nbest:
        assert h.score == pytest.approx(h.logprob / lp(len(h.tokens) + 1, 0.6))
    assert len({tuple(h.tokens) for h in nbest}) == len(nbest)  # no duplicates


def test_bad_beam_size_is_a_user_error():
    with pytest.raises(CsanError, match="beam size must be >= 1, got 0"):
        beam_search(TableModel({}), one_src(), beam=0)


class TinyGRU(nn.Module):
    """A real seq2seq model: embedding encoder, GRU decoder with dot attention, and an EOS logit that
    grows with the target position past the source length (so lengths vary). State: {"h": (batch, dim),
    "step": int}."""

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def __init__(self, vocab: int = 13, dim: int = 8, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.src_emb = nn.Embedding(vocab, dim)
        self.tgt_emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(2 * dim, vocab)
        with torch.no_grad():
            self.out.weight.mul_(2.0)  # peaked distributions

    def encode(self, src: Tensor) -> EncoderOutput:
        return EncoderOutput(out=torch.tanh(self.src_emb(src)), padding_mask=src == PAD)

    def _h0(self, enc: EncoderOutput) -> Tensor:
        keep = (~enc.padding_mask).unsqueeze(-1).float()
        return (enc.out * keep).sum(1) / keep.sum(1)  # (batch, dim)

    def _logits(self, h: Tensor, enc: EncoderOutput, positions: Tensor) -> Tensor:
        att = (h @ enc.out.transpose(1, 2)).masked_fill(enc.padding_mask.unsqueeze(1), -torch.inf)
        ctx = att.softmax(-1) @ enc.out  # (batch, tgt, dim)
        logits = self.out(torch.cat([h, ctx], dim=-1))
        src_len = (~enc.padding_mask).sum(1, keepdim=True)  # (batch, 1)
        eos_bonus = torch.zeros_like(logits)
        eos_bonus[..., EOS] = positions.unsqueeze(0) - src_len + 1.0  # (batch, tgt)
        return logits + eos_bonus

    def decode(self, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
        h, _ = self.rnn(self.tgt_emb(tgt_in), self._h0(enc).unsqueeze(0).contiguous())
        return self._logits(h, enc, torch.arange(tgt_in.size(1)))

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, state: dict[str, Any]) -> Tensor:
        h_prev, step = state.get("h", self._h0(enc)), state.get("step", 0)
        h, _ = self.rnn(self.tgt_emb(tokens), h_prev.unsqueeze(0).contiguous())
        state["h"], state["step"] = h[:, -1], step + 1
        return self._logits(h, enc, torch.tensor([step]))[:, -1]


def random_src(seed: int, batch: int = 5, vocab: int = 13) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 7, (batch,), generator=gen).tolist()
    src = torch.full((batch, max(lengths) + 1), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(3, vocab, (n,), generator=gen)
        src[i, n] = EOS
    return src


def test_cached_steps_equal_full_pass_and_follow_reorder():
    model = TinyGRU().eval()
    src = random_src(1, batch=3)
    tgt = torch.cat([torch.full((3, 1), BOS), torch.randint(3, 13, (3, 4))], dim=1)
    enc = model.encode(src)
    full = model.decode(tgt, enc)
    state: dict[str, Any] = {}
    steps = [model.decode_step(tgt[:, t : t + 1], enc, state) for t in range(2)]
    perm = torch.tensor([2, 0, 0])
    state = reorder_state(state, perm)
    enc_p = enc.reorder(perm)
    steps_p = [model.decode_step(tgt[perm, t : t + 1], enc_p, state) for t in range(2, 5)]
    torch.testing.assert_close(torch.stack(steps, 1), full[:, :2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.stack(steps_p, 1), full[perm, 2:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_beam_one_without_penalty_is_greedy(seed):
    model = TinyGRU(seed=seed).eval()
    src = random_src(seed)
    assert beam_search(model, src, beam=1, lenpen=0.0, max_len_b=5) == greedy_search(
        model, src, max_len_b=5
    )


@pytest.mark.parametrize("seed", range(3))
def test_batch_equals_each_sentence_alone(seed):
    model = TinyGRU(seed=seed).eval()
    src = random_src(10 + seed)
    alone = [src[i : i + 1, : int((src[i] != PAD).sum())] for i in range(src.size(0))]
    batched_beam = beam_search(model, src, beam=3, max_len_b=5)
    batched_greedy = greedy_search(model, src, max_len_b=5)
    assert batched_beam == [beam_search(model, s, beam=3, max_len_b=5)[0] for s in alone]
    assert batched_greedy == [greedy_search(model, s, max_len_b=5)[0] for s in alone]


def test_hypothesis_logprob_is_the_models_teacher_forced_logprob():
    model = TinyGRU(seed=5).eval()
    src = random_src(5, batch=3)
    for i, hyps in enumerate(beam_search_nbest(model, src, beam=3, max_len_b=4)):
        assert hyps and all(h.tokens for h in hyps)  # min_len=1: never empty
        enc = model.encode(src[i : i + 1])
        for h in hyps:
            tgt = torch.tensor([[BOS, *h.tokens, EOS]])
            lprobs = model.decode(tgt[:, :-1], enc).log_softmax(-1)
            expected = lprobs[0].gather(1, tgt[0, 1:].unsqueeze(1)).sum().item()
            assert h.logprob == pytest.approx(expected, abs=1e-4)
