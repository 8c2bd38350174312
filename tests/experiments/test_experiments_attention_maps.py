"""``attention_weights`` reproduces ``forward``; CSAN weights vanish outside the windows; the plot."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import csan.attention
from csan.attention.base import merge_heads
from csan.checkpoint import save_model_dir
from csan.cli import main
from csan.config import load_config
from csan.data import SubwordModel
from csan.decoding import load_model
from csan.errors import CsanError
from csan.experiments.attention_maps import plot_attention, sentence_attention
from csan.models import build_model

CASES = [
    ("vanilla", {}),
    ("vanilla", {"causal": True}),
    ("csan1d", {"window": 3}),
    ("csan1d", {"window": 3, "causal": True}),
    ("csan2d", {"window": 3, "head_window": 3}),
    ("csan2d", {"window": 5, "head_window": 3, "head_boundary": "clip"}),
    ("bi_direct", {}),
    ("rel_pos", {"max_relative": 2}),
    ("rel_pos", {"max_relative": 2, "causal": True}),
    ("neighbor", {}),
    ("local_hard", {"window": 3}),
    ("local_soft", {}),
    ("cnn", {}),
    ("context", {"context": "global"}),
    ("context", {"context": "deep_global+deep", "layer": 2}),
    ("context", {"context": "deep", "layer": 2, "causal": True}),
    ("conv_qkv", {"kernels": "1,3"}),
    ("conv_qkv", {"kernels": "1,3d2", "causal": True}),
]


def padded_input(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, 5:] = True
    return torch.randn(2, 7, 16), pad


def rebuild(
    attn: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor | None, **kw
) -> torch.Tensor:
    """The layer's output recomputed from its :meth:`attention_weights` and its own values."""
    w = attn.attention_weights(x, mask, **kw)  # (batch, heads, time, time)
    name = attn.name
    if name == "cnn":
        c = attn.convolve(x, mask)
        return attn.out_proj(merge_heads(w @ attn.project(c)[2])) + (c - x)
    if name == "conv_qkv":
        v = attn.project(x if mask is None else x.masked_fill(mask[..., None], 0.0))[2]
    else:
        v = attn.project(x)[2]  # (batch, heads, time, d_h)
    heads_out = w @ v
    if name == "rel_pos":  # sum_j a_ij aV_{r_ij}
        t = x.size(1)
        buckets = csan.attention.rel_pos.relative_buckets(t, t, attn.max_relative, x.device)
        heads_out = heads_out + torch.einsum("bhij,ijd->bhid", w, attn.rel_v[buckets])
    return attn.out_proj(merge_heads(heads_out))


@pytest.mark.parametrize(("name", "options"), CASES)
def test_weights_reproduce_forward(name: str, options: dict) -> None:
    attn = csan.attention.build(name, d_model=16, heads=4, **options).eval()
    x, pad = padded_input()
    mask = None if options.get("causal") else pad
    kw = {}
    if name == "context" and "layer" in options:
        kw["history"] = [torch.randn_like(x), x]
    expected = attn(x, mask, **kw)
    if name == "csan2d":
        w = attn.attention_weights(x, mask, per_key_head=True)  # (b, h, t, h, t)
        _, _, v = attn.project(x)
        got = attn.out_proj(merge_heads(torch.einsum("bhigj,bgjd->bhid", w, v)))
    else:
        got = rebuild(attn, x, mask, **kw)
    real = torch.ones_like(pad) if mask is None else ~pad
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("name", "options"), CASES)
def test_weights_are_distributions_over_allowed_keys(name: str, options: dict) -> None:
    attn = csan.attention.build(name, d_model=16, heads=4, **options).train()  # dropout is off
    x, pad = padded_input(1)
    kw = {"history": [torch.randn_like(x), x]} if name == "context" and "layer" in options else {}
    w = attn.attention_weights(x, pad, **kw)
    assert w.shape == (2, 4, 7, 7)
    assert w[1, :, :, 5:].abs().max() == 0  # padding keys
    torch.testing.assert_close(w[0].sum(-1), torch.ones(4, 7))
    torch.testing.assert_close(w[1, :, :5].sum(-1), torch.ones(4, 5))
    if options.get("causal"):
        assert w.triu(1).abs().max() == 0


def test_block_weights_stay_inside_each_block() -> None:
    attn = csan.attention.build("block", d_model=16, heads=4, block_size=3)
    x, pad = padded_input()
    w = attn.attention_weights(x, pad)  # (2, 4, 7, 7): blocks {0,1,2} {3,4,5} {6}
    blk = torch.arange(7) // 3
    assert w[:, :, blk[:, None] != blk[None, :]].abs().max() == 0
    assert w[1, :, :, 5:].abs().max() == 0  # padding keys
    torch.testing.assert_close(w[0].sum(-1), torch.ones(4, 7))
    # one block of the whole sentence: the same weights as vanilla attention with these projections
    whole = csan.attention.build("block", d_model=16, heads=4, block_size=7)
    vanilla = csan.attention.build("vanilla", d_model=16, heads=4)
    vanilla.qkv.load_state_dict(whole.qkv.state_dict())
    torch.testing.assert_close(whole.attention_weights(x, pad), vanilla.attention_weights(x, pad))


