"""``csan bench train``: csan's training step against ``torch.nn.Transformer`` of the same size.

The csan Transformer of a preset and a ``torch.nn.Transformer`` of the same size (same embeddings
tied to the output layer, same dropout, pre- or post-norm alike) train side by side on the same real
batches, alternating step by step (the order rotating) so that all see the same machine state.
Reported: median step time (forward, backward, Adam) and target tokens per second, csan both in
plain float32 eager mode and in the mode ``auto`` picks on this machine (bf16 autocast and
torch.compile where the CPU computes bf16 natively; see :mod:`csan.machine`).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from csan.config import load_config
from csan.errors import CsanError
from csan.machine import RuntimeChoice, choose_runtime, compile_dynamic
from csan.models.transformer import sinusoidal_positions
from csan.training.data import load_training_data
from csan.training.loss import TranslationLoss
from csan.training.prepare import settle_for_runtime

__all__ = ["TorchTransformer", "median_step", "run_train_bench"]


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` with tied embeddings, sinusoidal positions and an output layer.

    Example (``loss`` sums the label-smoothed cross-entropy over the target tokens that are not
    padding, so padding the batch further changes nothing):
        >>> model = TorchTransformer(vocab=20, d_model=16, heads=2, ffn=32, enc=1, dec=1,
        ...                          dropout=0.0, pre_norm=False)
        >>> src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
        >>> tgt_in = torch.tensor([[1, 10, 11], [1, 12, 0]])  # 1: <s>, 2: </s>, 0: padding
        >>> tgt_out = torch.tensor([[10, 11, 2], [12, 2, 0]])
        >>> loss = model.loss(src, tgt_in, tgt_out, epsilon=0.1)
        >>> loss.shape, loss.requires_grad
        (torch.Size([]), True)
        >>> padded = model.loss(src, F.pad(tgt_in, (0, 2)), F.pad(tgt_out, (0, 2)), epsilon=0.1)
        >>> torch.allclose(loss, padded)
        True
        >>> model.core.decoder.layers[0].linear1.out_features, model.embed.weight.shape
        (32, torch.Size([20, 16]))
    """

    def __init__(
        self,
        *,
        vocab: int,
        d_model: int,
        heads: int,
        ffn: int,
        enc: int,
        dec: int,
        dropout: float,
        pre_norm: bool,
        pad_id: int = 0,
    ) -> None:
        super().__init__()

        self.pad_id = pad_id
        self.embed = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.register_buffer("pos", sinusoidal_positions(1024, d_model), persistent=False)
        self.scale = math.sqrt(d_model)
        self.dropout = dropout
        self.core = nn.Transformer(
            d_model=d_model,
            nhead=heads,
            num_encoder_layers=enc,
            num_decoder_layers=dec,
            dim_feedforward=ffn,
            dropout=dropout,
            batch_first=True,
            norm_first=pre_norm,
        )

    def _embed(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) * self.scale + self.pos[: tokens.size(1)]
        return F.dropout(x, self.dropout, self.training)

    def loss(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, epsilon: float) -> Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), dtype=torch.bool)
        h = self.core(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            tgt_is_causal=True,
            src_key_padding_mask=src.eq(self.pad_id),
            memory_key_padding_mask=src.eq(self.pad_id),
        )
        mask = tgt_out.ne(self.pad_id)
        logits = F.linear(h[mask], self.embed.weight)
        return F.cross_entropy(
            logits.float(), tgt_out[mask], label_smoothing=epsilon, reduction="sum"
        )


