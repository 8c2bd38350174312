"""``csan compare``: real tiny runs give the table, CSV, plot and machine record; finished runs are
skipped, a failing variant is reported while the others run, a changed config is not reused."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from csan.cli import main
from csan.config import load_config
from csan.errors import CsanError
from csan.experiments.compare import run_compare
from csan.experiments.grid import RunRecord, run_grid, steady_speed
from csan.experiments.report import CSV_COLUMNS, context_grid
from csan.experiments.summary import VariantSummary, summarize
from csan.experiments.translations import read_translations
from csan.experiments.variants import resolve_variants
from csan.training.trainer import train

VARIANTS = ["vanilla", "bogus@0", "csan1d"]
SEEDS = [1, 2]


def counting(train_fn):
    calls: list[Path] = []

    def wrapped(cfg, out_dir, *, progress=False):
        calls.append(Path(out_dir))
        return train_fn(cfg, out_dir, progress=progress)

    wrapped.calls = calls
    return wrapped


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory, small_overrides: list[str]):
    """vanilla, a variant that cannot be built, and csan1d, 2 seeds each, really trained."""
    out = tmp_path_factory.mktemp("compare")
    spy = counting(train)
    rows = run_compare(
        "tiny", VARIANTS, SEEDS, out, overrides=small_overrides, train_fn=spy, say=lambda _: None
    )
    return out, rows, spy.calls


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_compare_writes_csv_table_plot_and_machine(compared) -> None:
    out, _, calls = compared
    assert len(calls) == 6  # every variant x seed was attempted, the failing one included
    table = read_csv(out / "results.csv")
    assert list(table[0]) == CSV_COLUMNS[:-1]  # one precision: no column for it
    assert [(r["variant"], r["seed"]) for r in table] == [
        (v, str(s)) for v in VARIANTS for s in SEEDS
    ]
    ok = [r for r in table if r["status"] == "ok"]
    assert len(ok) == 4
    for r in ok:
        assert int(r["params"]) > 0 and float(r["steps_per_s"]) > 0 and r["bleu"] != ""
        assert float(r["train_minutes"]) > 0 and r["chrf"] != ""
    assert {r["added_params"] for r in ok} == {"0"}  # CSAN adds no parameters
    md = (out / "table.md").read_text(encoding="utf-8")
    header = next(line for line in md.splitlines() if line.startswith("| #"))
    assert (
        "| p per seed |" in header and "BLEU (mean ± sd)" in header and "Speed (steps/s)" in header
    )
    assert "| 1 | vanilla |" in md and "| 3 | csan1d |" in md
    assert (out / "bleu.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    machine = json.loads((out / "machine.json").read_text(encoding="utf-8"))
    assert {"cpu", "torch", "threads", "capability", "native_bf16", "train_threads", "mode"} <= set(
        machine
    )
    assert machine["train_threads"] == 1


def test_compare_tests_each_seed_against_the_baseline(compared) -> None:
    out, rows, _ = compared
    by_name = {r.variant: r for r in rows}
    base, csan = by_name["vanilla"], by_name["csan1d"]
    assert [t.seed for t in csan.tests] == SEEDS and [t.seed for t in base.tests] == SEEDS
    assert all(t.p_value is None and t.delta is None for t in base.tests)
    for b, t in zip(base.tests, csan.tests):
        assert 0.0 < t.p_value <= 1.0 and t.ci >= 0.0
        assert t.delta == pytest.approx(t.bleu - b.bleu, abs=1e-12)
    # Δ is the mean of the per-seed differences the tests looked at, over the same seeds
    assert csan.delta_seeds == SEEDS
    assert csan.bleu_delta == pytest.approx(sum(t.delta for t in csan.tests) / len(SEEDS))
    recorded = [float(r["bleu"]) for r in read_csv(out / "results.csv") if r["variant"] == "csan1d"]
    assert [t.bleu for t in csan.tests] == pytest.approx(recorded, abs=1e-9)  # rescored = recorded
    assert by_name["bogus@0"].tests == [] and csan.bleu_sd is not None


def report_only(folder: Path, small_overrides: list[str], *extra: str) -> int:
    """``csan compare ... --report-only`` on ``folder``, with the fixture's variants and seeds."""
    sets = [item for kv in small_overrides for item in ("--set", kv)]
    variants, seeds = ",".join(VARIANTS), ",".join(map(str, SEEDS))
    argv = ["compare", "--config", "tiny", *sets, "--variants", variants, "--seeds", seeds]
    return main([*argv, "--out", str(folder), "--report-only", "--no-progress", *extra])