def test_csan1d_weights_are_zero_outside_the_window() -> None:
    attn = csan.attention.build("csan1d", d_model=16, heads=4, window=5)
    x, pad = padded_input()
    w = attn.attention_weights(x, pad)
    i, j = torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij")
    assert w[:, :, (i - j).abs() > 2].abs().max() == 0
    assert w[1, :, :, 5:].abs().max() == 0  # padding keys
    torch.testing.assert_close(w[0].sum(-1), torch.ones(4, 7))


def test_csan2d_weights_are_zero_outside_the_head_window() -> None:
    attn = csan.attention.build("csan2d", d_model=32, heads=8, window=3, head_window=3)
    x = torch.randn(1, 6, 32)
    w = attn.attention_weights(x, per_key_head=True)  # (1, h, t, h, t)
    mass = w.sum(dim=(2, 4))[0]  # (query head, key head)
    for h in range(8):
        for g in range(8):
            assert (mass[h, g] > 0) == (min((h - g) % 8, (g - h) % 8) <= 1)
    torch.testing.assert_close(attn.attention_weights(x), w.sum(dim=3))


def test_variants_without_weights_say_so() -> None:
    class Opaque(csan.attention.base.SelfAttention):
        name = "opaque"

    with pytest.raises(NotImplementedError, match="'opaque' does not expose"):
        Opaque(d_model=16, heads=4).attention_weights(torch.randn(1, 3, 16))


def untrained_model_dir(folder: Path, overrides: list[str]) -> Path:
    """An untrained ``tiny`` model with ``overrides``, saved in ``folder`` (a 300-piece vocabulary)."""
    text = ["a dog runs on the grass .", "ein Hund läuft auf dem Gras .", "two men play ."] * 20
    spm = SubwordModel.train(text, vocab_size=300)
    cfg = load_config("tiny", overrides)
    torch.manual_seed(0)
    save_model_dir(folder, build_model(cfg.model, len(spm)), cfg, spm.to_bytes())
    return folder


@pytest.fixture(scope="module")
def csan_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Encoder layer 0 csan1d (M=3), layer 1 csan2d (M=3, N=3)."""
    overrides = [
        "model.encoder_attention=csan1d,csan2d",
        "model.attention_options.csan1d.window=3",
        "model.attention_options.csan2d.window=3",
    ]
    return untrained_model_dir(tmp_path_factory.mktemp("csan-model"), overrides)


def test_sentence_attention_shows_the_window(csan_model_dir: Path, tmp_path: Path) -> None:
    loaded = load_model(csan_model_dir)
    amap = sentence_attention(loaded, "a dog runs on the grass .", layer=0)
    t = len(amap.queries)
    assert amap.weights.shape == (4, t, t) and amap.queries[-1] == "</s>"
    assert amap.variant == "csan1d (M=3)"
    i, j = torch.meshgrid(torch.arange(t), torch.arange(t), indexing="ij")
    assert amap.weights[:, (i - j).abs() > 1].abs().max() == 0
    assert amap.weights[:, (i - j).abs() <= 1].min() > 0
    png = plot_attention(amap, tmp_path / "csan1d.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    split = sentence_attention(loaded, "a dog runs .", layer=1)
    assert split.weights.dim() == 4 and split.variant == "csan2d (M=3, N=3)"
    plot_attention(split, tmp_path / "csan2d.png")
    decoder = sentence_attention(loaded, "a dog", side="decoder", target="ein Hund")
    assert decoder.queries[0] == "<s>" and torch.triu(decoder.weights, 1).abs().max() == 0


def test_sentence_attention_passes_the_history_to_deep_context(tmp_path: Path) -> None:
    overrides = [
        "model.encoder_attention=context",
        "model.decoder_attention=context",
        "model.attention_options.context.context=deep_global+deep",
    ]
    untrained_model_dir(tmp_path, overrides)
    loaded = load_model(tmp_path)
    for side, target in (("encoder", None), ("decoder", "ein Hund")):
        amap = sentence_attention(loaded, "a dog runs .", layer=1, side=side, target=target)
        assert amap.variant == "context (deep_global+deep context)"
        torch.testing.assert_close(amap.weights.sum(-1), torch.ones(amap.weights.shape[:2]))


def test_sentence_attention_errors(csan_model_dir: Path) -> None:
    loaded = load_model(csan_model_dir)
    with pytest.raises(CsanError, match="--layer 2: the encoder has layers 0-1"):
        sentence_attention(loaded, "a dog", layer=2)
    with pytest.raises(CsanError, match="--side must be encoder or decoder"):
        sentence_attention(loaded, "a dog", side="cross")


def test_cli_plot_attention(csan_model_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "map.png"
    argv = ["plot", "attention", "--model", str(csan_model_dir), "--sentence", "a dog runs ."]
    assert main([*argv, "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert "encoder layer 0: csan1d (M=3)" in capsys.readouterr().out
