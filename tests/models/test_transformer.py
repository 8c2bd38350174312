"""Transformer invariants: cached decoding equals full recomputation (also after beam reordering), no
decoder position reads a later token, source padding changes nothing, beam 1 equals greedy, and
misconfigurations are clear errors."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import csan.attention
from csan.config import ModelConfig
from csan.decoding.beam import beam_search, greedy_search
from csan.errors import CsanError
from csan.models import EncoderOutput, build_model, reorder_state

PAD, BOS, EOS = 0, 2, 3
VOCAB = 41
OPTIONS = {
    "csan1d": {"window": 3},
    "csan2d": {"window": 3, "head_window": 3},
    "local_hard": {"window": 3},
    "block": {"block_size": 3},
    "rel_pos": {"max_relative": 3},
}
ALL_SELF = csan.attention.available()
CAUSAL_SELF = [name for name in ALL_SELF if csan.attention.registry._SELF[name].supports_causal]


def small_model(**fields: Any) -> torch.nn.Module:
    """A 2+2-layer Transformer, d_model 32, 4 heads, random init, eval mode (dropout off)."""
    cfg = ModelConfig(
        d_model=32,
        heads=4,
        ffn_dim=48,
        encoder_layers=2,
        decoder_layers=2,
        dropout=0.0,
        max_positions=40,
        attention_options=OPTIONS,
        **fields,
    )
    torch.manual_seed(0)
    model = build_model(cfg, VOCAB).eval()
    # random init leaves biases at zero and layer norms at identity: perturb every parameter so
    # that no path is trivially silent
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # the padding embedding too: masks must do the work
    return model


def sources(lengths: list[int], seed: int = 1) -> torch.Tensor:
    """Right-padded source rows of the given lengths (EOS included)."""
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    src = torch.full((len(lengths), width), PAD)
    for row, n in enumerate(lengths):
        src[row, : n - 1] = torch.randint(4, VOCAB, (n - 1,), generator=gen)
        src[row, n - 1] = EOS
    return src


def targets(batch: int, length: int, seed: int = 2) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    tgt = torch.randint(4, VOCAB, (batch, length), generator=gen)
    tgt[:, 0] = BOS
    return tgt


def decode_incrementally(
    model: torch.nn.Module, tgt_in: torch.Tensor, enc: EncoderOutput, state: dict[str, Any]
) -> torch.Tensor:
    steps = [model.decode_step(tgt_in[:, t : t + 1], enc, state) for t in range(tgt_in.size(1))]
    return torch.stack(steps, dim=1)


# -- incremental decoding -------------------------------------------------------------------------
@pytest.mark.parametrize("cross", csan.attention.available_cross())
@pytest.mark.parametrize("variant", CAUSAL_SELF)
@torch.no_grad()
def test_cached_decode_step_equals_full_decode(variant: str, cross: str) -> None:
    model = small_model(decoder_attention=variant, cross_attention=cross)
    src = sources([7, 3, 5])
    tgt_in = targets(3, 9)
    enc = model.encode(src)
    full = model.decode(tgt_in, enc)  # (batch, tgt, vocab)
    cached = decode_incrementally(model, tgt_in, enc, {})
    torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", ["vanilla", "csan2d", "conv_qkv", "context"])
@torch.no_grad()
def test_cache_follows_reorder_state_and_encoder_reorder(variant: str) -> None:
    model = small_model(decoder_attention=variant)
    src = sources([6, 4, 2])
    tgt_in = targets(3, 8)
    enc = model.encode(src)
    state: dict[str, Any] = {}
    first = decode_incrementally(model, tgt_in[:, :4], enc, state)
    # beam search both permutes and duplicates rows
    index = torch.tensor([2, 0, 0, 1])
    state = reorder_state(state, index)
    enc_r = enc.reorder(index)
    rest = decode_incrementally(model, tgt_in[index, 4:], enc_r, state)
    full = model.decode(tgt_in[index], model.encode(src[index]))
    torch.testing.assert_close(first[index], full[:, :4], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rest, full[:, 4:], atol=1e-5, rtol=1e-5)


def test_encoder_output_reorder_selects_rows() -> None:
    enc = EncoderOutput(out=torch.arange(6.0).view(3, 2, 1), padding_mask=torch.zeros(3, 2).bool())
    out = enc.reorder(torch.tensor([2, 2, 0]))
    assert out.out[:, 0, 0].tolist() == [4.0, 4.0, 0.0]
    assert out.padding_mask.shape == (3, 2) and out.embedded is None


# -- causality ------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", CAUSAL_SELF)
@torch.no_grad()
def test_no_decoder_position_reads_a_later_token(variant: str) -> None:
    model = small_model(decoder_attention=variant)
    src = sources([5, 7])
    enc = model.encode(src)
    tgt_in = targets(2, 10)
    full = model.decode(tgt_in, enc)
    for t in (1, 4, 9):
        changed = tgt_in.clone()
        changed[:, t:] = targets(2, 10 - t, seed=t + 10)[:, :]
        changed[:, t] = (tgt_in[:, t] + 1 - 4) % (VOCAB - 4) + 4  # surely different at t
        out = model.decode(changed, enc)
        torch.testing.assert_close(out[:, :t], full[:, :t], atol=1e-6, rtol=1e-6)
        assert not torch.allclose(out[:, t], full[:, t]), "the changed token had no effect"


@torch.no_grad()
def test_target_padding_does_not_reach_real_positions() -> None:
    model = small_model(decoder_attention="csan1d")
    enc = model.encode(sources([5, 5]))
    tgt_in = targets(2, 8)
    padded = tgt_in.clone()
    padded[1, 5:] = PAD
    other = tgt_in.clone()
    other[1, 5:] = torch.tensor([7, 8, 9])
    a, b = model.decode(padded, enc), model.decode(other, enc)
    torch.testing.assert_close(a[1, :5], b[1, :5], atol=1e-6, rtol=1e-6)


# -- source padding -------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ALL_SELF)
@torch.no_grad()
def test_appending_source_padding_changes_nothing(variant: str) -> None:
    model = small_model(encoder_attention=variant)
    src = sources([6, 3, 4])
    tgt_in = targets(3, 5)
    enc = model.encode(src)
    longer = torch.cat([src, torch.full((3, 5), PAD)], dim=1)
    enc_long = model.encode(longer)
    real = src.ne(PAD)
    torch.testing.assert_close(
        enc_long.out[:, : src.size(1)][real], enc.out[real], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        model.decode(tgt_in, enc_long), model.decode(tgt_in, enc), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("cross", csan.attention.available_cross())
@torch.no_grad()
def test_decoder_ignores_encoder_states_at_padding(cross: str) -> None:
    model = small_model(cross_attention=cross)
    src = sources([6, 2, 4])
    tgt_in = targets(3, 5)
    enc = model.encode(src)
    noisy = enc.out.clone()
    noisy[enc.padding_mask] = torch.randn(int(enc.padding_mask.sum()), 32) * 100
    enc_noisy = EncoderOutput(out=noisy, padding_mask=enc.padding_mask)
    torch.testing.assert_close(
        model.decode(tgt_in, enc_noisy), model.decode(tgt_in, enc), atol=1e-5, rtol=1e-5
    )
    state_a: dict[str, Any] = {}
    state_b: dict[str, Any] = {}
    torch.testing.assert_close(
        decode_incrementally(model, tgt_in, enc_noisy, state_a),
        decode_incrementally(model, tgt_in, enc, state_b),
        atol=1e-5,
        rtol=1e-5,
    )


@torch.no_grad()
def test_rows_of_a_batch_do_not_interact() -> None:
    model = small_model(encoder_attention="csan2d", decoder_attention="csan1d")
    src = sources([6, 3, 5])
    tgt_in = targets(3, 6)
    batched = model(src, tgt_in)
    for row in range(3):
        n = int(src[row].ne(PAD).sum())
        alone = model(src[row : row + 1, :n], tgt_in[row : row + 1])
        torch.testing.assert_close(batched[row : row + 1], alone, atol=1e-5, rtol=1e-5)


# -- search ---------------------------------------------------------------------------------------
def search_model(variant: str) -> torch.nn.Module:
    """An untied random model with large weights: varied tokens, and EOS often enough to end early."""
    model = small_model(decoder_attention=variant, share_embeddings=False)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        model.output_proj.weight[EOS] *= 2.0
    return model


@pytest.mark.parametrize("variant", ["vanilla", "csan2d"])
def test_beam_one_without_length_penalty_equals_greedy(variant: str) -> None:
    model = search_model(variant)
    src = sources([7, 3, 5, 6, 2, 9, 4, 8], seed=5)
    greedy = greedy_search(model, src, max_len_a=1.0, max_len_b=4)
    beam = beam_search(model, src, beam=1, lenpen=0.0, max_len_a=1.0, max_len_b=4)
    assert beam == greedy
    # the case is not trivial: some stop early, tokens vary, and a wider beam finds other outputs
    limits = [int(n) + 4 for n in src.ne(PAD).sum(1)]
    assert any(len(g) < n for g, n in zip(greedy, limits))
    assert len({tok for g in greedy for tok in g}) >= 3
    assert beam_search(model, src, beam=4, lenpen=0.0, max_len_a=1.0, max_len_b=4) != greedy


@torch.no_grad()
def test_greedy_tokens_are_the_argmax_of_a_full_decode() -> None:
    model = search_model("csan1d")
    src = sources([7, 4, 5], seed=6)
    out = greedy_search(model, src, max_len_a=1.0, max_len_b=3)
    for row, tokens in enumerate(out):
        n = int(src[row].ne(PAD).sum())
        tgt_in = torch.tensor([[BOS, *tokens]])
        logits = model(src[row : row + 1, :n], tgt_in)[0]
        logits[:, [PAD, BOS]] = -torch.inf
        logits[0, EOS] = -torch.inf  # min_len=1: no empty translation
        chosen = logits.argmax(-1).tolist()
        assert chosen[: len(tokens)] == tokens


# -- parameters and configuration errors ----------------------------------------------------------
@pytest.mark.parametrize("variant", ["csan1d", "csan2d"])
def test_csan_adds_zero_parameters(variant: str) -> None:
    def count(model: torch.nn.Module) -> int:
        return sum(p.numel() for p in model.parameters())

    vanilla = small_model()
    csan = small_model(encoder_attention=variant, decoder_attention=variant)
    assert count(csan) == count(vanilla)
    assert [n for n, _ in csan.named_parameters()] == [n for n, _ in vanilla.named_parameters()]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"encoder_attention": "csan1d", "attention_options": {"csan1d": {"window": 4}}},
            r"window must be a positive odd integer, got 4",
        ),
        (
            {"encoder_attention": "csan2d", "attention_options": {"csan2d": {"head_window": 5}}},
            r"head_window \(5\) must not exceed the number of heads \(4\)",
        ),
        ({"d_model": 30}, r"d_model \(30\) must be divisible by heads \(4\)"),
        ({"decoder_attention": "block"}, r"'block' cannot run causally \(in a decoder\)"),
        ({"encoder_attention": "nosuch"}, r"unknown self-attention 'nosuch'; available: .*csan2d"),
        ({"cross_attention": "csan1d"}, r"unknown cross-attention 'csan1d'"),
        (
            {"encoder_attention": "csan1d", "attention_options": {"csan1d": {"windw": 3}}},
            r"'csan1d' has no option 'windw'",
        ),
        ({"encoder_attention": "csan1d@5"}, r"model\.encoder_attention: layer 5 does not exist"),
        ({"decoder_attention": "a,b,c"}, r"model\.decoder_attention: 3 names given for 2 layers"),
        ({"arch": "rnn"}, r"model\.arch: unknown architecture 'rnn'"),
    ],
)
def test_build_model_misconfiguration_is_a_clear_csan_error(
    fields: dict[str, Any], expected: str
) -> None:
    base: dict[str, Any] = {
        "d_model": 32,
        "heads": 4,
        "ffn_dim": 48,
        "encoder_layers": 2,
        "decoder_layers": 2,
    }
    cfg = ModelConfig(**{**base, **fields})
    with pytest.raises(CsanError, match=expected) as info:
        build_model(cfg, VOCAB)
    assert "\n" not in str(info.value)


def test_too_long_input_is_an_error_naming_max_positions() -> None:
    model = small_model()
    with pytest.raises(ValueError, match=r"exceeds model\.max_positions=40"):
        model.encode(torch.ones(1, 41, dtype=torch.long))