def test_the_kept_files_give_the_same_table_without_the_runs(
    compared, small_overrides: list[str], small_corpus: Path, tmp_path: Path
) -> None:
    out, _, _ = compared
    assert (
        report_only(out, small_overrides) == 0
    )  # the table from the runs, as the command writes it
    kept = tmp_path / "kept"
    shutil.copytree(out, kept, ignore=shutil.ignore_patterns("runs"))
    assert not (kept / "runs").exists()
    assert sorted(p.name for p in (kept / "translations").iterdir()) == [
        f"{v}-seed{s}.test2016.hyp.gz" for v in ("csan1d", "vanilla") for s in SEEDS
    ]
    assert report_only(kept, small_overrides) == 0
    for name in ("table.md", "results.csv", "summary.json"):
        assert (kept / name).read_bytes() == (out / name).read_bytes(), name
    summary = json.loads((kept / "summary.json").read_text(encoding="utf-8"))
    assert summary["command"].endswith(f"--out {out}")  # the command that made the table, kept
    reference = small_corpus / "test2016.de"
    assert summary["references"] == {
        "file": "test2016.de",
        "sentences": len(reference.read_text(encoding="utf-8").splitlines()),
        "sha256": hashlib.sha256(reference.read_bytes()).hexdigest(),
    }
    # every kept translation rescores to its run's recorded BLEU
    refs = reference.read_text(encoding="utf-8").splitlines()
    for row in read_csv(kept / "results.csv"):
        if row["status"] == "ok":
            hyps = read_translations(kept / row["translation"])
            assert BLEU().corpus_score(hyps, [refs]).score == pytest.approx(
                float(row["bleu"]), abs=1e-9
            )
    table = (kept / "table.md").read_text(encoding="utf-8")
    assert "Significance: paired bootstrap resampling (1,000 resamples" in table
    assert "| csan1d | 2 |" in table  # the per-seed tests


def test_a_kept_table_is_not_rescored_against_other_references(
    compared, small_overrides: list[str], small_corpus: Path, tmp_path: Path
) -> None:
    out, _, _ = compared
    kept = tmp_path / "kept"
    shutil.copytree(out, kept, ignore=shutil.ignore_patterns("runs"))
    other = tmp_path / "other-corpus"
    shutil.copytree(small_corpus, other)
    lines = (other / "test2016.de").read_text(encoding="utf-8").splitlines()
    (other / "test2016.de").write_text(
        "\n".join(["Ein Hund.", *lines[1:]]) + "\n", encoding="utf-8"
    )
    moved = [kv for kv in small_overrides if not kv.startswith("data.data_dir=")]
    with pytest.raises(
        CsanError,
        match=r"other-corpus/test2016.de: sha256 \w+\.\.\., but the table "
        r"was scored against test2016.de with sha256 \w+\.\.\.: not the same references",
    ):
        run_compare(
            "tiny",
            VARIANTS,
            SEEDS,
            kept,
            overrides=[*moved, f"data.data_dir={other}"],
            say=lambda _: None,
            train=False,
        )


def test_the_approximate_randomization_test_is_an_option(
    compared, small_overrides, tmp_path
) -> None:
    out, _, _ = compared
    kept = tmp_path / "kept"
    shutil.copytree(out, kept, ignore=shutil.ignore_patterns("runs"))
    assert report_only(kept, small_overrides, "--significance", "ar") == 0
    summary = json.loads((kept / "summary.json").read_text(encoding="utf-8"))
    assert summary["significance"]["method"] == "ar"
    assert "ar:10000" in summary["significance"]["signature"]
    assert " --significance ar " in summary["command"]
    assert "approximate randomization (10,000 trials" in (kept / "table.md").read_text()


