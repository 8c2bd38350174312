"""Label-smoothed cross-entropy over the non-padding target tokens."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["TranslationLoss", "label_smoothed_nll", "output_logits"]


def _wide(x: Tensor) -> Tensor:
    """float32 for half-precision logits; float32 and float64 as they are."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


class _SmoothedNLL(torch.autograd.Function):
    """Per-row smoothed loss and NLL, with one exponential over the (N, V) logits in all.

    Forward: ``p = softmax(z)`` and ``lse = logsumexp(z)``, read off as ``max(z) - log(max(p))`` (the
    largest probability is ``1 / sum(exp(z - max z))``); then ``nll_i = lse_i - z_i[t_i]`` and
    ``smooth_i = lse_i - mean_v z_iv``. Backward: the gradient of ``(1 - eps) * nll + eps * smooth`` is
    ``g * (p - eps / V) - g * (1 - eps) * onehot(t)``: one ``addcmul`` and a scatter. The previous
    form kept ``log_softmax(z)`` and took its exponential again in the backward; this one saved
    about a fifth of the loss's time on AVX2 (3,840 x 8,000 logits, one thread: 141 -> 112 ms
    forward and backward).
    """

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
        z = _wide(logits)  # (N, V)
        p = torch.softmax(z, dim=-1)
        lse = z.amax(dim=-1) - p.amax(dim=-1).log()  # (N,)
        nll = lse - z.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        if epsilon:
            loss = (1.0 - epsilon) * nll + epsilon * (lse - z.mean(dim=-1))
        else:
            loss = nll.clone()  # its own tensor: ``nll`` is marked non-differentiable
        ctx.save_for_backward(p, target)
        ctx.epsilon = epsilon
        ctx.dtype = logits.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None]:
        p, target = ctx.saved_tensors
        eps = ctx.epsilon
        g = grad_loss.to(p.dtype).unsqueeze(-1)  # (N, 1)
        grad = torch.addcmul(g * (-eps / p.size(-1)), p, g)  # g * (p - eps / V), one pass
        grad.scatter_add_(-1, target.unsqueeze(-1), g * (eps - 1.0))
        return grad.to(ctx.dtype), None, None


def label_smoothed_nll(
    logits: Tensor, target: Tensor, *, epsilon: float, ignore_index: int | None = -100
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed plain NLL.

    Targets equal to ``ignore_index`` are left out; ``ignore_index=None`` says there are none, which
    spares the check (a host sync, and a graph break under ``torch.compile``).

    The smoothed target puts ``1 - epsilon`` on the reference token and ``epsilon / V`` on every token
    (the reference included), as ``torch.nn.functional.cross_entropy(label_smoothing=epsilon)``:
    ``loss = (1 - epsilon) * nll + epsilon * mean_v(-log p_v)``. Computed in float32 whatever the
    logits' dtype, with a hand-written backward (:class:`_SmoothedNLL`).

    Example:
        >>> logits = torch.tensor([[2.0, 0.0, 0.0]]); target = torch.tensor([0])
        >>> loss, nll = label_smoothed_nll(logits, target, epsilon=0.0)
        >>> bool(torch.isclose(loss, nll))
        True
        >>> x = torch.randn(5, 7); t = torch.tensor([1, 0, 6, -100, 3])
        >>> ref = torch.nn.functional.cross_entropy(x, t, label_smoothing=0.1, reduction="sum")
        >>> bool(torch.isclose(label_smoothed_nll(x, t, epsilon=0.1)[0], ref))
        True
    """
    if ignore_index is not None:
        keep = target.ne(ignore_index)
        if not bool(keep.all()):
            logits, target = logits[keep], target[keep]
    loss, nll = _SmoothedNLL.apply(logits, target, epsilon)
    return loss.sum(), nll.sum()


def output_logits(
    model: nn.Module, enc: Any, tgt_in: Tensor, tgt_out: Tensor
) -> tuple[Tensor, Tensor]:
    """Logits at the non-padding target positions and their targets, over the model's output
    vocabulary (``model.output_vocab``: targets as indices into it); only those positions reach the
    output projection. What the training loss and validation score.

    Example:
        >>> from csan.config import load_config
        >>> from csan.models import build_model
        >>> model = build_model(load_config("tiny").model, vocab_size=40)
        >>> src, tgt = torch.randint(4, 40, (2, 5)), torch.tensor([[5, 6, 3], [7, 3, 0]])
        >>> logits, target = output_logits(model, model.encode(src), tgt, tgt)
        >>> logits.shape, target.tolist()  # the padding position is left out
        (torch.Size([5, 40]), [5, 6, 3, 7, 3])
    """
    mask = tgt_out.ne(model.pad_id)
    logits = model.project_output(model.decode_hidden(tgt_in, enc)[mask])
    return logits, model.output_targets(tgt_out[mask])


class TranslationLoss(nn.Module):
    """Wraps a model so that ``forward`` returns the training loss (what DDP wraps and syncs).

    ``forward(src, tgt_in, tgt_out) -> (summed smoothed loss, summed NLL, correct-token count)``;
    the count is 0 unless ``count_correct``.
    Only non-padding target positions reach the output projection (saves the vocabulary matmul on
    padding).

    Example:
        >>> import torch
        >>> from csan.config import load_config
        >>> from csan.models import build_model
        >>> model = build_model(load_config("tiny").model, vocab_size=40)
        >>> src, tgt = torch.randint(4, 40, (2, 5)), torch.randint(4, 40, (2, 4))
        >>> loss, nll, correct = TranslationLoss(model, epsilon=0.1)(src, tgt, tgt)
        >>> loss.shape, bool(nll > 0), int(correct)  # sums over the 8 target tokens; no count asked
        (torch.Size([]), True, 0)
    """

    def __init__(self, model: nn.Module, *, epsilon: float, count_correct: bool = False) -> None:
        super().__init__()
        self.model = model
        self.epsilon = epsilon
        self.count_correct = count_correct  # argmax over the vocabulary costs ~5% of a CPU step

    def forward(
        self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        model = self.model
        logits, target = output_logits(model, model.encode(src), tgt_in, tgt_out)
        # ``target`` holds no padding: no check (it would break the compiled graph)
        loss, nll = label_smoothed_nll(logits, target, epsilon=self.epsilon, ignore_index=None)
        correct = torch.zeros((), dtype=torch.long)
        if self.count_correct:
            with torch.no_grad():
                correct = logits.argmax(-1).eq(target).sum()
        return loss, nll, correct
