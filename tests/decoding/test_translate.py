"""translate_lines: line count, order, empty lines, truncation, batching, with a copying toy model."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from csan.data import cut_batches
from csan.decoding.translate import iter_translate, translate_lines
from csan.errors import CsanError
from csan.models.base import EncoderOutput
from csan.textio import normalize

PAD, BOS, EOS = 0, 1, 2
ALPHABET = "abcdefghijklmnopqrstuvwxyz "


class CharCodec:
    """A character-level stand-in for the SentencePiece wrapper: id = 3 + position in ALPHABET."""

    def encode(self, lines: list[str]) -> list[list[int]]:
        return [[3 + ALPHABET.index(ch) for ch in line] for line in lines]

    def decode(self, ids: list[list[int]]) -> list[str]:
        return ["".join(ALPHABET[i - 3] for i in seq) for seq in ids]


class CopyModel(nn.Module):
    """Emits its source token by token (EOS included); counts the sentences it encodes."""

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def __init__(self, max_positions: int | None = None) -> None:
        super().__init__()
        if max_positions is not None:
            self.max_positions = max_positions
        self.encoded: list[list[int]] = []

    def encode(self, src: Tensor) -> EncoderOutput:
        self.encoded += [row[row != PAD].tolist() for row in src]
        return EncoderOutput(out=src.float().unsqueeze(-1), padding_mask=src == PAD)

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, state: dict[str, Any]) -> Tensor:
        step = state.get("step", 0)
        state["step"] = step + 1
        src = enc.out[..., 0].long()
        target = src[:, step] if step < src.size(1) else torch.full((src.size(0),), EOS)
        logits = torch.full((src.size(0), 3 + len(ALPHABET)), -10.0)
        logits[torch.arange(src.size(0)), target] = 10.0
        return logits


LINES = [
    "abc",
    "",
    "   ",
    "\u00a0\t\u3000",
    "hello  world",
    "z",
    "a\x07b\x00c",
    "long sentence here",
]
EXPECTED = ["abc", "", "", "", "hello world", "z", "abc", "long sentence here"]


@pytest.mark.parametrize("beam", [1, 4])
def test_copy_keeps_count_order_and_empty_lines(beam):
    model = CopyModel()
    out = translate_lines(model, CharCodec(), LINES, beam=beam, max_tokens=12)
    assert out == EXPECTED
    assert len(model.encoded) == 5  # empty and whitespace-only lines never reach the model
    assert all(seq[-1] == EOS for seq in model.encoded)  # EOS appended to every source


def test_only_empty_lines_never_run_the_model():
    model = CopyModel()
    assert translate_lines(model, CharCodec(), ["", " ", "\t"]) == ["", "", ""]
    assert model.encoded == []


def test_batching_does_not_change_results():
    lines = ["ab", "abcdefgh", "q", "hello", "xyz", "mnop"]
    one_batch = translate_lines(CopyModel(), CharCodec(), lines, max_tokens=10_000)
    tiny_batches = translate_lines(CopyModel(), CharCodec(), lines, max_tokens=1)
    assert one_batch == tiny_batches == lines


def test_truncation_to_max_positions_warns(caplog):
    model = CopyModel(max_positions=5)
    with caplog.at_level(logging.WARNING, logger="csan"):
        out = translate_lines(model, CharCodec(), ["abc", "abcdefg", "", "abcdefghij"], beam=2)
    assert out == ["abc", "abcd", "", "abcd"]
    assert (
        "2 source line(s) longer than 4 subwords truncated (first: line 2, 7 subwords)"
        in caplog.text
    )


def test_explicit_max_src_len_and_no_warning_when_short(caplog):
    with caplog.at_level(logging.WARNING, logger="csan"):
        assert translate_lines(CopyModel(), CharCodec(), ["abcdef"], max_src_len=2) == ["ab"]
        assert "line 1" in caplog.text
        caplog.clear()
        translate_lines(CopyModel(), CharCodec(), ["ab"], max_src_len=2)
    assert caplog.text == ""


def test_training_mode_restored():
    model = CopyModel().train()
    translate_lines(model, CharCodec(), ["ab"])
    assert model.training


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beam": 0}, "beam size must be >= 1, got 0"),
        ({"max_tokens": 0}, "max_tokens must be >= 1, got 0"),
    ],
)
def test_bad_options_are_user_errors(kwargs, message):
    with pytest.raises(CsanError, match=message):
        translate_lines(CopyModel(), CharCodec(), ["ab"], **kwargs)


def test_iter_translate_streams_in_order():
    lines = ["ab", "", "cd", "e", "  f  "]
    out = list(iter_translate(CopyModel(), CharCodec(), iter(lines), chunk_size=2, beam=1))
    assert out == ["ab", "", "cd", "e", "f"]


def test_normalize_drops_controls_and_collapses_whitespace():
    assert normalize(" a\u2028b\u00a0\u00a0c\x1b\x7f ") == "a b c"
    assert normalize("\x00\x01") == ""


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 30), max_size=20), st.integers(1, 60))
def test_cut_batches_covers_every_index_within_budget(lengths, budget):
    batches = cut_batches(sorted(range(len(lengths)), key=lambda i: -lengths[i]), lengths, budget)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= budget