def test_a_failing_variant_is_reported_and_the_rest_still_runs(compared) -> None:
    out, rows, _ = compared
    failed = {r.variant: r for r in rows}["bogus@0"]
    assert failed.failed == 2 and failed.bleu_mean is None
    assert "bogus" in failed.errors[0] and failed.errors[0].startswith("seeds 1, 2:")
    md = (out / "table.md").read_text(encoding="utf-8")
    line = next(line for line in md.splitlines() if "| bogus@0 |" in line)
    assert "0/2 — failed" in line and "unknown self-attention 'bogus'" in line
    assert (out / "runs" / "bogus@0-seed1" / "error.txt").is_file()
    table = read_csv(out / "results.csv")
    assert {r["status"] for r in table if r["variant"] == "bogus@0"} == {"failed"}
    assert {r["status"] for r in table if r["variant"] == "csan1d"} == {"ok"}  # trained after it


def test_rerun_skips_finished_runs(compared, small_overrides: list[str]) -> None:
    out, rows, _ = compared
    spy = counting(train)
    again = run_compare(
        "tiny", VARIANTS, SEEDS, out, overrides=small_overrides, train_fn=spy, say=lambda _: None
    )
    assert [p.name for p in spy.calls] == ["bogus@0-seed1", "bogus@0-seed2"]  # only the failed
    assert [r.bleu_mean for r in again] == [r.bleu_mean for r in rows]


def test_a_run_that_failed_is_trained_again_by_the_next_call(
    tmp_path: Path, small_overrides: list[str]
) -> None:
    """A run that died midway (here: the trainer had written its config.yaml, then compilation
    failed) leaves error.txt in its folder; the same command again trains that run, in that folder,
    and the error is gone (regression: the folder was refused as not csan's)."""

    def dies(cfg, out_dir, *, progress=False):
        Path(out_dir).mkdir(parents=True)
        (Path(out_dir) / "config.yaml").write_text("train: {}\n", encoding="utf-8")
        raise RuntimeError("ImportError: kernel.so: file too short")

    kw = {"overrides": small_overrides, "say": lambda _: None}
    (first,) = run_compare("tiny", ["vanilla"], [1], tmp_path, train_fn=dies, **kw)
    run_dir = tmp_path / "runs" / "vanilla-seed1"
    assert first.failed == 1 and (run_dir / "error.txt").is_file()
    (again,) = run_compare("tiny", ["vanilla"], [1], tmp_path, train_fn=train, **kw)
    assert again.failed == 0 and again.bleu_mean is not None
    assert (run_dir / "results.json").is_file() and not (run_dir / "error.txt").exists()


def test_a_finished_run_with_another_config_is_not_reused(
    compared, small_overrides: list[str], fake_train
) -> None:
    out, _, _ = compared
    (variant,) = resolve_variants(["vanilla"], load_config("tiny"))
    overrides = [*small_overrides, "train.max_steps=7"]
    (record,) = run_grid(
        "tiny", [variant], [1], out, overrides=overrides, train_fn=fake_train, say=lambda _: None
    )
    assert fake_train.calls == []
    assert record.status == "failed" and "train.max_steps: 6 != 7" in record.error


def test_an_interrupted_run_is_resumed(tmp_path: Path, fake_train) -> None:
    run = tmp_path / "runs" / "vanilla-seed1"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"stop_reason": "signal SIGINT"}))
    run_compare("tiny", ["vanilla"], [1], tmp_path, train_fn=fake_train, say=lambda _: None)
    assert fake_train.calls == [run]
    assert json.loads((run / "results.json").read_text())["stop_reason"] == "max_steps=1"


def test_a_call_that_trains_nothing_keeps_the_machine_record(tmp_path: Path, fake_train) -> None:
    """The record says which machine trained: building the table again elsewhere from finished runs
    (as ``benchmarks/converged.sh --keep`` does) keeps it; a call that trains a run writes its own
    (regression: rebuilding the kept converged table on another CPU rewrote its machine.json)."""
    kw = {"train_fn": fake_train, "say": lambda _: None}
    run_compare("tiny", ["vanilla"], [1], tmp_path, **kw)
    record = tmp_path / "machine.json"
    assert json.loads(record.read_text())["cpu"]  # the first call trained: this machine
    record.write_text('{"cpu": "the machine that trained"}\n', encoding="utf-8")
    run_compare("tiny", ["vanilla"], [1], tmp_path, **kw)  # finished before: trains nothing
    assert fake_train.calls == [tmp_path / "runs" / "vanilla-seed1"]
    assert json.loads(record.read_text()) == {"cpu": "the machine that trained"}
    run_compare("tiny", ["vanilla"], [1, 2], tmp_path, **kw)  # seed 2 trains here
    assert len(fake_train.calls) == 2
    assert json.loads(record.read_text())["cpu"] != "the machine that trained"


