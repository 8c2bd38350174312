"""Translation models: the Transformer (and ConvS2S), built from a :class:`~csan.config.ModelConfig`."""

from __future__ import annotations

import torch
from torch import nn

from csan.config import ModelConfig, check_model_config
from csan.errors import CsanError
from csan.models.base import EncoderOutput, Seq2SeqModel, reorder_state
from csan.models.convs2s import ConvS2S
from csan.models.layout import attention_variants
from csan.models.transformer import Transformer

__all__ = ["EncoderOutput", "Seq2SeqModel", "build_model", "check_model", "reorder_state"]


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


def check_model(cfg: ModelConfig) -> None:
    """Every model setting checked before any data is read: the numbers (dropout in [0, 1), at
    least one layer, ...), ``attention_options`` only for variants some layer uses, and what the
    variants themselves refuse (an even window, ...), by building the model on the ``meta`` device
    (no memory, no time).

    Example:
        >>> check_model(ModelConfig(attention_options={"csan2d": {"window": 5}}))
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: model.attention_options.csan2d: no layer uses csan2d (encoder: vanilla; decoder: vanilla; cross: vanilla)
    """
    check_model_config(cfg)
    if cfg.arch == "transformer":
        try:
            used = attention_variants(cfg)
        except ValueError as e:
            raise CsanError(f"model config: {e}") from None
        names = {name for side in used.values() for name in side}
        for variant in cfg.attention_options:
            if variant not in names:
                where = "; ".join(
                    f"{side}: {', '.join(sorted(set(v)))}" for side, v in used.items()
                )
                raise CsanError(
                    f"model.attention_options.{variant}: no layer uses {variant} ({where})"
                )
    with torch.device("meta"):
        build_model(cfg, vocab_size=8)
