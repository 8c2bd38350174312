"""The kept distorted-MNIST tables can be checked: every run's test error is its committed predictions
scored against the MNIST test labels, and ``csan stn --report-only`` on a copy of the committed folder
(predictions, results and settings, no weights) gives its ``table.md``, ``results.csv`` and
``summary.json`` back byte for byte.

A table is found by walking ``benchmarks/results/`` for a ``summary.json`` whose settings name
distortions, so that a new one is covered when it is committed.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from csan.experiments.stn import StnConfig
from csan.experiments.stn.report import read_predictions
from csan.experiments.stn.run import run_stn
from csan.spatial.mnist import load_mnist

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _stn_tables() -> list[Path]:
    found = []
    for path in sorted(RESULTS.rglob("summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(summary, dict) and "distortions" in (summary.get("settings") or {}):
            found.append(path)
    return found


TABLES = _stn_tables()


def _name(path: Path) -> str:
    return path.parent.relative_to(RESULTS).as_posix()


def _config(summary: dict) -> StnConfig:
    types = {f.name: f.type for f in dataclasses.fields(StnConfig)}
    settings = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in summary["settings"].items()
        if k in types
    }
    return StnConfig(**settings)


def test_the_spatial_transformer_table_is_kept() -> None:
    assert any(path.parent.name.startswith("stn-mnist") for path in TABLES), (
        "the distorted-MNIST table of issue 19 should be under benchmarks/results/stn-mnist-*"
    )


@pytest.mark.parametrize("summary_path", TABLES, ids=_name)
def test_each_kept_run_scores_to_its_test_error(summary_path: Path, mnist_dir: Path) -> None:
    cfg = _config(json.loads(summary_path.read_text(encoding="utf-8")))
    _, labels = load_mnist("test", data_dir=mnist_dir)
    labels = labels[: cfg.test_images]
    runs = sorted((summary_path.parent / "runs").glob("*/*/result.json"))
    assert runs, f"{summary_path.parent}: no kept runs"
    for result_path in runs:
        result = json.loads(result_path.read_text(encoding="utf-8"))
        predictions = read_predictions(result_path.parent)
        assert predictions.shape == labels.shape, result_path
        error = 100.0 * (predictions != labels).to(torch.float32).mean().item()
        assert error == pytest.approx(result["test_error"], abs=1e-9), result_path


@pytest.mark.parametrize("summary_path", TABLES, ids=_name)
def test_a_kept_stn_table_comes_back_from_its_files(
    summary_path: Path, mnist_dir: Path, tmp_path: Path
) -> None:
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    copy = tmp_path / "table"
    shutil.copytree(summary_path.parent, copy, ignore=shutil.ignore_patterns("*.png"))
    run_stn(
        _config(summary),
        copy,
        preset=summary["preset"],
        data_dir=mnist_dir,
        train=False,
        say=lambda _: None,
        command=summary["command"],
    )
    for name in ("table.md", "results.csv", "summary.json", "machine.json"):
        assert (copy / name).read_bytes() == (summary_path.parent / name).read_bytes(), name
