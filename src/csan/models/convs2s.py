"""ConvS2S: convolutional sequence to sequence learning (Gehring et al. 2017), the classic "fconv".

Notation (E = ``convs2s.embed_dim``, C = ``convs2s.channels``, k = ``convs2s.kernel``):
    tokens (batch, time) int64, padding ``pad_id`` on the right; embeddings (batch, time, E);
    block states (batch, time, C); logits (batch, time, vocab).

Encoder: ``e = dropout(tok + pos)`` (learned positions from 0, zero at padding), linear E -> C, blocks of
``x <- (x + GLU(conv_k(dropout(x))) ) * sqrt(0.5)`` with padding zeroed before every convolution and
"same" padding, linear C -> E: ``z`` (zero at padding). ``EncoderOutput(out=z, embedded=e)``.

Decoder: ``g = dropout(tok + pos)``, linear E -> C, blocks of a causal convolution (k - 1 zeros on the left),
GLU, then multi-step attention (SPEC "ConvS2S"), then the residual:
    ``d_i = W h_i + b + g_i``, ``a_ij = softmax_j(d_i · z_j)`` over non-padding j,
    ``c_i = sum_j a_ij (z_j + e_j)``,
    ``h_i <- (h_i + W_c (sqrt(m) c_i) + b_c) * sqrt(0.5)``, block output ``(h + x) * sqrt(0.5)``,
then linear C -> E, dropout, output projection (tied to the target embedding with ``share_embeddings``).

Choices, documented:
- ``sqrt(m)`` (m = the sentence's number of non-padding source tokens) is the paper's ``m * sqrt(1/m)``
  variance correction of c; the ``(h + c) * sqrt(0.5)`` form is fairseq's. ``d`` and ``z + e`` are
  used unscaled, exactly as the SPEC writes them (fairseq scales both by sqrt(0.5)).
- No weight normalisation: plain normal init with the paper's scaling (conv std ``sqrt(4(1-p)/(k C_in))``,
  linear std ``sqrt((1-p)/in)``, embeddings std 0.1), which Adam trains well.
- No encoder gradient scaling by the number of attention layers: it was for Nesterov SGD; Adam is
  invariant to a constant per-parameter gradient scale.
- ``kernel`` must be odd, so that the encoder's "same" padding is symmetric.

Incremental decoding keeps per decoder block the last k - 1 inputs of its causal convolution:
``state = {"step": int, "layers": [{"conv_in": (batch, k-1, C)}, ...]}``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from csan.config import ModelConfig
from csan.kernels.conv import TimeConv1d
from csan.models.base import EncoderOutput

__all__ = ["ConvS2S", "multi_step_attention"]

_SQRT_HALF = math.sqrt(0.5)


def multi_step_attention(
    query: Tensor, keys: Tensor, values: Tensor, key_padding_mask: Tensor
) -> Tensor:
    """``c_i = sum_j softmax_j(query_i · keys_j) values_j`` over the non-padding keys j.

    Shapes: query (batch, tgt, E), keys and values (batch, src, E), key_padding_mask (batch, src) bool,
    True at padding. Returns (batch, tgt, E); a sentence with no real key gives zeros.

    Example:
        >>> q = torch.zeros(1, 1, 2); kv = torch.tensor([[[1.0, 0.0], [3.0, 0.0], [9.0, 9.0]]])
        >>> multi_step_attention(q, kv, kv, torch.tensor([[False, False, True]])).tolist()
        [[[2.0, 0.0]]]
    """
    scores = torch.bmm(query, keys.transpose(1, 2))  # (batch, tgt, src)
    mask = key_padding_mask[:, None, :]  # (batch, 1, src)
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)
    return torch.bmm(weights, values)  # (batch, tgt, E)


def _linear(in_dim: int, out_dim: int, dropout: float) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.normal_(layer.weight, std=math.sqrt((1.0 - dropout) / in_dim))
    nn.init.zeros_(layer.bias)
    return layer


def _conv(channels: int, kernel: int, dropout: float) -> TimeConv1d:
    """C -> 2C convolution (GLU halves it back), no built-in padding."""
    conv = TimeConv1d(channels, 2 * channels, kernel)
    nn.init.normal_(conv.weight, std=math.sqrt(4.0 * (1.0 - dropout) / (kernel * channels)))
    nn.init.zeros_(conv.bias)
    return conv


def _embedding(num: int, dim: int, pad_id: int | None) -> nn.Embedding:
    table = nn.Embedding(num, dim, padding_idx=pad_id)
    nn.init.normal_(table.weight, std=0.1)
    if pad_id is not None:
        nn.init.zeros_(table.weight[pad_id])
    return table


def _glu_conv(conv: TimeConv1d, window: Tensor) -> Tensor:
    """(batch, time + k - 1, C) already padded -> GLU(conv) (batch, time, C)."""
    return F.glu(conv(window), dim=-1)  # A * sigmoid(B) of the (batch, time, 2C) convolution


class EncoderBlock(nn.Module):
    def __init__(self, channels: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.conv = _conv(channels, kernel, dropout)
        self.dropout = dropout

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        residual = x
        x = x.masked_fill(pad[..., None], 0.0)
        x = F.dropout(x, self.dropout, self.training)
        half = (self.conv.kernel_size[0] - 1) // 2
        x = _glu_conv(self.conv, F.pad(x, (0, 0, half, half)))  # "same" padding over time
        return (x + residual) * _SQRT_HALF


class DecoderBlock(nn.Module):
    def __init__(self, channels: int, embed_dim: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.conv = _conv(channels, kernel, dropout)
        self.attn_in = _linear(channels, embed_dim, 0.0)  # W, b of d_i
        self.attn_out = _linear(embed_dim, channels, 0.0)  # c_i back to channels
        self.dropout = dropout

    def forward(
        self,
        x: Tensor,
        g: Tensor,
        enc: EncoderOutput,
        values: Tensor,
        src_scale: Tensor,
        cache: dict[str, Tensor] | None,
    ) -> Tensor:
        """x (batch, t, C), g (batch, t, E); ``cache`` given: x holds only the newest positions."""
        residual = x
        x = F.dropout(x, self.dropout, self.training)
        left = self.conv.kernel_size[0] - 1
        if cache is None:
            window = F.pad(x, (0, 0, left, 0))  # causal: k - 1 zeros on the left
        else:
            past = cache.get("conv_in")
            if past is None:  # first step: the same zeros as the left padding
                past = x.new_zeros(x.size(0), left, x.size(2))
            window = torch.cat([past, x], dim=1)  # (batch, k - 1 + t, C)
            cache["conv_in"] = window[:, window.size(1) - left :]
        h = _glu_conv(self.conv, window)  # (batch, t, C)
        d = self.attn_in(h) + g  # (batch, t, E)
        c = multi_step_attention(d, enc.out, values, enc.padding_mask) * src_scale
        h = (h + self.attn_out(c)) * _SQRT_HALF
        return (h + residual) * _SQRT_HALF


class ConvS2S(nn.Module):
    """Convolutional encoder-decoder with multi-step attention in every decoder block.

    Example:
        >>> from csan.config import ConvS2SConfig, ModelConfig
        >>> cfg = ModelConfig(arch="convs2s", convs2s=ConvS2SConfig(embed_dim=8, channels=12,
        ...                   encoder_layers=1, decoder_layers=2, kernel=3))
        >>> m = ConvS2S(cfg, vocab_size=20)
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
        c = cfg.convs2s
        for name in ("embed_dim", "channels", "encoder_layers", "decoder_layers", "kernel"):
            if getattr(c, name) < 1:
                raise ValueError(f"model.convs2s.{name} must be >= 1, got {getattr(c, name)}")
        if c.kernel % 2 == 0:
            raise ValueError(
                f"model.convs2s.kernel must be odd (symmetric 'same' padding in the encoder), got {c.kernel}"
            )
        if not 0.0 <= cfg.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {cfg.dropout}")
        if cfg.max_positions < 1:
            raise ValueError(f"model.max_positions must be >= 1, got {cfg.max_positions}")
        self.cfg = cfg
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.vocab_size = vocab_size
        self.max_positions = cfg.max_positions
        self.dropout = cfg.dropout
        p, emb, ch = cfg.dropout, c.embed_dim, c.channels

        self.src_embed = _embedding(vocab_size, emb, pad_id)
        self.tgt_embed = (
            self.src_embed if cfg.share_embeddings else _embedding(vocab_size, emb, pad_id)
        )
        self.src_positions = _embedding(cfg.max_positions, emb, None)
        self.tgt_positions = _embedding(cfg.max_positions, emb, None)

        self.encoder_in = _linear(emb, ch, p)
        self.encoder_layers = nn.ModuleList(
            EncoderBlock(ch, c.kernel, p) for _ in range(c.encoder_layers)
        )
        self.encoder_out = _linear(ch, emb, 0.0)

        self.decoder_in = _linear(emb, ch, p)
        self.decoder_layers = nn.ModuleList(
            DecoderBlock(ch, emb, c.kernel, p) for _ in range(c.decoder_layers)
        )
        self.decoder_out = _linear(ch, emb, 0.0)
        # Output projection: the target embedding (tied) or its own matrix; a bias either way.
        self.output_proj = None
        if not cfg.share_embeddings:
            self.output_proj = nn.Linear(emb, vocab_size, bias=False)
            nn.init.normal_(self.output_proj.weight, std=math.sqrt((1.0 - p) / emb))
        self.output_bias = nn.Parameter(torch.zeros(vocab_size))

    # -- helpers -------------------------------------------------------------------------------
    def _check_length(self, n: int, side: str) -> None:
        if n > self.max_positions:
            raise ValueError(
                f"{side} of {n} tokens exceeds model.max_positions={self.max_positions}"
            )

    def project(self, h: Tensor) -> Tensor:
        """Decoder outputs (..., E) -> logits (..., vocab)."""
        weight = self.tgt_embed.weight if self.output_proj is None else self.output_proj.weight
        return F.linear(h, weight, self.output_bias)

    def _decode(
        self,
        tokens: Tensor,
        enc: EncoderOutput,
        offset: int,
        caches: list[dict[str, Tensor]] | None,
    ) -> Tensor:
        """Decoder states (batch, t, E) before the output projection, positions from ``offset``."""
        if enc.embedded is None:
            raise ValueError("ConvS2S.decode needs EncoderOutput.embedded (the source embeddings)")
        t = tokens.size(1)
        self._check_length(offset + t, "target")
        positions = torch.arange(offset, offset + t, device=tokens.device)
        g = self.tgt_embed(tokens) + self.tgt_positions(positions)  # (batch, t, E)
        g = F.dropout(g, self.dropout, self.training)
        values = enc.out + enc.embedded  # z_j + e_j: (batch, src, E)
        src_len = (~enc.padding_mask).sum(dim=1).clamp(min=1)  # m: (batch,)
        src_scale = src_len.to(values.dtype).sqrt()[:, None, None]  # m * sqrt(1/m)
        x = self.decoder_in(g)  # (batch, t, C)
        for i, layer in enumerate(self.decoder_layers):
            x = layer(x, g, enc, values, src_scale, None if caches is None else caches[i])
        x = self.decoder_out(x)  # (batch, t, E)
        return F.dropout(x, self.dropout, self.training)

    # -- the Seq2SeqModel interface ----------------------------------------------------------------
    def encode(self, src: Tensor) -> EncoderOutput:
        pad = src.eq(self.pad_id)  # (batch, src)
        self._check_length(src.size(1), "source")
        positions = ((~pad).cumsum(dim=1) - 1).clamp(min=0)  # from 0 over the real tokens
        e = self.src_embed(src) + self.src_positions(positions)  # (batch, src, E)
        e = F.dropout(e, self.dropout, self.training).masked_fill(pad[..., None], 0.0)
        x = self.encoder_in(e)  # (batch, src, C)
        for layer in self.encoder_layers:
            x = layer(x, pad)
        z = self.encoder_out(x).masked_fill(pad[..., None], 0.0)  # (batch, src, E)
        return EncoderOutput(out=z, padding_mask=pad, embedded=e)

    def decode_hidden(self, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
        """Teacher-forced decoder outputs before the output projection: (batch, tgt, E)."""
        return self._decode(tgt_in, enc, 0, None)

    def project_output(self, h: Tensor) -> Tensor:
        """The training loss's product: the whole vocabulary (no ``model.output_vocab=target``)."""
        return self.project(h)

    def output_targets(self, tokens: Tensor) -> Tensor:
        """Vocabulary ids as indices into :meth:`project_output`'s logits: the ids themselves."""
        return tokens

    def decode(self, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
        return self.project(self.decode_hidden(tgt_in, enc))

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, state: dict[str, Any]) -> Tensor:
        step = int(state.get("step", 0))
        caches = state.setdefault("layers", [{} for _ in self.decoder_layers])
        h = self._decode(tokens, enc, step, caches)
        state["step"] = step + tokens.size(1)
        return self.project(h[:, -1])

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Logits (batch, tgt, vocab) for teacher-forced ``tgt_in``."""
        return self.decode(tgt_in, self.encode(src))
