"""``csan ablate``: the sweep points (Fig. 2) and the files, with a fake trainer."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from csan.config import load_config
from csan.errors import CsanError
from csan.experiments.ablate import ablation_points, run_ablation


def test_csan1d_points_end_with_the_whole_sentence() -> None:
    cfg = load_config("tiny")  # max_positions 64
    points = ablation_points("csan1d", cfg)
    assert [label for label, _ in points] == ["1", "3", "5", "7", "9", "11", "13", "15", "whole"]
    assert "model.attention_options.csan1d.window=127" in points[-1][1].overrides


def test_csan2d_head_windows_up_to_the_heads() -> None:
    cfg = load_config("tiny", ["model.heads=8", "model.d_model=64"])
    points = ablation_points("csan2d", cfg)
    assert [label for label, _ in points] == ["1", "3", "5", "7"]
    assert "model.attention_options.csan2d.window=11" in points[0][1].overrides
    with pytest.raises(CsanError, match="csan1d or csan2d"):
        ablation_points("rel_pos", cfg)


def test_ablation_writes_curve_table_and_plot(tmp_path: Path, fake_train) -> None:
    curve = run_ablation(
        "tiny", "csan1d", tmp_path, values=[1, 3], train_fn=fake_train, say=lambda _: None
    )
    assert curve == [("1", 1.0, None), ("3", 3.0, None)]  # the fake's BLEU is the window
    assert [p.name for p in fake_train.calls] == [
        "vanilla-seed1",
        "csan1d-M1-seed1",
        "csan1d-M3-seed1",
    ]
    with open(tmp_path / "ablation-csan1d.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["x"], r["valid_bleu"]) for r in rows] == [
        ("vanilla", "10.0"),
        ("1", "1.0"),
        ("3", "3.0"),
    ]
    md = (tmp_path / "ablation-csan1d.md").read_text()
    assert "| 3 | 3.00 | -7.00 | 0 |" in md and "vanilla baseline: 10.00" in md
    assert (tmp_path / "ablation-csan1d.png").read_bytes()[:4] == b"\x89PNG"


def test_the_default_point_is_the_compare_variant() -> None:
    cfg = load_config("tiny")
    m11 = dict(ablation_points("csan1d", cfg))["11"]
    n3 = dict(ablation_points("csan2d", load_config("tiny", ["model.heads=8", "model.d_model=64"])))
    assert (m11.name, m11.overrides) == ("csan1d", ("model.encoder_attention=csan1d@0",))
    assert n3["3"].name == "csan2d" and n3["1"].name == "csan2d-N1"
    # A config that sets its own window makes M=11 a point of its own.
    other = dict(
        ablation_points("csan1d", load_config("tiny", ["model.attention_options.csan1d.window=5"]))
    )
    assert other["11"].name == "csan1d-M11" and other["5"].name == "csan1d"


def test_ablation_reuses_the_runs_of_a_compare(tmp_path: Path, fake_train) -> None:
    from csan.experiments.compare import run_compare

    run_compare(
        "tiny", ["vanilla", "csan1d"], [1], tmp_path, train_fn=fake_train, say=lambda _: None
    )
    machine = (tmp_path / "machine.json").read_text()
    run_ablation(
        "tiny", "csan1d", tmp_path, values=[3, 11], train_fn=fake_train, say=lambda _: None
    )
    assert [p.name for p in fake_train.calls] == [
        "vanilla-seed1",
        "csan1d-seed1",
        "csan1d-M3-seed1",
    ]
    assert (tmp_path / "machine.json").read_text() == machine  # the compare's record is kept
    assert (tmp_path / "machine-ablation-csan1d.json").is_file()