def test_summary_of_identical_systems(tmp_path: Path) -> None:
    hyp = tmp_path / "a.hyp"
    refs = ["a small dog runs on the grass", "two men play football in a park"]
    hyp.write_text("\n".join(refs) + "\n")
    records = [
        RunRecord(v, s, "", "ok", params=p, steps_per_s=sp, bleu=100.0, hyp_file=str(hyp))
        for v, p, sp in (("base", 100, 2.0), ("new", 110, 1.0))
        for s in (1, 2)
    ]
    base, new = summarize(records, refs).rows
    assert base.bleu_mean == 100.0 and base.bleu_sd == 0.0
    assert new.added_params == 10 and new.speed_ratio == 0.5 and new.bleu_delta == 0.0
    assert [(t.seed, t.delta) for t in new.tests] == [(1, 0.0), (2, 0.0)]


def test_translations_that_do_not_give_the_recorded_bleu_are_an_error(tmp_path: Path) -> None:
    refs = ["a small dog runs on the grass", "two men play football in a park"]
    good, bad = tmp_path / "good.hyp", tmp_path / "bad.hyp"
    good.write_text("\n".join(refs) + "\n")
    bad.write_text("a dog\ntwo men play football in a park\n")
    records = [
        RunRecord("base", 1, "", "ok", bleu=100.0, hyp_file=str(good)),
        RunRecord("new", 1, "", "ok", bleu=100.0, hyp_file=str(bad)),
    ]
    with pytest.raises(
        CsanError,
        match=r"bad.hyp: sacreBLEU gives \d+\.\d{4} on these translations, but "
        r"new seed 1 recorded test BLEU 100.0: not the translations",
    ):
        summarize(records, refs)
    with pytest.raises(
        CsanError, match=r"good.hyp: 2 translations, but the test set has 3 references"
    ):
        summarize(records, [*refs, "one more"])


def test_table_speed_is_the_steady_rate_when_known(tmp_path: Path) -> None:
    records = [
        RunRecord("base", 1, "", "ok", steps_per_s=1.0, steady_steps_per_s=2.0, bleu=30.0),
        RunRecord("new", 1, "", "ok", steps_per_s=1.5, steady_steps_per_s=None, bleu=30.0),
    ]
    base, new = summarize(records, None).rows
    assert base.steps_per_s == 2.0  # steady rate preferred
    assert new.steps_per_s == 1.5 and new.speed_ratio == 0.75  # whole-run rate as the fallback


def test_steady_speed_skips_the_first_epoch() -> None:
    def line(step: int, seconds: float, kind: str = "train") -> dict:
        return {"kind": kind, "step": step, "epoch": step / 100, "train_seconds": seconds}

    # Compilation makes the first epoch slow: 100 steps in 300 s, then 1 step/s, then 2 steps/s.
    records = [line(50, 250.0), line(100, 300.0), line(150, 350.0), line(250, 400.0)]
    records.insert(2, {"kind": "valid", "step": 100, "epoch": 1.0, "bleu": 3.0})
    assert steady_speed(records) == pytest.approx(150 / 100)
    assert steady_speed(records[:3]) is None  # one line past epoch 1 is not a rate
    assert steady_speed([]) is None


def test_steady_speed_leaves_out_the_restart_of_a_resumed_run() -> None:
    def line(step: int, seconds: float) -> dict:
        return {"kind": "train", "step": step, "epoch": step / 100, "train_seconds": seconds}

    # 1 step/s before and after a resume at step 160; 150 -> 200 holds a 300 s recompilation
    resume = {"kind": "resume", "step": 160, "epoch": 1.6, "train_seconds": 360.0}
    records = [line(100, 300.0), line(150, 350.0), resume, line(200, 690.0), line(300, 790.0)]
    assert steady_speed(records) == pytest.approx(1.0)
    assert steady_speed([r for r in records if r is not resume]) < 0.5  # what it would be without


