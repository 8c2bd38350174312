"""ConvS2S: shapes, causality, cached decoding, padding invariance, the SPEC's attention, presets."""

from __future__ import annotations

import math

import pytest
import torch

from csan.config import ConvS2SConfig, ModelConfig, load_config
from csan.errors import CsanError
from csan.models import build_model
from csan.models.base import EncoderOutput, reorder_state
from csan.models.convs2s import ConvS2S, multi_step_attention

PAD, BOS, EOS = 0, 2, 3
VOCAB = 23
ATOL = 1e-5


def make_model(*, kernel: int = 3, share: bool = True, layers: int = 2) -> ConvS2S:
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="convs2s",
        dropout=0.1,
        max_positions=32,
        share_embeddings=share,
        convs2s=ConvS2SConfig(
            embed_dim=12, channels=16, encoder_layers=layers, decoder_layers=layers, kernel=kernel
        ),
    )
    return ConvS2S(cfg, VOCAB).eval()


def random_tokens(batch: int, length: int, lengths: list[int] | None = None) -> torch.Tensor:
    tokens = torch.randint(4, VOCAB, (batch, length))
    for row, n in enumerate(lengths or []):
        tokens[row, n:] = PAD
    return tokens


def test_shapes_and_encoder_output() -> None:
    model = make_model()
    src = random_tokens(3, 7, [7, 4, 1])
    tgt = random_tokens(3, 5)
    enc = model.encode(src)
    assert enc.out.shape == enc.embedded.shape == (3, 7, 12)
    assert enc.padding_mask.tolist()[1] == [False] * 4 + [True] * 3
    assert enc.out[1, 4:].abs().sum() == 0 and enc.embedded[1, 4:].abs().sum() == 0
    assert model(src, tgt).shape == (3, 5, VOCAB)
    assert (model.pad_id, model.bos_id, model.eos_id, model.vocab_size) == (PAD, BOS, EOS, VOCAB)


def test_attention_matches_the_spec_formula_by_loops() -> None:
    torch.manual_seed(1)
    d, z, e = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    got = multi_step_attention(d, z, z + e, pad)
    for b in range(2):
        real = [j for j in range(5) if not pad[b, j]]
        for i in range(3):
            logits = torch.stack([d[b, i] @ z[b, j] for j in real])
            a = torch.softmax(logits, dim=0)
            want = sum(a[n] * (z[b, j] + e[b, j]) for n, j in enumerate(real))
            torch.testing.assert_close(got[b, i], want, atol=ATOL, rtol=0)
    all_pad = multi_step_attention(d[:1], z[:1], z[:1], torch.ones(1, 5, dtype=torch.bool))
    assert torch.equal(all_pad, torch.zeros(1, 3, 4))


@pytest.mark.parametrize("kernel", [1, 3, 5])
def test_decoder_is_causal(kernel: int) -> None:
    model = make_model(kernel=kernel)
    src = random_tokens(2, 6, [6, 3])
    tgt = random_tokens(2, 8)
    changed = tgt.clone()
    changed[:, 5:] = random_tokens(2, 3)
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], atol=ATOL, rtol=0)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("kernel", [1, 3, 5])
def test_decode_step_equals_full_pass_also_after_reorder(kernel: int) -> None:
    model = make_model(kernel=kernel)
    src = random_tokens(3, 6, [6, 2, 4])
    tgt = random_tokens(3, 7)
    tgt[:, 0] = BOS
    perm = torch.tensor([2, 0, 0])
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc)
        full_perm = model.decode(tgt[perm], enc.reorder(perm))
        state: dict = {}
        for t in range(4):
            step = model.decode_step(tgt[:, t : t + 1], enc, state)
            torch.testing.assert_close(step, full[:, t], atol=ATOL, rtol=0)
        assert state["step"] == 4
        assert state["layers"][0]["conv_in"].shape == (3, kernel - 1, 16)
        # Beam search reorders rows: the cache and the encoder output follow the permutation.
        enc_p, state_p = enc.reorder(perm), reorder_state(state, perm)
        for t in range(4, 7):
            step = model.decode_step(tgt[perm, t : t + 1], enc_p, state_p)
            torch.testing.assert_close(step, full_perm[:, t], atol=ATOL, rtol=0)


