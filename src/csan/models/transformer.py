"""Transformer encoder-decoder (Vaswani et al. 2017) with a per-layer attention slot.

Shapes: tokens (batch, time) int64, padding ``pad_id`` on the right; states (batch, time, d_model);
logits (batch, time, vocab). The model knows nothing of training: no optimizer, no files.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import csan.attention as attention
from csan.config import ModelConfig
from csan.data.subwords import UNK_ID
from csan.models.base import EncoderOutput
from csan.models.layout import layer_variants
from csan.models.ops import dropout, relu

__all__ = ["Transformer", "sinusoidal_positions"]


def sinusoidal_positions(n: int, dim: int) -> Tensor:
    """(n, dim) sinusoidal position encodings (sin on even, cos on odd channels).

    Example:
        >>> sinusoidal_positions(4, 6).shape
        torch.Size([4, 6])
    """
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    inv = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(n, dim)
    table[:, 0::2] = torch.sin(pos * inv)
    table[:, 1::2] = torch.cos(pos * inv)[:, : dim // 2]
    return table


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.activation_dropout = activation_dropout

    def forward(self, x: Tensor) -> Tensor:
        h = relu(self.fc1(x))
        h = dropout(h, self.activation_dropout, self.training)
        return self.fc2(h)


def _variant_options(cfg: ModelConfig, name: str, layer: int | None = None) -> dict[str, Any]:
    """The options of variant ``name`` from the config; ``layer`` (1-based) for those that need it."""
    options = dict(cfg.attention_options.get(name, {}))
    if layer is not None and name in attention.available() and "layer" in attention.options(name):
        options.setdefault("layer", layer)
    return options


class Sublayer(nn.Module):
    """Residual wrapper with layer norm before (pre-norm) or after (post-norm) the sublayer."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = dropout
        self.pre_norm = pre_norm

    def inp(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def out(self, x: Tensor, y: Tensor) -> Tensor:
        x = x + dropout(y, self.dropout, self.training)
        return x if self.pre_norm else self.norm(x)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, variant: str, layer: int) -> None:
        super().__init__()
        self.self_attn = attention.build(
            variant,
            d_model=cfg.d_model,
            heads=cfg.heads,
            dropout=cfg.attention_dropout,
            **_variant_options(cfg, variant, layer),
        )
        self.uses_history = bool(getattr(self.self_attn, "uses_history", False))
        self.attn_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.ffn_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(self, x: Tensor, pad: Tensor | None, history: list[Tensor] | None) -> Tensor:
        kwargs = {"history": history} if self.uses_history else {}
        x = self.attn_block.out(x, self.self_attn(self.attn_block.inp(x), pad, **kwargs))
        return self.ffn_block.out(x, self.ffn(self.ffn_block.inp(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, variant: str, layer: int) -> None:
        super().__init__()
        self.self_attn = attention.build(
            variant,
            d_model=cfg.d_model,
            heads=cfg.heads,
            causal=True,
            dropout=cfg.attention_dropout,
            **_variant_options(cfg, variant, layer),
        )
        self.uses_history = bool(getattr(self.self_attn, "uses_history", False))
        self.cross_attn = attention.build_cross(
            cfg.cross_attention,
            d_model=cfg.d_model,
            heads=cfg.heads,
            dropout=cfg.attention_dropout,
            **_variant_options(cfg, cfg.cross_attention),
        )
        self.self_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.cross_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.ffn_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(
        self,
        x: Tensor,
        enc: EncoderOutput,
        history: list[Tensor] | None,
        state: dict[str, Any] | None,
    ) -> Tensor:
        kwargs: dict[str, Any] = {"history": history} if self.uses_history else {}
        if state is not None:
            kwargs["state"] = state.setdefault("self", {})
        x = self.self_block.out(x, self.self_attn(self.self_block.inp(x), None, **kwargs))
        cross_state = None if state is None else state.setdefault("cross", {})
        y = self.cross_attn(self.cross_block.inp(x), enc.out, enc.padding_mask, state=cross_state)
        x = self.cross_block.out(x, y)
        return self.ffn_block.out(x, self.ffn(self.ffn_block.inp(x)))


def _output_mask_loaded(module: nn.Module, _keys: Any) -> None:
    """After ``load_state_dict``: the output vocabulary's rows and index follow the loaded mask."""
    module._sync_output_vocab()


class Transformer(nn.Module):
    """Encoder-decoder Transformer; every layer's self-attention is a registry variant.

    Example:
        >>> from csan.config import ModelConfig
        >>> m = Transformer(ModelConfig(d_model=16, heads=2, ffn_dim=32, encoder_layers=1,
        ...                             decoder_layers=1), vocab_size=20)
        >>> src = torch.tensor([[5, 6, 3]]); tgt = torch.tensor([[2, 7]])
        >>> m(src, tgt).shape
        torch.Size([1, 2, 20])
    """

    def __init__(
        self,
        cfg: ModelConfig,
        vocab_size: int,
        *,
        pad_id: int = 0,
        bos_id: int = 2,
        eos_id: int = 3,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.vocab_size = vocab_size
        self.max_positions = cfg.max_positions
        d = cfg.d_model
        self.embed_scale = math.sqrt(d)
        self.src_embed = nn.Embedding(vocab_size, d, padding_idx=pad_id)
        nn.init.normal_(self.src_embed.weight, std=d**-0.5)
        nn.init.zeros_(self.src_embed.weight[pad_id])
        if cfg.share_embeddings:
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(vocab_size, d, padding_idx=pad_id)
            nn.init.normal_(self.tgt_embed.weight, std=d**-0.5)
            nn.init.zeros_(self.tgt_embed.weight[pad_id])
        self.register_buffer(
            "positions", sinusoidal_positions(cfg.max_positions, d), persistent=False
        )
        enc_names = layer_variants(
            cfg.encoder_attention, cfg.encoder_layers, "model.encoder_attention"
        )
        dec_names = layer_variants(
            cfg.decoder_attention, cfg.decoder_layers, "model.decoder_attention"
        )
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(cfg, n, i + 1) for i, n in enumerate(enc_names)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(cfg, n, i + 1) for i, n in enumerate(dec_names)
        )
        self.encoder_norm = nn.LayerNorm(d) if cfg.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if cfg.pre_norm else nn.Identity()
        self.output_proj = None if cfg.share_embeddings else nn.Linear(d, vocab_size, bias=False)
        if self.output_proj is not None:
            nn.init.normal_(self.output_proj.weight, std=d**-0.5)
        self.register_buffer("output_mask", None)  # the whole vocabulary
        if cfg.output_vocab == "target":
            # Which pieces the softmax covers (``set_output_vocab``; saved with the weights), and
            # from it the rows of the output product (``output_ids``) and where each vocabulary id
            # lands among them (``output_index``, ``<unk>``'s place for the pieces left out).
            self.register_buffer("output_mask", torch.ones(vocab_size, dtype=torch.bool))
            self.register_buffer("output_ids", torch.arange(vocab_size), persistent=False)
            self.register_buffer("output_index", torch.arange(vocab_size), persistent=False)
            self.register_load_state_dict_post_hook(_output_mask_loaded)

    # -- helpers -------------------------------------------------------------------------------
    def _embed(self, table: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        t = tokens.size(1)
        if offset + t > self.max_positions:
            raise ValueError(
                f"sequence of {offset + t} tokens exceeds model.max_positions={self.max_positions}"
            )
        x = table(tokens) * self.embed_scale + self.positions[offset : offset + t]
        return dropout(x, self.cfg.dropout, self.training)

    def set_output_vocab(self, ids: Tensor | list[int]) -> None:
        """With ``model.output_vocab=target``: the softmax covers the vocabulary ids ``ids`` (the
        pieces the training targets use), plus ``</s>`` and ``<unk>``, which stands in for the rest.

        Example:
            >>> from csan.config import ModelConfig
            >>> m = Transformer(ModelConfig(d_model=16, heads=2, ffn_dim=32, encoder_layers=1,
            ...                             decoder_layers=1, output_vocab="target"), vocab_size=20)
            >>> m.set_output_vocab([5, 7, 9])
            >>> m.output_ids.tolist()  # and 0, 2, 4: rows in multiples of 8
            [0, 1, 2, 3, 4, 5, 7, 9]
            >>> m.output_targets(torch.tensor([7, 3, 8])).tolist()  # 8 is left out: <unk>'s index
            [6, 3, 1]
            >>> h = torch.randn(2, 16)
            >>> m.project_output(h).shape, m.project(h).shape  # the product, and the whole vocabulary
            (torch.Size([2, 8]), torch.Size([2, 20]))
            >>> bool(m.project(h)[:, [6, 8, 10, 19]].isneginf().all())  # never predicted
            True
        """
        if self.output_mask is None:
            raise ValueError("set_output_vocab needs model.output_vocab=target")
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.output_mask.device)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            raise ValueError(f"output vocabulary ids must be in [0, {self.vocab_size})")
        mask = torch.zeros_like(self.output_mask)
        mask[ids] = True
        mask[[UNK_ID, self.eos_id]] = True
        # a multiple of 8 rows, the lowest ids left out filling it (<pad> and <s> first, which
        # decoding never picks): MKL ran 1,020 x 256 x 5,317 at 46 ms, x 5,320 at 30 ms (AVX2)
        short = -int(mask.sum()) % 8
        mask[(~mask).nonzero().squeeze(-1)[:short]] = True
        self.output_mask.copy_(mask)
        self._sync_output_vocab()

    def _sync_output_vocab(self) -> None:
        mask = self.output_mask
        assert mask is not None
        mask[UNK_ID] = True  # a saved mask always has it; an edited one must too
        ids = mask.nonzero().squeeze(-1)
        index = torch.zeros_like(mask, dtype=torch.long)
        index[ids] = torch.arange(ids.numel(), device=ids.device)
        index[~mask] = index[UNK_ID]
        self.output_ids, self.output_index = ids, index

    def output_targets(self, tokens: Tensor) -> Tensor:
        """Vocabulary ids -> indices into :meth:`project_output`'s logits (``<unk>``'s for ids the
        output vocabulary leaves out); the ids themselves when it is the whole vocabulary."""
        return tokens if self.output_mask is None else self.output_index[tokens]

    def project_output(self, h: Tensor) -> Tensor:
        """Decoder states (..., d_model) -> logits over the output vocabulary (..., n): the
        training loss's product, over only the pieces the softmax covers (all ``vocab`` of them
        unless ``model.output_vocab=target``)."""
        weight = self.tgt_embed.weight if self.output_proj is None else self.output_proj.weight
        if self.output_mask is not None:
            weight = weight.index_select(0, self.output_ids)
        return F.linear(h, weight)

    def project(self, h: Tensor) -> Tensor:
        """Decoder states (..., d_model) -> logits (..., vocab); ``-inf`` for the ids the output
        vocabulary leaves out."""
        logits = self.project_output(h)
        if self.output_mask is None:
            return logits
        full = logits.new_full((*logits.shape[:-1], self.vocab_size), -math.inf)
        return full.index_copy(-1, self.output_ids, logits)

    # -- the Seq2SeqModel interface ----------------------------------------------------------------
    def encode(self, src: Tensor) -> EncoderOutput:
        pad = src.eq(self.pad_id)  # (batch, src)
        x = self._embed(self.src_embed, src)
        history = [x]
        for layer in self.encoder_layers:
            x = layer(x, pad, history if layer.uses_history else None)
            history.append(x)
        return EncoderOutput(out=self.encoder_norm(x), padding_mask=pad)

    def decode_hidden(self, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
        """Teacher-forced decoder states before the output projection: (batch, tgt, d_model)."""
        x = self._embed(self.tgt_embed, tgt_in)
        history = [x]
        for layer in self.decoder_layers:
            x = layer(x, enc, history if layer.uses_history else None, None)
            history.append(x)
        return self.decoder_norm(x)

    def decode(self, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
        return self.project(self.decode_hidden(tgt_in, enc))

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, state: dict[str, Any]) -> Tensor:
        step = int(state.get("step", 0))
        x = self._embed(self.tgt_embed, tokens, offset=step)
        layers_state = state.setdefault("layers", [{} for _ in self.decoder_layers])
        history = [x]
        for layer, layer_state in zip(self.decoder_layers, layers_state):
            x = layer(x, enc, history if layer.uses_history else None, layer_state)
            history.append(x)
        state["step"] = step + tokens.size(1)
        return self.project(self.decoder_norm(x[:, -1]))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Logits (batch, tgt, vocab) for teacher-forced ``tgt_in``."""
        return self.decode(tgt_in, self.encode(src))
