"""One optimizer step: forward and backward over a group of batches (gradient accumulation), the
gradient norm, then one Adam step, or none when the loss or the norm is not finite.

The loss of a step is the sum over its target tokens divided by the step's tokens over all ranks, so
the gradient of ``update_freq`` accumulated batches, or of ``N`` DDP ranks, is the gradient of one
batch holding them all (DDP averages over ranks: the loss is scaled back by the world size).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn

from csan.data import Batch
from csan.errors import CsanError
from csan.training.distributed import DistInfo, all_reduce_sum

__all__ = ["BadSteps", "optimizer_step"]


def optimizer_step(
    loss_fn: nn.Module,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Batch],
    *,
    device: torch.device,
    dist: DistInfo,
    autocast: Callable[[], AbstractContextManager[Any]],
    clip_norm: float | None,
    next_lr: Callable[[], float],
) -> dict[str, Any]:
    """Train on ``batches`` and take one optimizer step; return the step's statistics.

    ``loss_fn(src, tgt_in, tgt_out) -> (summed loss, summed NLL, correct count)`` (a
    :class:`csan.training.loss.TranslationLoss`, maybe wrapped by DDP and ``torch.compile``);
    ``next_lr()`` gives the rate of the step about to be taken (asked only when it is taken).
    Returns ``{"skipped": False, "loss", "nll" (bits per token), "lr", "tokens", "grad_norm"}``, or
    ``{"skipped": True, "loss", "grad_norm"}`` when a non-finite value skipped the update.

    Example:
        >>> from csan.config import load_config
        >>> from csan.data import Batch
        >>> from csan.models import build_model
        >>> from csan.training.loss import TranslationLoss
        >>> _ = torch.manual_seed(0)
        >>> model = build_model(load_config("tiny").model, vocab_size=40)
        >>> opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        >>> src, tgt = torch.randint(4, 40, (2, 5)), torch.randint(4, 40, (2, 4))
        >>> batch = Batch(src, tgt, tgt, src_tokens=10, tgt_tokens=8, indices=[0, 1])
        >>> stats = optimizer_step(TranslationLoss(model, epsilon=0.1), model, opt, [batch],
        ...     device=torch.device("cpu"), dist=DistInfo(), autocast=nullcontext,
        ...     clip_norm=1.0, next_lr=lambda: 1e-3)
        >>> stats["skipped"], stats["tokens"], stats["loss"] > 0
        (False, 8.0, True)
    """
    loss_fn.train()
    optimizer.zero_grad(set_to_none=True)
    tokens = sum(b.tgt_tokens for b in batches)
    (total_tokens,) = all_reduce_sum([float(tokens)], dist)
    sum_loss = sum_nll = 0.0
    for i, batch in enumerate(batches):
        batch = batch.to(device)
        sync = nullcontext()
        if dist.enabled and i < len(batches) - 1:
            sync = loss_fn.no_sync()  # type: ignore[operator]  # DDP: all-reduce on the last only
        with sync, autocast():
            loss, nll, _ = loss_fn(batch.src, batch.tgt_in, batch.tgt_out)
        # normalise by the update's tokens over all ranks; DDP averages over ranks, so scale back
        (loss * (dist.world_size / total_tokens)).backward()
        sum_loss += loss.item()
        sum_nll += nll.item()
    sum_loss, sum_nll = all_reduce_sum([sum_loss, sum_nll], dist)
    # the gradients are the same on every rank after DDP's all-reduce: so is this decision
    limit = clip_norm if clip_norm is not None else math.inf
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), limit))
    if not (math.isfinite(sum_loss) and math.isfinite(grad_norm)):
        optimizer.zero_grad(set_to_none=True)
        return {"skipped": True, "loss": sum_loss, "grad_norm": grad_norm}
    lr = next_lr()
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return {
        "skipped": False,
        "loss": sum_loss / total_tokens / math.log(2),
        "nll": sum_nll / total_tokens / math.log(2),
        "lr": lr,
        "tokens": total_tokens,
        "grad_norm": grad_norm,
    }


class BadSteps:
    """Counts updates skipped in a row for a non-finite loss or gradient norm; ``limit`` in a row
    stop the run with a :class:`CsanError` (the same on every rank: the values are all-reduced).

    Example:
        >>> guard = BadSteps(limit=2)
        >>> guard.skipped({"loss": float("nan"), "grad_norm": 1.0}, step=7, last_checkpoint=None)
        'warning: non-finite loss (nan) at step 8; update skipped (1 in a row, train.max_bad_steps=2)'
        >>> guard.skipped({"loss": float("nan"), "grad_norm": 1.0}, step=7, last_checkpoint=None)
        Traceback (most recent call last):
        csan.errors.CsanError: training diverged: 2 updates in a row with a non-finite loss after step 7 (train.max_bad_steps=2); no checkpoint was written before; lower train.lr or raise train.warmup
    """

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self.in_a_row = 0

    def good(self) -> None:
        self.in_a_row = 0

    def skipped(self, stats: dict[str, Any], *, step: int, last_checkpoint: Path | None) -> str:
        """Count a skipped update after ``step``; return the warning, or raise at the limit."""
        self.in_a_row += 1
        what = "loss" if not math.isfinite(stats["loss"]) else "gradient norm"
        value = stats["loss"] if what == "loss" else stats["grad_norm"]
        if self.in_a_row < self.limit:
            return (
                f"warning: non-finite {what} ({value}) at step {step + 1}; update skipped "
                f"({self.in_a_row} in a row, train.max_bad_steps={self.limit})"
            )
        kept = (
            f"the last good checkpoint is {last_checkpoint} "
            f"(step {int(last_checkpoint.name.split('_')[1])})"
            if last_checkpoint is not None
            else "no checkpoint was written before"
        )
        raise CsanError(
            f"training diverged: {self.in_a_row} updates in a row with a non-finite {what} "
            f"after step {step} (train.max_bad_steps={self.limit}); {kept}; "
            "lower train.lr or raise train.warmup"
        )
