"""``csan ablate``: validation BLEU over the window sizes (after Yang et al. 2019, Fig. 2).

- ``csan1d``: window ``M`` in {1, 3, ..., 15, whole}; "whole" is ``M = 2 * max_positions - 1``, which
  covers every sentence the model accepts (SPEC: ``M >= 2I - 1`` equals vanilla attention).
- ``csan2d``: head window ``N`` in {1, 3, ..., H} (odd, at most the number of heads), window fixed at 11.

The point at the variant's own setting (M = 11; N = 3 with M = 11, unless the config sets other options)
is the plain ``csan1d`` / ``csan2d`` variant of ``csan compare``, with the same run folder name: an ablation
written into a ``csan compare`` output folder (same config and seeds) reuses those runs and the
``vanilla`` ones instead of training them again.

Every point is a training run in the paper's placement (the lower half of the encoder, see
:mod:`csan.experiments.variants`), trained by the same machinery as ``csan compare`` into
``DIR/runs/<label>-seed<seed>/`` (finished runs are skipped), next to a ``vanilla`` baseline run. The
measure is the BLEU of the **last** validation (greedy decoding; ``train.valid_bleu`` is switched on and
test scoring off unless a ``--set`` says otherwise). Outputs: ``ablation-<variant>.csv`` (one row per
run), ``ablation-<variant>.md`` (mean ± sd per point), ``ablation-<variant>.png`` (vanilla dashed) and
``machine-ablation-<variant>.json``.
"""

from __future__ import annotations

import csv
import inspect
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from csan.attention.csan import Csan1dSelfAttention, Csan2dSelfAttention
from csan.config import Config, load_config
from csan.errors import CsanError
from csan.experiments.grid import RunRecord, run_grid, write_machine
from csan.experiments.plots import ablation_lines
from csan.experiments.variants import Variant, lower_half, resolve_variants

__all__ = ["ABLATE_DEFAULTS", "ablation_points", "run_ablation"]

ABLATE_DEFAULTS = ("train.valid_bleu=true", "train.evaluate_test=false")
CSAN2D_WINDOW = 11


def ablation_points(
    variant: str, cfg: Config, values: Sequence[int] | None = None
) -> list[tuple[str, Variant]]:
    """(x label, run variant) for each point of the sweep of ``variant`` under base config ``cfg``.

    Example:
        >>> cfg = load_config("tiny")  # 4 heads, 2 encoder layers
        >>> [label for label, _ in ablation_points("csan2d", cfg)]
        ['1', '3']
        >>> ablation_points("csan1d", cfg, [5])[0][1].overrides
        ('model.encoder_attention=csan1d@0', 'model.attention_options.csan1d.window=5')
    """
    if variant not in ("csan1d", "csan2d"):
        raise CsanError(f"ablate: --variant must be csan1d or csan2d, got {variant!r}")
    where = lower_half(cfg)
    place = f"model.encoder_attention={variant}@{where}"
    default = Variant(variant, (place,), "")  # the variant as `csan compare` trains it
    points: list[tuple[str, Variant]] = []
    if variant == "csan1d":
        labels = [str(m) for m in values] if values else [*map(str, range(1, 16, 2)), "whole"]
        own_window = _option(cfg, "csan1d", "window")
        for label in labels:
            window = 2 * cfg.model.max_positions - 1 if label == "whole" else int(label)
            if window == own_window:
                points.append((label, replace(default, description=f"M={label}")))
                continue
            option = f"model.attention_options.csan1d.window={window}"
            points.append((label, Variant(f"csan1d-M{label}", (place, option), f"M={label}")))
    else:
        heads = cfg.model.heads
        own_n = _option(cfg, "csan2d", "head_window")
        if _option(cfg, "csan2d", "window") != CSAN2D_WINDOW:
            own_n = None  # the config's csan2d is not a point of this sweep
        for n in values or range(1, heads + 1, 2):
            if n == own_n:
                points.append((str(n), replace(default, description=f"N={n}")))
                continue
            options = (
                f"model.attention_options.csan2d.window={CSAN2D_WINDOW}",
                f"model.attention_options.csan2d.head_window={n}",
            )
            points.append((str(n), Variant(f"csan2d-N{n}", (place, *options), f"N={n}")))
    return points