def test_tagged_tables_share_the_folder_and_its_runs(tmp_path: Path, fake_train) -> None:
    run_compare(
        "tiny", ["vanilla", "csan1d"], [1], tmp_path, train_fn=fake_train, say=lambda _: None
    )
    table = (tmp_path / "table.md").read_text()
    run_compare(
        "tiny",
        ["vanilla", "csan2d"],
        [1],
        tmp_path,
        train_fn=fake_train,
        say=lambda _: None,
        tag="two",
    )
    assert [p.name for p in fake_train.calls] == ["vanilla-seed1", "csan1d-seed1", "csan2d-seed1"]
    assert (tmp_path / "table.md").read_text() == table  # untouched
    tagged = (tmp_path / "table-two.md").read_text()
    assert "csan2d" in tagged and "csan1d" not in tagged
    for name in ("results-two.csv", "summary-two.json", "bleu-two.png", "machine-two.json"):
        assert (tmp_path / name).is_file()
    with pytest.raises(CsanError, match="--tag 'a/b'"):
        run_compare("tiny", ["vanilla"], [1], tmp_path, train_fn=fake_train, tag="a/b")


def test_context_table_has_the_side_by_vector_grid(tmp_path: Path, fake_train) -> None:
    specs = ["vanilla", "context-global-enc", "context-deep-both"]
    run_compare("tiny", specs, [1], tmp_path, train_fn=fake_train, say=lambda _: None, tag="ctx")
    text = (tmp_path / "table-ctx.md").read_text()
    assert "| Applied to | global | deep | deep_global | deep_global+deep |" in text
    assert "| decoder | — | — | — | — |" in text  # the fake trainer scores no test set
    run_compare(
        "tiny", ["vanilla", "csan1d"], [1], tmp_path, train_fn=fake_train, say=lambda _: None
    )
    assert "Applied to" not in (tmp_path / "table.md").read_text()  # no context rows, no grid


def test_context_grid_cells() -> None:
    def row(name: str, bleu: float | None, delta: float | None) -> VariantSummary:
        return VariantSummary(name, runs=1, failed=0, errors=[], bleu_mean=bleu, bleu_delta=delta)

    rows = [
        row("vanilla", 25.0, 0.0),
        row("context-global-enc", 25.5, 0.5),
        row("context-deep_global+deep-both", 24.25, -0.75),
        row("context-deep-dec", None, None),  # its run failed
    ]
    lines = context_grid(rows)
    assert lines[2] == "| encoder | 25.50 (+0.50) | — | — | — |"
    assert lines[3] == "| decoder | — | — | — | — |"
    assert lines[4] == "| encoder and decoder | — | — | — | 24.25 (-0.75) |"
    assert context_grid(rows[:1]) == []


def test_cli_compare_rejects_bad_seeds(capsys) -> None:
    assert (
        main(
            [
                "compare",
                "--config",
                "tiny",
                "--variants",
                "vanilla",
                "--seeds",
                "1,x",
                "--out",
                "unused",
            ]
        )
        == 2
    )
    assert "--seeds '1,x': expected comma-separated integers" in capsys.readouterr().err


def test_compiled_runs_start_from_a_fresh_compiler(tmp_path: Path, fake_train, monkeypatch) -> None:
    import csan.experiments.grid as grid

    resets: list[int] = []
    monkeypatch.setattr(grid, "_reset_compiler", lambda: resets.append(len(fake_train.calls)))
    variants = resolve_variants(["vanilla", "csan1d"], load_config("tiny"))
    grid.run_grid(
        "tiny",
        variants,
        [1],
        tmp_path,
        overrides=["train.compile=true"],
        train_fn=fake_train,
        say=lambda _: None,
    )
    assert resets == [0, 1]  # before each training, so no run inherits the recompile budget