def test_source_padding_changes_nothing() -> None:
    model = make_model()
    src = random_tokens(2, 5, [5, 3])
    tgt = random_tokens(2, 4)
    padded = torch.cat([src, torch.full((2, 6), PAD)], dim=1)
    with torch.no_grad():
        enc = model.encode(src)
        ref = model.decode(tgt, enc)
        torch.testing.assert_close(model(padded, tgt), ref, atol=ATOL, rtol=0)
        # Whatever the encoder output holds at padding positions is never read.
        noisy = EncoderOutput(
            out=enc.out.masked_fill(enc.padding_mask[..., None], 7.0),
            padding_mask=enc.padding_mask,
            embedded=enc.embedded.masked_fill(enc.padding_mask[..., None], -3.0),
        )
        torch.testing.assert_close(model.decode(tgt, noisy), ref, atol=ATOL, rtol=0)
        # The second sentence alone gives the same logits as inside the batch.
        torch.testing.assert_close(model(src[1:, :3], tgt[1:]), ref[1:], atol=ATOL, rtol=0)


def test_target_padding_does_not_touch_real_positions() -> None:
    model = make_model()
    src = random_tokens(2, 5, [5, 3])
    tgt = random_tokens(2, 4)
    padded = torch.cat([tgt, torch.full((2, 3), PAD)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(src, padded)[:, :4], model(src, tgt), atol=ATOL, rtol=0)


@pytest.mark.parametrize("share", [True, False])
def test_gradients_are_finite_and_reach_every_parameter(share: bool) -> None:
    model = make_model(share=share).train()
    src = random_tokens(3, 6, [6, 2, 1])
    tgt = random_tokens(3, 5, [5, 3, 1])
    logits = model(src, tgt)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name
    assert (model.output_proj is None) == share
    assert (model.tgt_embed is model.src_embed) == share


def test_sqrt_half_residuals_keep_activations_moderate() -> None:
    model = make_model(layers=6)
    src, tgt = random_tokens(4, 10), random_tokens(4, 10)
    with torch.no_grad():
        enc = model.encode(src)
        logits = model.decode(tgt, enc)
    assert enc.out.std() < 10 and math.isfinite(float(logits.std())) and logits.std() < 10


def test_bad_configs_say_what_is_wrong() -> None:
    cfg = ModelConfig(arch="convs2s", convs2s=ConvS2SConfig(kernel=4))
    with pytest.raises(CsanError, match=r"model\.convs2s\.kernel must be odd .* got 4"):
        build_model(cfg, VOCAB)
    with pytest.raises(ValueError, match=r"model\.convs2s\.channels must be >= 1, got 0"):
        ConvS2S(ModelConfig(arch="convs2s", convs2s=ConvS2SConfig(channels=0)), VOCAB)
    model = make_model()
    with pytest.raises(ValueError, match=r"source of 33 tokens exceeds model\.max_positions=32"):
        model.encode(random_tokens(1, 33))
    enc = model.encode(random_tokens(1, 3))
    state = {"step": 32}
    with pytest.raises(ValueError, match=r"target of 33 tokens exceeds model\.max_positions=32"):
        model.decode_step(torch.tensor([[BOS]]), enc, state)


@pytest.mark.parametrize("preset", ["convs2s-tiny", "convs2s-multi30k"])
def test_presets_build(preset: str) -> None:
    cfg = load_config(preset)
    assert cfg.model.arch == "convs2s"
    model = build_model(cfg.model, 100)
    assert isinstance(model, ConvS2S)
    src, tgt = random_tokens(2, 5, [5, 2]) % 100, random_tokens(2, 3) % 100
    with torch.no_grad():
        assert model.eval()(src, tgt).shape == (2, 3, 100)
