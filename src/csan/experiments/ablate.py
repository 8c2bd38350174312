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
``DIR/runs/<label>-seed<seed>/`` (finished runs are skipped), next to a ``vanilla`` baseline run.

The measure is the BLEU of each run's final model on the **validation** split, decoded as the test
split is (beam search with the config's ``decode`` settings) and scored with sacreBLEU: every run's
translations are written to ``runs/<run>/valid.hyp`` (a reused ``csan compare`` run gets them too) and
kept as ``DIR/translations/<run>.valid.hyp.gz``, and the table's BLEU is computed from the kept file.
So ``--report-only`` on a folder holding only the outputs and ``translations/`` (a kept ablation,
without its runs) writes the same ``ablation-<variant>.md`` and ``.csv`` byte for byte. The greedy BLEU
of each run's last validation is recorded beside it (``greedy_valid_bleu``). Outputs:
``ablation-<variant>.csv`` (one row per run), ``ablation-<variant>.md`` (mean ± sd per point, the
references' sha256), ``ablation-<variant>.png`` (vanilla dashed) and ``machine-ablation-<variant>.json``.
"""

from __future__ import annotations

import csv
import inspect
import io
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from csan.attention.csan import Csan1dSelfAttention, Csan2dSelfAttention
from csan.config import Config, load_config
from csan.errors import CsanError
from csan.evaluation import score
from csan.experiments.grid import RunRecord, run_grid
from csan.experiments.plots import ablation_lines
from csan.experiments.report import parse_cell
from csan.experiments.translations import (
    TRANSLATIONS,
    References,
    keep_translation,
    read_split,
    read_translations,
)
from csan.experiments.variants import Variant, lower_half, resolve_variants
from csan.machine import pick_device
from csan.textio import atomic_write_text
from csan.training.final_model import evaluate_test

__all__ = ["ABLATE_DEFAULTS", "ablation_points", "run_ablation"]

ABLATE_DEFAULTS = ("train.valid_bleu=true", "train.evaluate_test=false")
VALID = "valid"  # the split the sweep is scored on (the paper's Fig. 2: its development set)
EvaluateFn = Callable[..., Any]  # csan.training.final_model.evaluate_test's signature
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


def _stats(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


@dataclass
class _Point:
    """One run of the sweep as the table sees it: its record and the BLEU of its kept translations."""

    record: RunRecord
    hyp_file: str = ""  # translations/<run>.valid.hyp.gz
    bleu: float | None = None


def _translate_valid(
    record: RunRecord, cfg: Config, src: list[str], refs: References, evaluate_fn: EvaluateFn
) -> None:
    """Write ``runs/<run>/valid.hyp`` by decoding the run's final model, unless it is there."""
    run_dir = Path(record.run_dir)
    if not (run_dir / f"{VALID}.hyp").is_file():
        split = SimpleNamespace(src_text=src, tgt_text=refs.lines)
        evaluate_fn(
            run_dir / "model", split, cfg, run_dir, device=pick_device(cfg.train.device), name=VALID
        )


def run_ablation(
    source: str,
    variant: str,
    out_dir: str | Path,
    *,
    seeds: Sequence[int] = (1,),
    values: Sequence[int] | None = None,
    overrides: Sequence[str] = (),
    train_fn: Any = None,
    evaluate_fn: EvaluateFn | None = None,
    progress: bool = False,
    say: Callable[[str], None] = print,
    command: str | None = None,
    train: bool = True,
) -> list[tuple[str, float | None, float | None]]:
    """Train the sweep and the vanilla baseline, translate the validation split with every final
    model, keep the translations; write the CSV, table and plot; return the points.

    ``train=False`` (``--report-only``): nothing is trained or translated; a run that has not
    finished in ``runs/`` is taken from the folder's own ``ablation-<variant>.csv`` and its kept
    translations, so a kept ablation (without ``runs/``) gives its table back byte for byte.
    ``evaluate_fn``: what decodes a split (default :func:`csan.training.final_model.evaluate_test`).

    Example (stand-ins for the trainer and the decoder: the M=1 run translates every line as "x",
    the others copy the references):
        >>> import json, tempfile
        >>> from csan.config import dump_config
        >>> d = Path(tempfile.mkdtemp())
        >>> for split in ("train", "valid"):
        ...     _ = (d / f"{split}.en").write_text("a dog runs .\\na cat sleeps .\\n")
        ...     _ = (d / f"{split}.de").write_text("ein Hund rennt .\\neine Katze ruht .\\n")
        >>> def fake_train(cfg, run_dir, *, progress=False):  # what a finished run folder holds
        ...     run_dir.mkdir(parents=True)
        ...     _ = (run_dir / "config.yaml").write_text(dump_config(cfg))
        ...     _ = (run_dir / "results.json").write_text('{"steps": 5, "stop_reason": "done"}')
        >>> def fake_evaluate(model_dir, split, cfg, run_dir, *, device, name):
        ...     hyps = ["x"] * len(split.tgt_text) if "M1-" in run_dir.name else split.tgt_text
        ...     _ = (run_dir / f"{name}.hyp").write_text("\\n".join(hyps) + "\\n")
        >>> points = run_ablation("tiny", "csan1d", d / "out", values=[1, 11],
        ...                       overrides=[f"data.data_dir={d}"], train_fn=fake_train,
        ...                       evaluate_fn=fake_evaluate)  # doctest: +ELLIPSIS
        [1/3] vanilla seed 1: training in .../out/runs/vanilla-seed1
        [2/3] csan1d-M1 seed 1: training in .../out/runs/csan1d-M1-seed1
        [3/3] csan1d seed 1: training in .../out/runs/csan1d-seed1
        wrote .../out/ablation-csan1d.md, .csv, .png
        >>> [(m, round(bleu, 2), sd) for m, bleu, sd in points]  # one seed: no sd
        [('1', 0.0, None), ('11', 100.0, None)]
        >>> sorted(p.name for p in (d / "out" / "translations").iterdir())
        ['csan1d-M1-seed1.valid.hyp.gz', 'csan1d-seed1.valid.hyp.gz', 'vanilla-seed1.valid.hyp.gz']
    """
    evaluate_fn = evaluate_fn or evaluate_test
    base_cfg = load_config(source, [*ABLATE_DEFAULTS, *overrides])
    points = ablation_points(variant, base_cfg, values)
    baseline = resolve_variants(["vanilla"], base_cfg)[0]
    labels = {v.name: label for label, v in points}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"ablation-{variant}"
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
        train=train,
        machine=f"machine-ablation-{variant}.json",  # beside a `csan compare`'s machine.json
        command=command,
    )
    src, refs = read_split(base_cfg, VALID)
    kept = {} if train else _read_kept(stem.with_suffix(".csv"))
    table: list[_Point] = []
    for r in records:
        if r.status == "not run" and (r.variant, r.seed) in kept:
            table.append(kept[(r.variant, r.seed)])  # a kept run: its record and translations
        elif r.status == "ok":
            hyp = Path(r.run_dir) / f"{VALID}.hyp"
            if train:
                _translate_valid(r, base_cfg, src, refs, evaluate_fn)
            if not hyp.is_file():
                raise CsanError(
                    f"{hyp}: no validation translations (run the command without --report-only)"
                )
            rel = keep_translation(out, Path(r.run_dir), hyp).relative_to(out).as_posix()
            table.append(_Point(r, rel))
        else:
            table.append(_Point(r))
    for p in table:
        if p.hyp_file:
            p.bleu = score(read_translations(out / p.hyp_file), refs.lines).bleu

    def values_of(name: str) -> list[float]:
        return [p.bleu for p in table if p.record.variant == name and p.bleu is not None]

    curve = [(label, *_stats(values_of(v.name))) for label, v in points]
    base_mean, base_sd = _stats(values_of(baseline.name))
    axis = "window M" if variant == "csan1d" else f"head window N (window {CSAN2D_WINDOW})"
    _write_csv(stem.with_suffix(".csv"), table, labels)
    dc = base_cfg.decode
    lines = [
        f"# {variant}: validation BLEU over the {axis} — after Yang et al. 2019, Fig. 2",
        "",
        f"| {axis} | valid BLEU (mean ± sd) | Δ vs vanilla | runs failed |",
        "|---|---:|---:|---:|",
    ]
    for (label, mean, sd), (_, v) in zip(curve, points):
        failed = sum(p.record.status == "failed" for p in table if p.record.variant == v.name)
        delta = "—" if mean is None or base_mean is None else f"{mean - base_mean:+.2f}"
        lines.append(f"| {label} | {_fmt(mean, sd)} | {delta} | {failed} |")
    missing = [f"{p.record.variant} seed {p.record.seed}" for p in table if p.bleu is None]
    lines += [
        "",
        f"- vanilla baseline: {_fmt(base_mean, base_sd)}. Placement: encoder layers "
        f"{lower_half(base_cfg)}; config `{source}`"
        + (f" with `{' '.join(overrides)}`" if overrides else "")
        + ".",
        f"- sacreBLEU of each run's final model on the validation split (beam {dc.beam}, length "
        f"penalty {dc.lenpen}), mean ± sample sd over seeds {', '.join(map(str, seeds))}; "
        f"translations in `{TRANSLATIONS}/<run>.{VALID}.hyp.gz`, references `{refs.file.name}` "
        f"({len(refs.lines)} lines, sha256 `{refs.sha256}`).",
        *([f"- No BLEU (not run or failed): {', '.join(missing)}."] if missing else []),
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


CSV_COLUMNS = (
    "variant", "x", "seed", "status", "valid_bleu", "greedy_valid_bleu", "valid_accuracy", "steps",
    "steps_per_s", "train_minutes", "error", "run_dir", "hyp_file",
)  # fmt: skip


def _write_csv(path: Path, table: Sequence[_Point], labels: dict[str, str]) -> None:
    """One row per run; ``valid_bleu`` is the kept translations' BLEU (written atomically)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for p in table:
        r = p.record
        row = {
            **r.to_dict(),
            "x": labels.get(r.variant, "vanilla"),
            "valid_bleu": p.bleu,
            "greedy_valid_bleu": r.valid_bleu,
            "hyp_file": p.hyp_file,
        }
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in CSV_COLUMNS})
    atomic_write_text(path, text.getvalue())


# the CSV columns a kept run's record is read back from, and its RunRecord field for each
_KEPT_FIELDS = {
    "steps": "steps",
    "steps_per_s": "steps_per_s",
    "train_minutes": "train_minutes",
    "greedy_valid_bleu": "valid_bleu",
    "valid_accuracy": "valid_accuracy",
}


def _read_kept(path: Path) -> dict[tuple[str, int], _Point]:
    """The runs of an earlier ``ablation-<variant>.csv`` that finished or failed, by (variant, seed);
    a bad cell is a :class:`CsanError` naming the file and line."""
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    kept = {}
    for line, row in enumerate(rows, start=2):
        if row["status"] == "not run":
            continue
        try:
            fields = {
                field: parse_cell(field, row[column]) for column, field in _KEPT_FIELDS.items()
            }
            seed = int(row["seed"])
        except ValueError as err:
            raise CsanError(f"{path}, line {line}: {err}") from None
        record = RunRecord(
            row["variant"], seed, row["run_dir"], row["status"], row["error"], **fields
        )
        kept[(record.variant, seed)] = _Point(
            record, row["hyp_file"] if record.status == "ok" else ""
        )
    return kept