def _option(cfg: Config, variant: str, name: str) -> Any:
    """The value of a CSAN layer's option under ``cfg``: the config's, else the class default."""
    cls = {"csan1d": Csan1dSelfAttention, "csan2d": Csan2dSelfAttention}[variant]
    configured = cfg.model.attention_options.get(variant) or {}
    return configured.get(name, inspect.signature(cls).parameters[name].default)


def _stats(records: Sequence[RunRecord]) -> tuple[float | None, float | None]:
    values = [r.valid_bleu for r in records if r.status == "ok" and r.valid_bleu is not None]
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def run_ablation(
    source: str,
    variant: str,
    out_dir: str | Path,
    *,
    seeds: Sequence[int] = (1,),
    values: Sequence[int] | None = None,
    overrides: Sequence[str] = (),
    train_fn: Any = None,
    progress: bool = False,
    say: Callable[[str], None] = print,
    command: str | None = None,
) -> list[tuple[str, float | None, float | None]]:
    """Train the sweep and the vanilla baseline; write the CSV, table and plot; return the points."""
    base_cfg = load_config(source, [*ABLATE_DEFAULTS, *overrides])
    points = ablation_points(variant, base_cfg, values)
    baseline = resolve_variants(["vanilla"], base_cfg)[0]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_machine(
        out,
        base_cfg,
        name=f"machine-ablation-{variant}.json",  # beside a `csan compare`'s machine.json
        command=command,
        config=source,
        overrides=list(overrides),
    )
    records = run_grid(
        source,
        [baseline, *(v for _, v in points)],
        seeds,
        out,
        overrides=overrides,
        defaults=ABLATE_DEFAULTS,
        train_fn=train_fn,
        progress=progress,
        say=say,
    )
    by_name = {
        name: [r for r in records if r.variant == name] for name in {r.variant for r in records}
    }
    curve = [(label, *_stats(by_name[v.name])) for label, v in points]
    base_mean, base_sd = _stats(by_name[baseline.name])
    axis = "window M" if variant == "csan1d" else f"head window N (window {CSAN2D_WINDOW})"
    stem = out / f"ablation-{variant}"
    _write_csv(stem.with_suffix(".csv"), records, {v.name: label for label, v in points})
    lines = [
        f"# {variant}: validation BLEU over the {axis} — after Yang et al. 2019, Fig. 2",
        "",
        f"| {axis} | valid BLEU (mean ± sd) | Δ vs vanilla | runs failed |",
        "|---|---:|---:|---:|",
    ]
    for (label, mean, sd), (_, v) in zip(curve, points):
        failed = sum(r.status != "ok" for r in by_name[v.name])
        delta = "—" if mean is None or base_mean is None else f"{mean - base_mean:+.2f}"
        lines.append(f"| {label} | {_fmt(mean, sd)} | {delta} | {failed} |")
    lines += [
        "",
        f"- vanilla baseline: {_fmt(base_mean, base_sd)}. Placement: encoder layers "
        f"{lower_half(base_cfg)}; config `{source}`"
        + (f" with `{' '.join(overrides)}`" if overrides else "")
        + ".",
        "- BLEU of the last validation of each run (greedy), mean ± sample sd over seeds "
        f"{', '.join(map(str, seeds))}.",
        "",
    ]
    stem.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")
    ablation_lines(curve, base_mean, stem.with_suffix(".png"), xlabel=axis, title=variant)
    say(f"wrote {stem}.md, .csv, .png")
    return curve


def _fmt(mean: float | None, sd: float | None) -> str:
    if mean is None:
        return "—"
    return f"{mean:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")


def _write_csv(path: Path, records: Sequence[RunRecord], labels: dict[str, str]) -> None:
    columns = ["variant", "x", "seed", "status", "valid_bleu", "valid_accuracy", "steps"]
    columns += ["steps_per_s", "train_minutes", "error", "run_dir"]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in records:
            row = {**r.to_dict(), "x": labels.get(r.variant, "vanilla")}
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in columns})
