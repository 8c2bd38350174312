"""``csan bench variants``: the rows of a compare table trained side by side, update by update."""

from __future__ import annotations

import contextlib
import logging
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from csan.config import load_config
from csan.errors import CsanError
from csan.experiments.variants import resolve_variants
from csan.info import count_parameters
from csan.training.trainer import Trainer

__all__ = ["compiled_side_by_side", "run_variant_bench", "variant_table"]


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
    update with the order rotating, so that a noisy machine slows every row alike (a corpus of fewer
    batches goes round again, reshuffled); the first ``warmup`` updates (compilation) are not timed.
    Returns one row per variant: parameters, median update time, its quartiles, steps/s and speed
    relative to the first variant.

    Example (two rows of a tiny model, eager, a few updates):
        >>> rows = run_variant_bench("tiny", variants=["vanilla", "csan1d"], steps=2, warmup=1,
        ...     overrides=["train.compile=false"])  # doctest: +SKIP
        >>> [r["variant"] for r in rows]  # doctest: +SKIP
        ['vanilla', 'csan1d']
    """

    if steps < 1 or warmup < 0:
        raise CsanError(f"--steps must be >= 1 and --warmup >= 0, got {steps} and {warmup}")
    base = load_config(config, list(overrides))
    rows = resolve_variants(variants, base)
    trainers: dict[str, Trainer] = {}
    with (
        compiled_side_by_side(len(rows)),
        tempfile.TemporaryDirectory(prefix="csan-bench-variants-") as tmp,
        contextlib.ExitStack() as open_trainers,
    ):
        for row in rows:
            if any(o.startswith("data.") for o in row.overrides):
                raise CsanError(f"variant {row.name!r} changes the data; rows must share batches")
            cfg = load_config(config, [*overrides, *row.overrides, "train.evaluate_test=false"])
            trainer = Trainer(cfg, Path(tmp) / row.name, progress=False)
            trainers[row.name] = open_trainers.enter_context(trainer)
        first = trainers[rows[0].name]
        per_update = first.cfg.train.update_freq
        # a corpus of fewer batches goes round again, reshuffled, as in `csan bench train`
        order = first.data.sampler.take((warmup + steps) * per_update)
        updates = [
            [first.data.batch(idx) for idx in order[i : i + per_update]]
            for i in range(0, len(order), per_update)
        ]
        times: dict[str, list[float]] = {name: [] for name in trainers}
        names = list(trainers)
        for i, group in enumerate(updates):
            # rotate the order every update: the first system of a round pays for a cold cache
            for name in names[i % len(names) :] + names[: i % len(names)]:
                t0 = time.perf_counter()
                trainers[name].train_step(group)
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
    """The Markdown table of :func:`run_variant_bench` rows.

    Example:
        >>> base = {"variant": "vanilla", "params": 7578624, "added_params": 0,
        ...         "median_step_ms": 250.0, "q1_step_ms": 245.1, "q3_step_ms": 256.3,
        ...         "steps_per_s": 4.0, "relative_speed": 1.0}
        >>> csan = {**base, "variant": "csan1d", "params": 7588624, "added_params": 10000,
        ...         "median_step_ms": 312.5, "q1_step_ms": 305.0, "q3_step_ms": 320.9,
        ...         "steps_per_s": 3.2, "relative_speed": 0.8}
        >>> header, rule, *rows = variant_table([base, csan]).splitlines()
        >>> header.split(" | ")[3:5], rule
        (['median update (ms)', 'quartiles (ms)'], '|---|---:|---:|---:|---:|---:|---:|')
        >>> for row in rows:
        ...     print(row)
        | vanilla | 7,578,624 | +0 | 250.0 | 245.1-256.3 | 4.0 | 1.00x |
        | csan1d | 7,588,624 | +10,000 | 312.5 | 305.0-320.9 | 3.2 | 0.80x |
    """
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