def median_step(step: Callable[[], None], warmup: int, repeats: int) -> float:
    """Seconds a call of ``step`` takes: ``warmup`` untimed calls, then the median of ``repeats``.

    Example:
        >>> median_step(lambda: sum(range(1000)), warmup=1, repeats=5) > 0
        True
    """
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_train_bench(
    preset: str = "multi30k-small",
    *,
    steps: int = 20,
    warmup: int = 5,
    overrides: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Median step time of csan (float32 eager, and the mode ``auto`` picks) and torch.nn.Transformer.

    All three train on the same ``steps`` real batches of the preset's corpus, interleaved. The second
    csan row runs what the preset's ``train.cpu_bf16`` / ``train.compile`` choose on this machine
    (:func:`csan.machine.choose_runtime`); where that is float32 eager too, the two csan rows are
    two models in the same mode (their difference is the bench's noise). Each csan row builds the
    model a run in its mode trains: with the config's ``float32`` settings in a float32 row
    (``multi30k-small``: no convolutions there), so the two rows may differ in parameters. Every
    system steps with PyTorch's fused Adam, as the trainer does. A corpus of fewer than ``warmup + steps`` batches
    goes round again.

    Example (the tiny preset on a toy corpus, 2 timed steps each; the times are this machine's):
        >>> import os
        >>> from unittest import mock
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus()
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     rows = run_train_bench("tiny", steps=2, warmup=1, overrides=[
        ...         f"data.data_dir={d}", "data.vocab_size=300", "train.compile=false"])
        >>> [(r["system"].split(":")[0], r["steps"]) for r in rows]
        [('csan fp32 eager', 2), ('csan preset', 2), ('torch.nn.Transformer fp32', 2)]
        >>> rows[-1]["relative_to_torch"]
        1.0
    """
    if steps < 1 or warmup < 0:
        raise CsanError(
            f"bench train: steps must be >= 1 and warmup >= 0, got {steps} and {warmup}"
        )

    cfg = load_config(preset, [*overrides, "train.evaluate_test=false"])
    data = load_training_data(cfg)
    m = cfg.model
    # a corpus of fewer batches goes round again, reshuffled
    batches = [data.batch(idx) for idx in data.sampler.take(warmup + steps)]
    torch.manual_seed(0)
    systems: dict[str, tuple[Callable[[Any], Tensor], nn.Module, Any]] = {}

    def add(name: str, module: nn.Module, loss_of: Callable[[Any], Tensor], ctx: Any) -> None:
        systems[name] = (loss_of, module, ctx)

    # each csan row's model as a run in its mode builds it (the config's float32 settings, and
    # model.output_vocab=auto: the softmax)
    def model_for(runtime: RuntimeChoice) -> nn.Module:
        return data.build_model(settle_for_runtime(cfg, runtime)[0].model)

    ours = model_for(choose_runtime(False, False, device="cpu", warn=False))
    plain = TranslationLoss(ours, epsilon=cfg.train.label_smoothing)
    add(
        "csan fp32 eager",
        ours,
        lambda b: plain(b.src, b.tgt_in, b.tgt_out)[0],
        contextlib.nullcontext,
    )
    tc = cfg.train

    auto = choose_runtime(tc.cpu_bf16, tc.compile, device="cpu", warn=False)
    ours2 = model_for(auto)
    fast = TranslationLoss(ours2, epsilon=tc.label_smoothing)
    fast_fn = compile_dynamic(fast) if auto.compile else fast
    ctx = (
        (lambda: torch.autocast("cpu", dtype=torch.bfloat16))
        if auto.bf16
        else contextlib.nullcontext
    )
    setting = "auto" if "auto" in (tc.cpu_bf16, tc.compile) else "preset"
    add(
        f"csan {setting}: {auto.mode}", ours2, lambda b: fast_fn(b.src, b.tgt_in, b.tgt_out)[0], ctx
    )
    ref = TorchTransformer(
        vocab=len(data.spm),
        d_model=m.d_model,
        heads=m.heads,
        ffn=m.ffn_dim,
        enc=m.encoder_layers,
        dec=m.decoder_layers,
        dropout=m.dropout,
        pre_norm=m.pre_norm,
    )
    add(
        "torch.nn.Transformer fp32",
        ref,
        lambda b: ref.loss(b.src, b.tgt_in, b.tgt_out, tc.label_smoothing),
        contextlib.nullcontext,
    )

    optimizers = {
        n: torch.optim.Adam(mod.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
        for n, (_, mod, _) in systems.items()
    }
    times: dict[str, list[float]] = {n: [] for n in systems}
    names = list(systems)
    for i, batch in enumerate(batches):
        for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate: no cold-cache bias
            loss_of, module, ctx = systems[name]
            module.train()
            t0 = time.perf_counter()
            optimizers[name].zero_grad(set_to_none=True)
            with ctx():
                loss = loss_of(batch)
            (loss / batch.tgt_tokens).backward()
            optimizers[name].step()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    tokens = sum(b.tgt_tokens for b in batches[warmup:])
    params = {n: sum(p.numel() for p in mod.parameters()) for n, (_, mod, _) in systems.items()}
    base = statistics.median(times["torch.nn.Transformer fp32"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append(
            {
                "system": name,
                "params": params[name],
                "median_step_ms": round(med * 1e3, 1),
                "tokens_per_s": round(tokens / sum(ts), 1),
                "relative_to_torch": round(base / med, 3),
                "steps": len(ts),
            }
        )
    return rows
