"""``csan stn``: every distortion x row x seed trained into one folder, then the table and the figures.

``DIR/runs/<distortion>/<row>-seed<k>/`` holds each run (resumable; see
:mod:`csan.experiments.stn.train`); finished runs are skipped, so the same command continues a table.
Then:

- ``DIR/table.md`` and ``DIR/results.csv``: test error mean ± sd per row and distortion, the paired
  sign test against the baseline row (:mod:`csan.experiments.stn.report`), the published numbers;
- ``DIR/summary.json``: the same numbers, the settings and the command;
- ``DIR/machine.json``: the machine (:func:`csan.machine.machine_info`), with the settings (written
  when training; a report keeps it, and the recorded command when only ``--out`` differs, so a kept
  folder of ``predictions.txt``, ``result.json`` and ``run.json`` files, without the weights, gives the
  same ``table.md``, ``results.csv`` and ``summary.json`` byte for byte);
- ``DIR/transforms-RTS.png``, ``DIR/transforms-clutter.png``: inputs and what the affine transformer
  made of them; ``DIR/curves.png``: test error over training steps.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from csan.errors import CsanError
from csan.experiments.recorded import recorded_command
from csan.experiments.stn.config import PRESET_NOTES, StnConfig
from csan.experiments.stn.data import DistortedSet, load_distorted
from csan.experiments.stn.figures import curves_figure, transforms_figure
from csan.experiments.stn.models import ROWS, build_model, transformer_of
from csan.experiments.stn.report import collect, summarize, write_table
from csan.experiments.stn.train import train_run
from csan.machine import machine_info
from csan.textio import atomic_write_text

__all__ = ["FIGURE_DISTORTIONS", "run_stn"]

FIGURE_DISTORTIONS = ("RTS", "clutter")  # the transforms figures (when the table has them)
FIGURE_ROW = "st-cnn-affine"


def run_stn(
    cfg: StnConfig,
    out_dir: str | Path,
    *,
    preset: str | None = None,
    data_dir: str | Path | None = None,
    train: bool = True,
    say: Callable[[str], Any] = print,
    command: str | None = None,
) -> list[dict[str, Any]]:
    """Train what is not finished (unless ``train=False``) and write the table, figures and records.

    Returns the table's records (one per row x distortion). A run that fails is recorded in its folder
    (``error.txt``) and listed in the table's notes; the others go on.

    Example (needs the MNIST files, see :func:`csan.spatial.mnist_dir`; seconds)::

        from csan.experiments.stn import stn_config
        records = run_stn(stn_config("tiny"), "runs/stn-tiny", preset="tiny")
        [(r["row"], r["distortion"]) for r in records]  # cnn and st-cnn-affine on RTS
        run_stn(stn_config("tiny"), "runs/stn-tiny", train=False)  # the table again, from the runs
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    settings = dataclasses.asdict(cfg)
    # a report keeps the record of the machine that trained
    if train or not (out / "machine.json").is_file():
        machine = machine_info("cpu", threads_setting=cfg.threads, command=command, preset=preset)
        atomic_write_text(
            out / "machine.json", json.dumps({**machine, "settings": settings}, indent=2) + "\n"
        )
    if not train:
        command = recorded_command(_previous_command(out), command)
    failures: list[str] = []
    labels: dict[str, torch.Tensor] = {}
    sets: dict[str, DistortedSet] = {}
    for d in cfg.distortions:
        pending = [
            (r, s)
            for r in cfg.rows
            for s in cfg.seeds
            if not (out / "runs" / d / f"{r}-seed{s}" / "result.json").is_file()
        ]
        if not (pending and train) and not _needs_data_for_report(out, cfg, d):
            continue
        started = time.perf_counter()
        data = load_distorted(
            d,
            train_images=cfg.train_images if pending and train else 0,
            test_images=cfg.test_images,
            data_seed=cfg.data_seed,
            data_dir=data_dir,
        )
        say(
            f"{d}: {cfg.train_images} + {cfg.test_images} images distorted in {time.perf_counter() - started:.0f}s"
        )
        labels[d] = data.test_labels
        if d in FIGURE_DISTORTIONS:
            sets[d] = data
        for r, s in pending if train else []:
            run_dir = out / "runs" / d / f"{r}-seed{s}"
            say(f"{d} {r} seed {s}")
            try:
                train_run(cfg, row=r, seed=s, data=data, run_dir=run_dir, say=say)
            except CsanError:
                raise
            except Exception as e:  # one broken run must not lose the table's other hours
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
                failures.append(f"{d} {r} seed {s}: {type(e).__name__}: {e}")
                say(f"  failed: {failures[-1]} (see {run_dir / 'error.txt'})")
    return _report(cfg, out, labels, sets, failures, preset=preset, command=command, say=say)


