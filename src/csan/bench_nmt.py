"""Translation-system benchmarks: training step time against ``torch.nn.Transformer``, and decoding.

``csan bench train``: the csan Transformer of a preset and a ``torch.nn.Transformer`` of the same size
(same embeddings tied to the output layer, same dropout, pre- or post-norm alike), trained side by side
on the same real batches, alternating step by step (the order rotating) so that all see the same machine state. Reported:
median step time (forward, backward, Adam) and target tokens per second, csan both in plain float32
eager mode and in the mode ``auto`` picks on this machine (bf16 autocast and torch.compile where the CPU
computes bf16 natively; see :mod:`csan.machine`).

``csan bench translate``: sentences per second of beam search on a test set with a trained model.

Results are printed as a table and written, with the machine, to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "TorchTransformer",
    "main",
    "run_train_bench",
    "run_translate_bench",
    "run_variant_bench",
    "variant_table",
]


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
    """Median step time of csan (float32 eager, and the mode ``auto`` picks) and torch.nn.Transformer.

    All three train on the same ``steps`` real batches of the preset's corpus, interleaved. The second
    csan row runs what the preset's ``train.cpu_bf16`` / ``train.compile`` choose on this machine
    (:func:`csan.machine.choose_runtime`); where that is float32 eager too, the two csan rows are
    two models in the same mode (their difference is the bench's noise). Every system steps with
    PyTorch's fused Adam, as the trainer does.
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
    from csan.machine import choose_runtime

    auto = choose_runtime(tc.cpu_bf16, tc.compile, device="cpu", warn=False)
    ours2 = build_model(m, len(data.spm))
    fast = TranslationLoss(ours2, epsilon=tc.label_smoothing)
    fast_fn = torch.compile(fast, dynamic=True) if auto.compile else fast
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


class _RecompileLimitWatch(logging.Handler):
    """Collects TorchDynamo's "hit config.recompile_limit" warnings: past that limit a function runs eager."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.hits: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "recompile_limit" in message:
            self.hits.append(message.splitlines()[0])


@contextlib.contextmanager
def compiled_side_by_side(models: int) -> Iterator[None]:
    """Room in TorchDynamo's cache for ``models`` compiled models in one process, and a loud failure if not.

    TorchDynamo caches compiled code per Python function, and every model compiled from the same
    ``forward`` takes its entries (one per model, more when shapes turn dynamic). Past
    ``recompile_limit`` (8) the function silently runs eager, so a side-by-side bench of many
    variants would time the last rows uncompiled. Inside this block the limits grow with ``models``,
    and a limit reached anyway raises :class:`~csan.errors.CsanError` at the end instead of printing
    compiled and eager rows in one table.

    Example:
        >>> import torch._dynamo.config as dynamo_config
        >>> with compiled_side_by_side(11):
        ...     dynamo_config.recompile_limit >= 88
        True
    """
    from csan.errors import CsanError

    limit = max(torch._dynamo.config.recompile_limit, 8 * models)
    total = max(torch._dynamo.config.accumulated_recompile_limit, 32 * models)
    watch = _RecompileLimitWatch()
    logger = logging.getLogger("torch._dynamo")
    logger.addHandler(watch)
    try:
        with torch._dynamo.config.patch(recompile_limit=limit, accumulated_recompile_limit=total):
            yield
    finally:
        logger.removeHandler(watch)
    if watch.hits:
        raise CsanError(
            f"torch.compile fell back to eager mode during the bench ({watch.hits[0]}); "
            "its rows would mix compiled and eager timings: bench fewer variants at a time"
        )


def run_variant_bench(
    config: str = "compare-multi30k",
    *,
    variants: Sequence[str] = ("table1",),
    steps: int = 30,
    warmup: int = 5,
    overrides: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Training speed of each table row, measured side by side: the quiet version of compare's Speed.

    Every variant (names and groups of :mod:`csan.experiments.variants`, the rows ``csan compare`` trains)
    is built by the real :class:`~csan.training.trainer.Trainer` of ``config`` with its overrides, so the
    mode is the runs' own (bf16 autocast, ``torch.compile`` when the config sets them, gradient clipping,
    update_freq). All take the same ``warmup + steps`` updates of real batches, interleaved update by
    update with the order rotating, so that a noisy machine slows every row alike; the first ``warmup``
    updates (compilation) are not timed. Returns one row per variant: parameters, median update time,
    its quartiles, steps/s and speed relative to the first variant.

    Example (two rows of a tiny model, eager, a few updates):
        >>> rows = run_variant_bench("tiny", variants=["vanilla", "csan1d"], steps=2, warmup=1,
        ...     overrides=["train.compile=false"])  # doctest: +SKIP
        >>> [r["variant"] for r in rows]  # doctest: +SKIP
        ['vanilla', 'csan1d']
    """
    import tempfile

    from csan.config import load_config
    from csan.errors import CsanError
    from csan.experiments.variants import resolve_variants
    from csan.info import count_parameters
    from csan.training.trainer import Trainer

    if steps < 1 or warmup < 0:
        raise CsanError(f"--steps must be >= 1 and --warmup >= 0, got {steps} and {warmup}")
    base = load_config(config, list(overrides))
    rows = resolve_variants(variants, base)
    trainers: dict[str, Trainer] = {}
    with (
        compiled_side_by_side(len(rows)),
        tempfile.TemporaryDirectory(prefix="csan-bench-variants-") as tmp,
    ):
        for row in rows:
            if any(o.startswith("data.") for o in row.overrides):
                raise CsanError(f"variant {row.name!r} changes the data; rows must share batches")
            cfg = load_config(config, [*overrides, *row.overrides, "train.evaluate_test=false"])
            trainers[row.name] = Trainer(cfg, Path(tmp) / row.name, progress=False)
        first = trainers[rows[0].name]
        order = first.data.sampler.batches(1)
        per_update = first.cfg.train.update_freq
        groups = [order[i : i + per_update] for i in range(0, len(order), per_update)]
        if len(groups) < warmup + steps:
            raise CsanError(
                f"{config}: one epoch has {len(groups)} updates, fewer than warmup + steps "
                f"({warmup} + {steps})"
            )
        updates = [[first.data.batch(idx) for idx in g] for g in groups[: warmup + steps]]
        times: dict[str, list[float]] = {name: [] for name in trainers}
        names = list(trainers)
        for i, group in enumerate(updates):
            # rotate the order every update: the first system of a round pays for a cold cache
            for name in names[i % len(names) :] + names[: i % len(names)]:
                t0 = time.perf_counter()
                trainers[name]._train_step(group)
                if i >= warmup:
                    times[name].append(time.perf_counter() - t0)
    params = {name: count_parameters(t.model)["total"] for name, t in trainers.items()}
    ref_name = rows[0].name
    ref = statistics.median(times[ref_name])
    out = []
    for row in rows:
        ts = times[row.name]
        med = statistics.median(ts)
        q1, _, q3 = statistics.quantiles(ts, n=4) if len(ts) > 1 else (med, med, med)
        out.append(
            {
                "variant": row.name,
                "description": row.description,
                "params": params[row.name],
                "added_params": params[row.name] - params[ref_name],
                "median_step_ms": round(med * 1e3, 1),
                "q1_step_ms": round(q1 * 1e3, 1),
                "q3_step_ms": round(q3 * 1e3, 1),
                "steps_per_s": round(1 / med, 3),
                "relative_speed": round(ref / med, 3),
                "steps": len(ts),
            }
        )
    return out


def variant_table(rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table of :func:`run_variant_bench` rows."""
    lines = [
        "| variant | params | added | median update (ms) | quartiles (ms) | steps/s | speed vs first |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['variant']} | {r['params']:,} | {r['added_params']:+,} | {r['median_step_ms']} "
        f"| {r['q1_step_ms']}-{r['q3_step_ms']} | {r['steps_per_s']} | {r['relative_speed']:.2f}x |"
        for r in rows
    ]
    return "\n".join(lines)


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
    from csan.machine import machine_info

    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y-%m-%d")
    from csan.machine import describe_machine

    payload = {"machine": machine_info(torch.device("cpu")), **payload}
    path = out / f"{kind}-cpu-{stamp}"
    path.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    header = f"Machine: {describe_machine().summary()}; torch {torch.__version__}.\n\n"
    path.with_suffix(".md").write_text(header + table + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``csan bench train|translate|variants ...``."""
    p = argparse.ArgumentParser(prog="csan bench", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["train", "translate", "variants"])
    p.add_argument(
        "--config",
        help="preset or YAML (train: default multi30k-small; variants: default compare-multi30k)",
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--steps", type=int, help="timed steps per system (train: default 20; variants: 30)"
    )
    p.add_argument("--warmup", type=int, default=5, help="untimed first updates (variants)")
    p.add_argument(
        "--variants",
        default="table1",
        help="rows as in csan compare: names or groups (variants; default table1)",
    )
    p.add_argument("--model", help="model folder (translate)")
    p.add_argument("--src", help="source file (translate)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--out", default="benchmarks/results", help="results folder")
    args = p.parse_args(argv)
    if args.what == "train":
        config = args.config or "multi30k-small"
        rows = run_train_bench(config, steps=args.steps or 20, overrides=args.overrides)
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
            {"config": config, "overrides": args.overrides, "rows": rows},
            table,
            Path(args.out),
        )
    elif args.what == "variants":
        config = args.config or "compare-multi30k"
        rows = run_variant_bench(
            config,
            variants=[v for v in args.variants.split(",") if v.strip()],
            steps=args.steps or 30,
            warmup=args.warmup,
            overrides=args.overrides,
        )
        table = variant_table(rows)
        payload = {
            "config": config,
            "overrides": args.overrides,
            "variants": args.variants,
            "warmup": args.warmup,
            "rows": rows,
        }
        path = _save(f"variants-{Path(config).stem}", payload, table, Path(args.out))
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
