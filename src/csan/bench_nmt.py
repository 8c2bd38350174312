"""Translation-system benchmarks: training step time against ``torch.nn.Transformer``, and decoding.

``csan bench train``: the csan Transformer of a preset and a ``torch.nn.Transformer`` of the same size
(same embeddings tied to the output layer, same dropout, pre- or post-norm alike), trained side by side
on the same real batches, alternating step by step (the order rotating) so that all see the same machine state. Reported:
median step time (forward, backward, Adam) and target tokens per second, csan both in plain float32
eager mode and in the preset's own mode (bf16 autocast / torch.compile when the preset sets them).

``csan bench translate``: sentences per second of beam search on a test set with a trained model.

Results are printed as a table and written, with the machine, to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["TorchTransformer", "main", "run_train_bench", "run_translate_bench"]


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` with tied embeddings, sinusoidal positions and an output layer."""

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
        from csan.models.transformer import sinusoidal_positions

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


def _median_step(step: Callable[[], None], warmup: int, repeats: int) -> float:
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
    """Median step time of csan (float32 eager, and the preset's mode) and torch.nn.Transformer.

    All three train on the same ``steps`` real batches of the preset's corpus, interleaved.
    """
    from csan.config import load_config
    from csan.models import build_model
    from csan.training.data import load_training_data
    from csan.training.loss import TranslationLoss

    cfg = load_config(preset, [*overrides, "train.evaluate_test=false"])
    data = load_training_data(cfg)
    m = cfg.model
    batches = [data.batch(idx) for idx in data.sampler.batches(1)[: warmup + steps]]
    torch.manual_seed(0)
    systems: dict[str, tuple[Callable[[Any], Tensor], nn.Module, Any]] = {}

    def add(name: str, module: nn.Module, loss_of: Callable[[Any], Tensor], ctx: Any) -> None:
        systems[name] = (loss_of, module, ctx)

    ours = build_model(m, len(data.spm))
    plain = TranslationLoss(ours, epsilon=cfg.train.label_smoothing)
    add(
        "csan fp32 eager",
        ours,
        lambda b: plain(b.src, b.tgt_in, b.tgt_out)[0],
        contextlib.nullcontext,
    )
    tc = cfg.train
    if tc.cpu_bf16 or tc.compile:
        ours2 = build_model(m, len(data.spm))
        fast = TranslationLoss(ours2, epsilon=tc.label_smoothing)
        fast_fn = torch.compile(fast, dynamic=True) if tc.compile else fast
        ctx = (
            (lambda: torch.autocast("cpu", dtype=torch.bfloat16))
            if tc.cpu_bf16
            else contextlib.nullcontext
        )
        mode = "+".join(x for x, on in (("bf16", tc.cpu_bf16), ("compile", tc.compile)) if on)
        add(f"csan {mode}", ours2, lambda b: fast_fn(b.src, b.tgt_in, b.tgt_out)[0], ctx)
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
        n: torch.optim.Adam(mod.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
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


PAPER_PLACEMENT = {  # Table 1 rows: encoder self-attention of the lower half of the layers
    "vanilla": "vanilla",
    "rel_pos": "rel_pos@{lower}",
    "neighbor": "neighbor@{lower}",
    "local_hard": "local_hard@{lower}",
    "local_soft": "local_soft@{lower}",
    "block": "block@{lower}",
    "cnn": "cnn@{lower}",
    "bi_direct": "bi_direct@{lower}",
    "csan1d": "csan1d@{lower}",
    "csan2d": "csan2d@{lower}",
    "context": "context@{lower}",
    "conv_qkv": "conv_qkv",
}


def run_variant_bench(
    preset: str = "multi30k-small",
    *,
    steps: int = 10,
    warmup: int = 3,
    variants: Sequence[str] = tuple(PAPER_PLACEMENT),
    overrides: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Training step time of each attention variant relative to vanilla (the paper's "Speed").

    Every variant replaces the encoder self-attention of the lower half of the layers (the paper's
    lowest 3 of 6); all train on the same real batches, eager mode (no torch.compile, so that no
    variant is favoured by a compiler), with the preset's CPU bf16 setting. Steps are interleaved
    across variants so that all see the same machine state.
    """
    from csan.config import load_config
    from csan.models import build_model
    from csan.training.data import load_training_data
    from csan.training.loss import TranslationLoss

    base = load_config(preset, [*overrides, "train.evaluate_test=false"])
    data = load_training_data(base)
    lower = f"0-{max(base.model.encoder_layers // 2 - 1, 0)}"
    batches = [data.batch(idx) for idx in data.sampler.batches(1)[: warmup + steps]]
    systems = {}
    for name in variants:
        spec = PAPER_PLACEMENT.get(name, name).format(lower=lower)
        field = "model.encoder_attention"
        extra = [f"{field}={spec}"]
        if name == "conv_qkv":
            extra += ["model.decoder_attention=conv_qkv", "model.cross_attention=conv_qkv"]
        cfg = load_config(preset, [*overrides, *extra])
        torch.manual_seed(0)
        model = build_model(cfg.model, len(data.spm))
        systems[name] = (
            TranslationLoss(model, epsilon=cfg.train.label_smoothing),
            torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9),
            sum(p.numel() for p in model.parameters()),
            spec,
        )
    use_bf16 = base.train.cpu_bf16
    times: dict[str, list[float]] = {n: [] for n in systems}
    names = list(systems)
    for i, b in enumerate(batches):
        # rotate the order every step: the first system of a round pays for a cold cache
        for name in names[i % len(names) :] + names[: i % len(names)]:
            loss_fn, opt = systems[name][0], systems[name][1]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            ctx = (
                torch.autocast("cpu", dtype=torch.bfloat16)
                if use_bf16
                else contextlib.nullcontext()
            )
            with ctx:
                loss = loss_fn(b.src, b.tgt_in, b.tgt_out)[0]
            (loss / b.tgt_tokens).backward()
            opt.step()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    ref = statistics.median(times[next(iter(systems))])
    ref_params = systems[next(iter(systems))][2]
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append(
            {
                "variant": name,
                "placement": systems[name][3],
                "params": systems[name][2],
                "added_params": systems[name][2] - ref_params,
                "median_step_ms": round(med * 1e3, 1),
                "steps_per_s": round(1 / med, 3),
                "relative_speed": round(ref / med, 3),
            }
        )
    return rows


def run_translate_bench(
    model_dir: str, src: str, *, beam: int = 4, repeats: int = 1
) -> dict[str, Any]:
    """Sentences per second of ``translate_lines`` (model loading timed separately)."""
    from csan.checkpoint import load_model_dir
    from csan.data import SubwordModel
    from csan.decoding.translate import translate_lines
    from csan.evaluation.bleu import read_text

    t0 = time.perf_counter()
    loaded = load_model_dir(model_dir)
    spm = SubwordModel.from_bytes(loaded.spm_bytes)
    load_s = time.perf_counter() - t0
    lines = read_text(src)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        translate_lines(
            loaded.model,
            spm,
            lines,
            beam=beam,
            lenpen=loaded.config.decode.lenpen,
            max_tokens=loaded.config.decode.max_tokens,
        )
        best = min(best, time.perf_counter() - t0)
    return {
        "model": str(model_dir),
        "input": src,
        "sentences": len(lines),
        "beam": beam,
        "load_seconds": round(load_s, 2),
        "translate_seconds": round(best, 2),
        "sentences_per_s": round(len(lines) / best, 1),
    }


def _save(kind: str, payload: dict[str, Any], table: str, out: Path) -> Path:
    from csan.bench import machine_info

    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y-%m-%d")
    payload = {"machine": machine_info(torch.device("cpu")), **payload}
    path = out / f"{kind}-cpu-{stamp}"
    path.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``csan bench train|translate ...``."""
    p = argparse.ArgumentParser(prog="csan bench", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["train", "translate", "variants"])
    p.add_argument("--config", default="multi30k-small", help="preset or YAML (train)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--steps", type=int, default=20, help="timed steps per system (train)")
    p.add_argument("--model", help="model folder (translate)")
    p.add_argument("--src", help="source file (translate)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--out", default="benchmarks/results", help="results folder")
    args = p.parse_args(argv)
    if args.what == "train":
        rows = run_train_bench(args.config, steps=args.steps, overrides=args.overrides)
        lines = [
            "| system | params | median step (ms) | target tokens/s | speed vs torch.nn.Transformer |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['system']} | {r['params']:,} | {r['median_step_ms']} | {r['tokens_per_s']:,.0f} "
            f"| {r['relative_to_torch']:.2f}x |"
            for r in rows
        ]
        table = "\n".join(lines)
        path = _save(
            "train",
            {"config": args.config, "overrides": args.overrides, "rows": rows},
            table,
            Path(args.out),
        )
    elif args.what == "variants":
        rows = run_variant_bench(args.config, steps=args.steps, overrides=args.overrides)
        lines = [
            "| variant | placement | params | added | median step (ms) | steps/s | speed vs first |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['variant']} | {r['placement']} | {r['params']:,} | {r['added_params']:+,} "
            f"| {r['median_step_ms']} | {r['steps_per_s']} | {r['relative_speed']:.2f}x |"
            for r in rows
        ]
        table = "\n".join(lines)
        path = _save(
            "variants",
            {"config": args.config, "overrides": args.overrides, "rows": rows},
            table,
            Path(args.out),
        )
    else:
        if not (args.model and args.src):
            p.error("translate needs --model and --src")
        r = run_translate_bench(args.model, args.src, beam=args.beam)
        table = (
            f"| sentences | beam | model load (s) | translate (s) | sentences/s |\n|---:|---:|---:|---:|---:|\n"
            f"| {r['sentences']} | {r['beam']} | {r['load_seconds']} | {r['translate_seconds']} "
            f"| {r['sentences_per_s']} |"
        )
        path = _save("translate", r, table, Path(args.out))
    print(table)
    print(f"saved {path}.json and {path}.md")
    return 0
