"""The interface every translation model offers to training and decoding.

Layout: tokens are (batch, time) int64; hidden states (batch, time, d_model); logits (batch, time, vocab).
Padding is ``pad_id`` (0) and is always on the right.

Incremental decoding keeps a *state*: a nested dict whose tensors all have the batch (or beam*batch)
dimension first, so that :func:`reorder_state` can follow beam search by ``index_select`` on dim 0.
Non-tensor leaves (such as the step counter) are copied as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from torch import Tensor

__all__ = ["EncoderOutput", "Seq2SeqModel", "reorder_state"]


@dataclass
class EncoderOutput:
    """What the encoder hands to the decoder.

    Fields:
        out: (batch, src_len, d_model) encoder states.
        padding_mask: (batch, src_len) bool, True at padding.
        embedded: (batch, src_len, d_model) input embeddings, for models that attend to them (ConvS2S),
            else None.

    Example:
        >>> import torch
        >>> enc = EncoderOutput(torch.randn(2, 3, 4), torch.tensor([[0, 0, 1], [0, 0, 0]]).bool())
        >>> enc.reorder(torch.tensor([1, 1, 0])).padding_mask.int().tolist()
        [[0, 0, 0], [0, 0, 0], [0, 0, 1]]
    """

    out: Tensor
    padding_mask: Tensor
    embedded: Tensor | None = None

    def reorder(self, index: Tensor) -> EncoderOutput:
        """Select rows along the batch dimension (beam search expands and reorders)."""
        values = {}
        for f in fields(self):
            value = getattr(self, f.name)
            values[f.name] = value.index_select(0, index) if isinstance(value, Tensor) else value
        return replace(self, **values)


class Seq2SeqModel(Protocol):
    """What decoding and training need from a model (Transformer and ConvS2S both provide it).

    Example:
        >>> import torch
        >>> from csan.config import ModelConfig
        >>> from csan.models import build_model
        >>> m = build_model(ModelConfig(d_model=16, heads=2, ffn_dim=32), vocab_size=50).eval()
        >>> enc = m.encode(torch.tensor([[5, 6, 7, m.eos_id]]))
        >>> tgt = torch.tensor([[m.bos_id, 8, 9]])
        >>> full, state = m.decode(tgt, enc), {}
        >>> steps = torch.stack([m.decode_step(tgt[:, i : i + 1], enc, state) for i in range(3)], 1)
        >>> torch.allclose(full, steps, atol=1e-5)
        True
    """

    pad_id: int
    bos_id: int
    eos_id: int

    def encode(self, src: Tensor) -> EncoderOutput:
        """Encode source tokens (batch, src_len) -> :class:`EncoderOutput`."""
        ...

    def decode(self, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
        """Full teacher-forced pass: tgt_in (batch, tgt_len) starting with BOS -> logits (batch, tgt_len, vocab)."""
        ...

    def decode_hidden(self, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
        """Teacher-forced decoder states before the output projection: (batch, tgt_len, d)."""
        ...

    def project_output(self, h: Tensor) -> Tensor:
        """States (..., d) -> logits over the output vocabulary, which the training loss scores: the
        whole vocabulary, or the pieces ``model.output_vocab=target`` keeps."""
        ...

    def output_targets(self, tokens: Tensor) -> Tensor:
        """Vocabulary ids -> indices into :meth:`project_output`'s logits."""
        ...

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, state: dict[str, Any]) -> Tensor:
        """One incremental step.

        ``tokens`` (batch, 1) is the newest target token (BOS at the first step); ``state`` starts as ``{}``
        and is updated in place. Returns the logits for the next token, (batch, vocab). Feeding a sequence
        token by token gives the same logits as :meth:`decode` on the whole sequence.
        """
        ...


def reorder_state(state: Any, index: Tensor) -> Any:
    """Return ``state`` with every tensor leaf reordered along dim 0 by ``index``.

    Example:
        >>> import torch
        >>> s = {"k": torch.arange(3).view(3, 1), "step": 2}
        >>> reorder_state(s, torch.tensor([2, 2, 0]))["k"].flatten().tolist()
        [2, 2, 0]
    """
    if isinstance(state, Tensor):
        return state.index_select(0, index)
    if isinstance(state, dict):
        return {key: reorder_state(value, index) for key, value in state.items()}
    if isinstance(state, list):
        return [reorder_state(value, index) for value in state]
    if isinstance(state, tuple):
        return tuple(reorder_state(value, index) for value in state)
    return state