def test_report_only_trains_nothing_and_lists_the_missing_runs(tmp_path: Path, fake_train) -> None:
    run_compare("tiny", ["vanilla"], [1], tmp_path, train_fn=fake_train, say=lambda _: None)
    assert len(fake_train.calls) == 1
    rows = run_compare(
        "tiny",
        ["vanilla", "csan1d"],
        [1, 2],
        tmp_path,
        train_fn=fake_train,
        say=lambda _: None,
        train=False,
    )
    assert len(fake_train.calls) == 1  # nothing trained
    assert [(r.variant, r.runs, r.failed, r.errors) for r in rows] == [
        ("vanilla", 1, 0, []),
        ("csan1d", 0, 0, []),
    ]
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert "Not run yet (report only): vanilla seed 2, csan1d seed 1, csan1d seed 2." in table
    statuses = [r["status"] for r in read_csv(tmp_path / "results.csv")]
    assert statuses == ["ok", "not run", "not run", "not run"]
    assert not (tmp_path / "runs" / "csan1d-seed1").exists()


def test_a_run_saved_with_the_old_zeros_is_the_same_run(tmp_path) -> None:
    """config.yaml written before None replaced 0 ("no limit", "each epoch") is not a difference."""
    from csan.config import dump_config, load_config
    from csan.experiments.grid import config_difference

    cfg = load_config("compare-multi30k")
    old = dump_config(cfg).replace("max_steps: null", "max_steps: 0")
    old = old.replace("average_last: 1", "average_last: 0").replace("threads: null", "threads: 0")
    assert "max_steps: 0" in old and "average_last: 0" in old
    (tmp_path / "config.yaml").write_text(old, encoding="utf-8")
    assert config_difference(tmp_path, cfg) is None
    (tmp_path / "config.yaml").write_text(old.replace("lr: 0.001", "lr: 0.002"), encoding="utf-8")
    assert config_difference(tmp_path, cfg) == "train.lr: 0.002 != 0.001"


def test_the_converged_preset_is_the_main_recipe_with_its_budget_in_epochs() -> None:
    """The main recipe with 38 epochs instead of 60 minutes, at the batch and encoder attention its
    kept tables were trained with (the main job moved to 1,024 tokens and cnn@0-1 on 2026-11-27)."""
    kept = ["train.max_tokens=4096", "model.encoder_attention=vanilla"]
    main_recipe = [
        *kept,
        "train.max_minutes=null",
        "train.max_epochs=38",
        "train.evaluate_test=true",
    ]
    assert load_config("converged-multi30k") == load_config("multi30k-small", main_recipe)
    fp32 = ["train.cpu_bf16=false", "train.compile=false"]
    assert load_config("converged-multi30k-fp32") == load_config("converged-multi30k", fp32)
    assert load_config("converged-multi30k-fp32") != load_config("converged-multi30k")


def _record(run: str | Path, **recorded) -> None:
    """Write ``recorded`` (the machine, the precision) into ``run``'s results.json."""
    path = Path(run) / "results.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**record, **recorded}), encoding="utf-8")


def _trained_on(fake_train, **recorded):
    """``fake_train``, then ``recorded`` written into the run's results.json."""

    def trained(cfg, out_dir, *, progress=False):
        fake_train(cfg, out_dir, progress=progress)
        _record(out_dir, **recorded)

    return trained