def _previous_command(out: Path) -> str | None:
    """The command recorded in ``out/summary.json`` (None when there is none to read)."""
    try:
        return json.loads((out / "summary.json").read_text(encoding="utf-8")).get("command")
    except (OSError, ValueError, AttributeError):
        return None


def _needs_data_for_report(out: Path, cfg: StnConfig, distortion: str) -> bool:
    """The report reads a distortion's test labels (and images for figures) when any run finished."""
    return any(
        (out / "runs" / distortion / f"{r}-seed{s}" / "result.json").is_file()
        for r in cfg.rows
        for s in cfg.seeds
    )


def _report(
    cfg: StnConfig,
    out: Path,
    labels: dict[str, torch.Tensor],
    sets: dict[str, DistortedSet],
    failures: list[str],
    *,
    preset: str | None,
    command: str | None,
    say: Callable[[str], Any],
) -> list[dict[str, Any]]:
    results = collect(out, cfg.distortions, cfg.rows, cfg.seeds)
    records = summarize(out, results, cfg.distortions, cfg.rows, cfg.seeds, labels)
    missing = [
        f"{d} {r} seed {s}"
        for d in cfg.distortions
        for r in cfg.rows
        for s in cfg.seeds
        if (d, r, s) not in results
    ]
    minutes = sum(res["train_seconds"] for res in results.values()) / 60
    notes = [
        f"Preset `{preset}`" + (f", command `{command}`" if command else "") + ".",
        f"{cfg.train_images} training and {cfg.test_images} test digits per distortion, "
        f"epochs {cfg.epochs}, batch {cfg.batch_size}, Adam lr {cfg.lr} ({cfg.schedule}), "
        f"transformer lr x{cfg.st_lr_scale}; seeds {', '.join(map(str, cfg.seeds))}.",
        "p: exact two-sided sign test over the test images of per-image correctness averaged over "
        "the seeds both rows finished (with one seed: the exact McNemar test); wins/losses: images "
        "the row gets right more/less often than its baseline.",
        f"Training time of the finished runs: {minutes:.1f} minutes in all.",
    ]
    if preset in PRESET_NOTES:
        notes.append(PRESET_NOTES[preset])
    if missing:
        notes.append(f"Not run yet: {', '.join(missing)}.")
    notes += [f"Failed: {f}" for f in failures]
    table = write_table(out, records, cfg.distortions, cfg.rows, notes=notes)
    summary = {
        "preset": preset,
        "command": command,
        "settings": dataclasses.asdict(cfg),
        "records": records,
        "missing": missing,
        "failures": failures,
    }
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    _figures(cfg, out, results, sets, say)
    say(table.read_text(encoding="utf-8"))
    say(f"wrote {table}, {out / 'results.csv'}, {out / 'summary.json'}, figures in {out}")
    return records


def _figures(
    cfg: StnConfig, out: Path, results: dict, sets: dict[str, DistortedSet], say: Callable
) -> None:
    curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for d in cfg.distortions:
        curves[d] = {}
        for r in cfg.rows:
            runs = [results[(d, r, s)]["curve"] for s in cfg.seeds if (d, r, s) in results]
            if runs:
                common = min(len(c) for c in runs)
                curves[d][ROWS[r].label] = [
                    (runs[0][i][0], statistics.fmean(c[i][1] for c in runs)) for i in range(common)
                ]
    if any(curves.values()):
        curves_figure(curves, out / "curves.png")
    for d, data in sets.items():
        seed = next((s for s in cfg.seeds if (d, FIGURE_ROW, s) in results), None)
        if seed is None:
            continue
        model = build_model(
            FIGURE_ROW, image_size=data.image_size, st_output=cfg.st_output, tps_grid=cfg.tps_grid
        )
        run_dir = out / "runs" / d / f"{FIGURE_ROW}-seed{seed}"
        if not (run_dir / "model.safetensors").is_file():  # a kept table keeps no weights
            say(f"transforms-{d}.png kept as it is: {run_dir / 'model.safetensors'} is not there")
            continue
        model.load_state_dict(load_file(str(run_dir / "model.safetensors")))
        st = transformer_of(model)
        if st is None:
            continue
        images = data.test_images[: cfg.figure_images]
        title = f"{d}: test inputs and the affine transformer's outputs ({FIGURE_ROW}, seed {seed})"
        transforms_figure(st, images, out / f"transforms-{d}.png", title=title)
