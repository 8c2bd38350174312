"""``csan ablate``: the sweep points (Fig. 2) and the files, with a fake trainer and decoder."""

from __future__ import annotations

import csv
import gzip
import hashlib
import shutil
from pathlib import Path

import pytest

from csan.config import load_config
from csan.errors import CsanError
from csan.evaluation import score
from csan.experiments.ablate import ablation_points, run_ablation
from csan.experiments.translations import read_translations


@pytest.fixture
def sweep(fake_train, fake_evaluate, small_corpus: Path):
    """``sweep(out, values, train=True)``: a csan1d sweep of the tiny preset on the small corpus,
    trained and decoded by the fakes (``train=False``: ``--report-only``)."""

    def run(out: Path, values: list[int], *, train: bool = True):
        return run_ablation(
            "tiny", "csan1d", out, values=values, overrides=[f"data.data_dir={small_corpus}"],
            train_fn=fake_train, evaluate_fn=fake_evaluate, train=train, say=lambda _: None,
        )  # fmt: skip

    return run


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


def test_ablation_scores_kept_validation_translations(
    tmp_path: Path, sweep, fake_train, fake_evaluate, small_corpus: Path
) -> None:
    out = tmp_path / "sweep"
    curve = sweep(out, [1, 3])
    names = ["vanilla-seed1", "csan1d-M1-seed1", "csan1d-M3-seed1"]
    assert [p.name for p in fake_train.calls] == names
    assert [p.name for p in fake_evaluate.calls] == names  # every final model decodes valid
    refs = (small_corpus / "valid.de").read_text(encoding="utf-8").splitlines()
    with open(out / "ablation-csan1d.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["x"], r["greedy_valid_bleu"]) for r in rows] == [
        ("vanilla", "10.0"),
        ("1", "1.0"),
        ("3", "3.0"),
    ]
    # the table's BLEU is sacreBLEU on the kept translations, against the validation references
    for row in rows:
        kept = out / row["hyp_file"]
        assert kept.name == f"{Path(row['run_dir']).name}.valid.hyp.gz"
        bleu = score(read_translations(kept), refs).bleu
        assert float(row["valid_bleu"]) == bleu
    by_x = {r["x"]: float(r["valid_bleu"]) for r in rows}
    assert by_x["1"] < by_x["3"] < by_x["vanilla"]  # the fake copies more references for wider M
    assert curve == [("1", by_x["1"], None), ("3", by_x["3"], None)]
    md = (out / "ablation-csan1d.md").read_text()
    assert f"| 3 | {by_x['3']:.2f} | {by_x['3'] - by_x['vanilla']:+.2f} | 0 |" in md
    assert f"vanilla baseline: {by_x['vanilla']:.2f}" in md
    assert hashlib.sha256((small_corpus / "valid.de").read_bytes()).hexdigest() in md
    assert (out / "ablation-csan1d.png").read_bytes()[:4] == b"\x89PNG"

    # a second call decodes nothing again; a kept sweep (no runs/) reports the same bytes
    sweep(out, [1, 3])
    assert len(fake_train.calls) == len(fake_evaluate.calls) == 3
    kept = tmp_path / "kept"
    shutil.copytree(out, kept, ignore=shutil.ignore_patterns("runs"))
    sweep(kept, [1, 3], train=False)
    for name in ("ablation-csan1d.md", "ablation-csan1d.csv", "machine-ablation-csan1d.json"):
        assert (kept / name).read_bytes() == (out / name).read_bytes(), name

    # ... and a changed translation changes the table
    hyp = kept / rows[2]["hyp_file"]
    lines = read_translations(hyp)
    lines[0] = "x"
    hyp.write_bytes(gzip.compress("".join(t + "\n" for t in lines).encode()))
    sweep(kept, [1, 3], train=False)
    assert (kept / "ablation-csan1d.md").read_bytes() != (out / "ablation-csan1d.md").read_bytes()


def test_report_only_needs_the_translations(tmp_path: Path, sweep) -> None:
    sweep(tmp_path, [3])
    (tmp_path / "runs" / "csan1d-M3-seed1" / "valid.hyp").unlink()
    with pytest.raises(CsanError, match=r"valid\.hyp: no validation translations"):
        sweep(tmp_path, [3], train=False)


def test_report_only_names_a_bad_cell_of_the_kept_csv(tmp_path: Path, sweep) -> None:
    sweep(tmp_path, [3])
    kept = tmp_path / "kept"
    shutil.copytree(tmp_path, kept, ignore=shutil.ignore_patterns("runs", "kept"))
    table = kept / "ablation-csan1d.csv"
    lines = table.read_bytes().decode().split("\r\n")
    cells = lines[2].split(",")
    cells[7] = "six"  # the steps column
    lines[2] = ",".join(cells)
    table.write_bytes("\r\n".join(lines).encode())
    with pytest.raises(CsanError, match=r"ablation-csan1d\.csv, line 3: column steps: 'six'"):
        sweep(kept, [3], train=False)


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


def test_ablation_reuses_the_runs_of_a_compare(
    tmp_path: Path, fake_train, fake_evaluate, small_corpus: Path
) -> None:
    from csan.experiments.compare import run_compare

    data = [f"data.data_dir={small_corpus}"]
    run_compare(
        "tiny", ["vanilla", "csan1d"], [1], tmp_path, overrides=data, train_fn=fake_train,
        say=lambda _: None,
    )  # fmt: skip
    machine = (tmp_path / "machine.json").read_text()
    run_ablation(
        "tiny", "csan1d", tmp_path, values=[3, 11], overrides=data, train_fn=fake_train,
        evaluate_fn=fake_evaluate, say=lambda _: None,
    )  # fmt: skip
    assert [p.name for p in fake_train.calls] == [
        "vanilla-seed1",
        "csan1d-seed1",
        "csan1d-M3-seed1",
    ]
    # the compare's runs get their validation translations too
    assert sorted(p.name for p in fake_evaluate.calls) == [
        "csan1d-M3-seed1",
        "csan1d-seed1",
        "vanilla-seed1",
    ]
    assert (tmp_path / "machine.json").read_text() == machine  # the compare's record is kept
    assert (tmp_path / "machine-ablation-csan1d.json").is_file()


def test_a_real_sweep_decodes_valid_with_each_final_model(
    tmp_path: Path, small_overrides: list[str], small_corpus: Path
) -> None:
    """The real trainer and decoder (a few steps of the tiny model): the default path end to end."""
    curve = run_ablation(
        "tiny", "csan1d", tmp_path, values=[3], overrides=small_overrides, say=lambda _: None
    )
    with open(tmp_path / "ablation-csan1d.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["x"], r["status"]) for r in rows] == [("vanilla", "ok"), ("3", "ok")]
    refs = (small_corpus / "valid.de").read_text(encoding="utf-8").splitlines()
    for row in rows:
        hyps = (Path(row["run_dir"]) / "valid.hyp").read_text(encoding="utf-8").splitlines()
        assert len(hyps) == len(refs) == 16
        assert read_translations(tmp_path / row["hyp_file"]) == hyps
        assert float(row["valid_bleu"]) == score(hyps, refs).bleu
    assert curve == [("3", float(rows[1]["valid_bleu"]), None)]