def test_a_grid_resumed_on_another_machine_says_which_runs_ran_where(
    tmp_path: Path, fake_train
) -> None:
    """Seed 1 trained on one CPU, seed 2 (a later session) on another: the table names both and
    which runs ran on each, results.csv keeps each run's machine, and the kept files give it
    back."""
    amd = {"cpu": "AMD EPYC", "capability": "AVX2", "native_bf16": False, "threads": 2}
    intel = {"cpu": "Intel Xeon", "capability": "AVX512", "native_bf16": True, "amx_bf16": True}

    quiet = {"say": lambda _: None}
    run_compare(
        "tiny",
        ["vanilla", "csan1d"],
        [1],
        tmp_path,
        train_fn=_trained_on(fake_train, machine=amd),
        **quiet,
    )
    one = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert "- Machine: AMD EPYC (AVX2, bf16 emulated), 2 threads (all 2 runs)." in one
    run_compare(
        "tiny",
        ["vanilla", "csan1d"],
        [1, 2],
        tmp_path,
        train_fn=_trained_on(fake_train, machine=intel),
        **quiet,
    )
    assert [p.name for p in fake_train.calls] == [
        "vanilla-seed1",
        "csan1d-seed1",
        "vanilla-seed2",
        "csan1d-seed2",
    ]
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert (
        "AMD EPYC (AVX2, bf16 emulated), 2 threads: vanilla seed 1, csan1d seed 1; "
        "Intel Xeon (AVX512, native bf16, AMX): vanilla seed 2, csan1d seed 2." in table
    )
    assert table.count("Runs on 2 machines, so a speed here may mix them") == 1
    rows = read_csv(tmp_path / "results.csv")
    assert list(rows[0]) == CSV_COLUMNS[:-1] and rows[0]["machine"].startswith("AMD EPYC")
    assert [r["machine"].split()[0] for r in rows] == [
        "AMD",
        "Intel",
        "AMD",
        "Intel",
    ]  # variant-major

    kept = tmp_path.with_name(tmp_path.name + "-kept")
    shutil.copytree(tmp_path, kept, ignore=shutil.ignore_patterns("runs"))
    run_compare("tiny", ["vanilla", "csan1d"], [1, 2], kept, train=False, **quiet)
    for name in ("table.md", "results.csv"):
        assert (kept / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_a_seed_trained_in_another_precision_is_reused_and_named(
    tmp_path: Path, fake_train
) -> None:
    """Seed 1 trained in bf16 on a native-bf16 CPU, seed 2 later in float32 with `cpu_bf16: false`
    (as on an AVX2 CPU): seed 1 is not trained again (the precision is how a run computes, like the
    device; with `auto` one config already trains both ways), and the table, results.csv and the
    kept files say which run trained in which precision."""
    zen4 = {"cpu": "AMD EPYC", "cpu_core": "Zen 4", "capability": "AVX512", "native_bf16": True}
    zen3 = {"cpu": "AMD EPYC", "cpu_core": "Zen 3", "capability": "AVX2", "native_bf16": False}

    quiet = {"say": lambda _: None}
    auto = ["train.cpu_bf16=auto"]  # tiny's own is false
    run_compare("tiny", ["vanilla"], [1], tmp_path, overrides=auto,
                train_fn=_trained_on(fake_train, machine=zen4, mode="bf16 + compile"), **quiet)  # fmt: skip
    one = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert "- Machine: AMD EPYC (Zen 4, AVX512, native bf16) (all 1 runs)." in one  # one precision
    assert "precision" not in (tmp_path / "results.csv").read_text(encoding="utf-8")
    fp32 = ["train.cpu_bf16=false"]
    run_compare("tiny", ["vanilla"], [1, 2], tmp_path, overrides=fp32,
                train_fn=_trained_on(fake_train, machine=zen3, mode="float32 eager"), **quiet)  # fmt: skip
    assert [p.name for p in fake_train.calls] == ["vanilla-seed1", "vanilla-seed2"]
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert (
        "Runs on 2 machines or precisions, so a speed here may mix them and a BLEU the precision"
        in table
    )
    assert (
        "AMD EPYC (Zen 4, AVX512, native bf16), bf16 + compile: vanilla seed 1; "
        "AMD EPYC (Zen 3, AVX2, bf16 emulated), float32 eager: vanilla seed 2." in table
    )
    rows = read_csv(tmp_path / "results.csv")
    assert list(rows[0]) == CSV_COLUMNS
    assert [r["precision"] for r in rows] == ["bf16 + compile", "float32 eager"]

    kept = tmp_path.with_name(tmp_path.name + "-kept")
    shutil.copytree(tmp_path, kept, ignore=shutil.ignore_patterns("runs"))
    run_compare("tiny", ["vanilla"], [1, 2], kept, overrides=fp32, train=False, **quiet)
    for name in ("table.md", "results.csv"):
        assert (kept / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_a_table_kept_before_runs_recorded_their_machine_keeps_its_columns(tmp_path: Path) -> None:
    """results.csv gets its `machine` column only when some run recorded one, so the tables kept
    before it come back from their files byte for byte."""
    from csan.experiments.report import read_results_csv, write_results_csv

    path = tmp_path / "results.csv"
    write_results_csv(path, [RunRecord("vanilla", 1, "", "ok", bleu=24.5)])
    assert path.read_text(encoding="utf-8").splitlines()[0].split(",") == CSV_COLUMNS[:-2]
    assert read_results_csv(path)[0].machine == ""


def test_the_converged_script_joins_seeds_kept_in_two_blocks(compared, tmp_path: Path) -> None:
    """`benchmarks/converged.sh --keep` with SEEDS_FROM (issue 20's final table: seeds 1-2 in bf16,
    seed 3 in float32): each seed's runs come from its own kept block, the table is written in a
    folder without runs/ that gives it back by itself, and it names each run's precision; a work
    folder that holds runs, or a block with an unfinished run, is refused before anything is
    written."""
    out, _, _ = compared
    blocks = {1: tmp_path / "bf16", 2: tmp_path / "fp32"}
    recorded = {
        1: {"machine": {"cpu": "AMD EPYC", "capability": "AVX512", "native_bf16": True},
            "mode": "bf16 + compile"},
        2: {"machine": {"cpu": "AMD EPYC", "capability": "AVX2", "native_bf16": False},
            "mode": "float32 eager"},
    }  # fmt: skip
    for seed, block in blocks.items():
        for variant in ("vanilla", "csan1d"):
            run = block / "runs" / f"{variant}-seed{seed}"
            shutil.copytree(out / "runs" / run.name, run)
            _record(run, **recorded[seed])
    csan = tmp_path / "csan"
    csan.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m csan "$@"\n', encoding="utf-8")
    csan.chmod(0o755)
    script = Path(__file__).parents[2] / "benchmarks" / "converged.sh"

    def keep(table: Path, work: Path) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "CSAN": str(csan),
            "CONFIG": str(out / "runs" / "vanilla-seed1" / "config.yaml"),  # tiny, as trained
            "VARIANTS": "vanilla csan1d",
            "SEEDS": "1 2",
            "SEEDS_FROM": f"{blocks[1]}:1 {blocks[2]}:2",
            "KEPT": str(table),
        }
        command = ["bash", str(script), "--keep", str(work)]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=False)

    done = keep(tmp_path / "table", tmp_path / "work")
    assert done.returncode == 0, done.stderr
    for name in ("table.md", "results.csv", "summary.json"):
        assert f"converged: {name} comes back the same from {tmp_path / 'table'}" in done.stdout
    work = sorted(p.name for p in (tmp_path / "work" / "runs").iterdir())
    assert work == ["csan1d-seed1", "csan1d-seed2", "vanilla-seed1", "vanilla-seed2"]
    assert not list((tmp_path / "work" / "runs").glob("*/checkpoints"))  # none trained again
    assert not (tmp_path / "table" / "runs").exists()
    assert len(list((tmp_path / "table" / "translations").glob("*.hyp.gz"))) == 4
    table = (tmp_path / "table" / "table.md").read_text(encoding="utf-8")
    assert "bf16 + compile: vanilla seed 1, csan1d seed 1" in table
    assert "float32 eager: vanilla seed 2, csan1d seed 2." in table
    rows = read_csv(tmp_path / "table" / "results.csv")
    assert [(r["seed"], r["precision"]) for r in rows] == [
        ("1", "bf16 + compile"), ("2", "float32 eager"), ("1", "bf16 + compile"), ("2", "float32 eager")
    ]  # fmt: skip

    again = keep(tmp_path / "again", tmp_path / "work")  # a folder with runs: none replaced
    assert again.returncode != 0 and f"{tmp_path / 'work'}/runs is not empty" in again.stderr
    (blocks[2] / "runs" / "csan1d-seed2" / "results.json").unlink()
    refused = keep(tmp_path / "refused", tmp_path / "work2")
    assert refused.returncode != 0
    assert f"converged: {blocks[2]}/runs/csan1d-seed2 is not a finished run" in refused.stderr
    assert not (tmp_path / "refused").exists() and not (tmp_path / "again").exists()
    assert not list((tmp_path / "work2").glob("runs/*"))  # checked before any run was copied
