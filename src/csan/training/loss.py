"""Label-smoothed cross-entropy over the non-padding target tokens."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["TranslationLoss", "label_smoothed_nll"]


def label_smoothed_nll(
    logits: Tensor, target: Tensor, *, epsilon: float, ignore_index: int = -100
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed plain NLL.

    The smoothed target puts ``1 - epsilon`` on the reference token and ``epsilon / V`` on every token
    (the reference included), as ``torch.nn.functional.cross_entropy(label_smoothing=epsilon)``:
    ``loss = (1 - epsilon) * nll + epsilon * mean_v(-log p_v)``.

    Example:
        >>> logits = torch.tensor([[2.0, 0.0, 0.0]]); target = torch.tensor([0])
        >>> loss, nll = label_smoothed_nll(logits, target, epsilon=0.0)
        >>> bool(torch.isclose(loss, nll))
        True
    """
    logits = logits.float()
    loss = F.cross_entropy(
        logits, target, ignore_index=ignore_index, label_smoothing=epsilon, reduction="sum"
    )
    with torch.no_grad():
        nll = F.cross_entropy(logits, target, ignore_index=ignore_index, reduction="sum")
    return loss, nll


class TranslationLoss(nn.Module):
    """Wraps a model so that ``forward`` returns the training loss (what DDP wraps and syncs).

    ``forward(src, tgt_in, tgt_out) -> (summed smoothed loss, summed NLL, correct-token count)``.
    Only non-padding target positions reach the output projection (saves the vocabulary matmul on
    padding).
    """

    def __init__(self, model: nn.Module, *, epsilon: float) -> None:
        super().__init__()
        self.model = model
        self.epsilon = epsilon

    def forward(
        self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        model = self.model
        enc = model.encode(src)
        mask = tgt_out.ne(model.pad_id)
        target = tgt_out[mask]
        if hasattr(model, "decode_hidden"):
            logits = model.project(model.decode_hidden(tgt_in, enc)[mask])
        else:
            logits = model.decode(tgt_in, enc)[mask]
        loss, nll = label_smoothed_nll(logits, target, epsilon=self.epsilon)
        with torch.no_grad():
            correct = logits.argmax(-1).eq(target).sum()
        return loss, nll, correct
