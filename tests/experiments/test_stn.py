"""``csan stn``: a tiny distorted-MNIST table end to end, resuming, the paired test, settings, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from csan.cli import main
from csan.errors import CsanError
from csan.experiments.stn import ROWS, build_model, run_stn, stn_config
from csan.experiments.stn import train as stn_train
from csan.experiments.stn.data import load_distorted
from csan.experiments.stn.report import paired_test, sign_test

TINY = ["distortions=RTS,clutter", "threads=1"]


@pytest.fixture(scope="module")
def tiny_table(mnist_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stn-tiny")
    run_stn(stn_config("tiny", TINY), out, preset="tiny", data_dir=mnist_dir, say=lambda _: None)
    return out


def test_tiny_table_writes_its_table_figures_and_records(tiny_table):
    out = tiny_table
    for name in ("table.md", "results.csv", "summary.json", "machine.json", "curves.png",
                 "transforms-RTS.png", "transforms-clutter.png"):  # fmt: skip
        assert (out / name).is_file(), name
        assert (out / name).stat().st_size > 0
    table = (out / "table.md").read_text(encoding="utf-8")
    assert "| CNN |" in table and "| ST-CNN affine |" in table and "| RTS | clutter |" in table
    assert "ST-CNN affine vs CNN" in table and "sign test" in table
    machine = json.loads((out / "machine.json").read_text(encoding="utf-8"))
    assert {"cpu", "torch", "threads", "settings"} <= set(machine)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    record = next(r for r in summary["records"] if r["row"] == "st-cnn-affine")
    assert record["baseline"] == "cnn" and 0 <= record["p"] <= 1 and len(record["errors"]) == 1
    for run in (out / "runs" / "RTS").iterdir():
        result = json.loads((run / "result.json").read_text(encoding="utf-8"))
        assert result["steps"] == 4 and result["test_images"] == 100
        assert [step for step, _ in result["curve"]] == [0, 2, 4]
        assert len((run / "predictions.txt").read_text().split()) == 100
        assert not (run / "checkpoint").exists()  # removed once the run finished


def test_a_finished_table_is_not_trained_again(tiny_table, mnist_dir):
    out = tiny_table
    before = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*/result.json")}
    said: list[str] = []
    run_stn(stn_config("tiny", TINY), out, preset="tiny", data_dir=mnist_dir, say=said.append)
    assert before == {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*/result.json")}
    assert not any(line.startswith("RTS cnn seed") for line in said)


def test_a_resumed_run_computes_what_an_uninterrupted_one_does(tmp_path, mnist_dir, monkeypatch):
    cfg = stn_config("tiny", ["epochs=2", "checkpoint_every=3"])
    data = load_distorted("RTS", train_images=200, test_images=100, data_seed=0, data_dir=mnist_dir)
    whole = stn_train.train_run(
        cfg, row="st-cnn-affine", seed=1, data=data, run_dir=tmp_path / "a", say=print
    )

    real_save, saves = stn_train._save_checkpoint, []

    def save_then_die(*args, **kwargs):
        real_save(*args, **kwargs)
        saves.append(1)
        if len(saves) == 2:
            raise KeyboardInterrupt  # killed after the second checkpoint (step 4 of 8)

    monkeypatch.setattr(stn_train, "_save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        stn_train.train_run(
            cfg, row="st-cnn-affine", seed=1, data=data, run_dir=tmp_path / "b", say=print
        )
    monkeypatch.setattr(stn_train, "_save_checkpoint", real_save)
    state = json.loads((tmp_path / "b" / "checkpoint" / "state.json").read_text())
    assert state["step"] == 4
    said: list[str] = []
    resumed = stn_train.train_run(
        cfg, row="st-cnn-affine", seed=1, data=data, run_dir=tmp_path / "b", say=said.append
    )
    assert any("resuming b at step 4/8" in line for line in said)
    assert resumed["test_error"] == whole["test_error"] and resumed["curve"] == whole["curve"]
    a, b = (
        load_file(str(tmp_path / "a" / "model.safetensors")),
        load_file(str(tmp_path / "b" / "model.safetensors")),
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resuming_with_other_settings_is_refused(tmp_path, mnist_dir):
    data = load_distorted("RTS", train_images=200, test_images=100, data_seed=0, data_dir=mnist_dir)
    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    cfg = stn_config("tiny")
    (run / "run.json").write_text(json.dumps(stn_train.run_settings(cfg, "cnn", 1, "RTS")))
    other = stn_config("tiny", ["lr=0.01"])
    with pytest.raises(CsanError, match=r"started with other settings \(lr: 0.001 -> 0.01\)"):
        stn_train.train_run(other, row="cnn", seed=1, data=data, run_dir=run, say=print)


def test_a_transformer_setting_binds_only_the_runs_it_changes(tmp_path, mnist_dir):
    data = load_distorted("RTS", train_images=200, test_images=100, data_seed=0, data_dir=mnist_dir)
    cfg, zoom = stn_config("tiny"), stn_config("tiny", ["st_output=30"])
    for row in ("cnn", "st-cnn-affine"):
        (tmp_path / row).mkdir()
        settings = stn_train.run_settings(cfg, row, 1, "RTS")
        (tmp_path / row / "run.json").write_text(json.dumps(settings))
    with pytest.raises(CsanError, match=r"other settings \(st_output: None -> 30\)"):
        stn_train.train_run(
            zoom,
            row="st-cnn-affine",
            seed=1,
            data=data,
            run_dir=tmp_path / "st-cnn-affine",
            say=print,
        )
    # the CNN has no transformer, so the zoom table may resume (or reuse) the plain table's CNN run
    stn_train.train_run(zoom, row="cnn", seed=1, data=data, run_dir=tmp_path / "cnn", say=print)
    assert (tmp_path / "cnn" / "result.json").is_file()


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("size", [28, 42, 60])
def test_every_row_classifies_every_image_size(row, size):
    model = build_model(row, image_size=size, st_output=None if size != 60 else 30)
    assert model(torch.rand(2, 1, size, size)).shape == (2, 10)


def test_sign_test_is_the_exact_binomial():
    assert sign_test(wins=0, losses=0) == 1.0
    assert sign_test(wins=5, losses=0) == 2 / 32
    assert sign_test(wins=3, losses=3) == 1.0
    assert sign_test(wins=1, losses=9) == sign_test(wins=9, losses=1) == 2 * 11 / 1024


def test_paired_test_averages_over_seeds_per_image():
    row = [
        torch.tensor([1, 1, 0, 1], dtype=torch.bool),
        torch.tensor([1, 0, 0, 1], dtype=torch.bool),
    ]
    base = [
        torch.tensor([0, 1, 0, 1], dtype=torch.bool),
        torch.tensor([0, 1, 1, 1], dtype=torch.bool),
    ]
    # per image: row 1, .5, 0, 1 against base 0, 1, .5, 1 -> one win, two losses, one tie
    assert paired_test(row, base) == {"wins": 1, "losses": 2, "p": 1.0}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["epoch=2"], "unknown stn setting 'epoch' (did you mean epochs?)"),
        (["rows=cnn,bogus"], "rows: ['bogus']; choose from"),
        (["distortions=S"], "distortions: ['S']; choose from R, RTS, P, E, clutter"),
        (["train_images=70000"], "MNIST has 60000 training and 10000 test digits"),
        (["epochs=zero"], "stn setting epochs: expected int, got 'zero'"),
        (["seeds=1,1"], "seeds must be distinct"),
    ],
)
def test_bad_settings_are_named(overrides, message):
    with pytest.raises(CsanError) as info:
        stn_config("smoke", overrides)
    assert message in str(info.value)


def test_cli_runs_the_tiny_preset_and_reports_errors_in_one_line(tmp_path, mnist_dir, capsys):
    out = tmp_path / "cli"
    code = main(
        [
            "stn",
            "--preset",
            "tiny",
            "--set",
            "rows=cnn",
            "--data-dir",
            str(mnist_dir),
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0 and "| CNN |" in printed and (out / "table.md").is_file()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["command"].startswith("csan stn --preset tiny --set rows=cnn --data-dir")
    assert main(["stn", "--preset", "huge", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "csan: error: unknown stn preset 'huge'; presets: mnist, smoke, tiny"
