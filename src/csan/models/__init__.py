"""Translation models: the Transformer (and ConvS2S), built from a :class:`~csan.config.ModelConfig`."""

from __future__ import annotations

from torch import nn

from csan.config import ModelConfig
from csan.errors import CsanError
from csan.models.base import EncoderOutput, Seq2SeqModel, reorder_state
from csan.models.convs2s import ConvS2S
from csan.models.transformer import Transformer

__all__ = ["EncoderOutput", "Seq2SeqModel", "build_model", "reorder_state"]


def build_model(cfg: ModelConfig, vocab_size: int) -> nn.Module:
    """Build the model ``cfg.arch`` for a joint vocabulary of ``vocab_size``.

    Misconfiguration (an unknown variant, an even window, ...) is a :class:`CsanError` naming the field.

    Example:
        >>> m = build_model(ModelConfig(d_model=16, heads=2, ffn_dim=32), vocab_size=50)
        >>> sum(p.numel() for p in m.parameters()) > 0
        True
    """
    try:
        if cfg.arch == "transformer":
            return Transformer(cfg, vocab_size)
        if cfg.arch == "convs2s":
            return ConvS2S(cfg, vocab_size)
    except (ValueError, TypeError) as e:
        raise CsanError(f"model config: {e}") from None
    raise CsanError(f"model.arch: unknown architecture {cfg.arch!r}; choose transformer or convs2s")
