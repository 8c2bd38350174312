"""The kept results can be checked: every folder of ``benchmarks/results/`` that holds translations gives
its committed BLEU when sacreBLEU rescores them against the references of ``$CSAN_DATA``, and a kept
compare table comes back byte for byte from ``csan compare --report-only`` on its committed files.

Two kinds of folder are found by walking the tree, so that a new one is covered when it is committed:

- a run's record: ``<split>.json`` with a ``bleu`` beside ``<split>.hyp`` (or ``.hyp.gz``) and the
  run's ``config.yaml`` (the main job's folders);
- a compare table: ``summary[-TAG].json`` with the ``references`` it was scored against, beside
  ``results[-TAG].csv``, ``table[-TAG].md`` and ``translations/``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import statistics
from pathlib import Path

import pytest
import yaml
from sacrebleu.metrics import BLEU

from csan.experiments.compare import run_compare
from csan.experiments.translations import read_translations

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
MAIN_JOB_FOLDERS = {
    "main-multi30k-small-cpu-2026-11-21",
    "main-multi30k-small-native-bf16-2026-11-23",
    "main-multi30k-small-native-bf16-idle-2026-11-23",
}


def _records() -> list[Path]:
    """``<split>.json`` records with a BLEU and their translations beside them."""
    found = []
    for path in sorted(RESULTS.rglob("*.json")):
        hyp = path.with_suffix(".hyp")
        if not (hyp.is_file() or hyp.with_name(hyp.name + ".gz").is_file()):
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and isinstance(record.get("bleu"), float):
            found.append(path)
    return found


def _tables() -> list[Path]:
    """``summary*.json`` of compare tables that kept their translations."""
    found = []
    for path in sorted(RESULTS.rglob("summary*.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(summary, dict) and summary.get("references"):
            found.append(path)
    return found


def _name(path: Path) -> str:
    return path.relative_to(RESULTS).as_posix()


RECORDS = _records()
TABLES = _tables()


def _tag(summary_path: Path) -> str | None:
    stem = summary_path.stem  # "summary" or "summary-TAG"
    return stem[len("summary-") :] if stem.startswith("summary-") else None


def _sibling(summary_path: Path, stem: str, suffix: str) -> Path:
    tag = _tag(summary_path)
    return summary_path.with_name(f"{stem}-{tag}{suffix}" if tag else f"{stem}{suffix}")


def _bleu(hyps: list[str], refs: list[str]) -> float:
    return BLEU().corpus_score(hyps, [refs]).score


def test_the_main_job_folders_are_checked() -> None:
    assert {path.parent.name for path in RECORDS} >= MAIN_JOB_FOLDERS


@pytest.mark.parametrize("record", RECORDS, ids=_name)
def test_a_kept_run_rescores_to_its_bleu(record: Path, multi30k_dir: Path) -> None:
    result = json.loads(record.read_text(encoding="utf-8"))
    config = yaml.safe_load((record.parent / "config.yaml").read_text(encoding="utf-8"))
    data = config["data"]
    assert data["dataset"] == "multi30k", (
        f"{record}: teach this test the {data['dataset']} references"
    )
    refs = (multi30k_dir / f"{result['split']}.{data['tgt_lang']}").read_text("utf-8").splitlines()
    hyp = record.with_suffix(".hyp")
    hyps = read_translations(hyp if hyp.is_file() else hyp.with_name(hyp.name + ".gz"))
    assert _bleu(hyps, refs) == pytest.approx(result["bleu"], abs=1e-6)


@pytest.mark.parametrize("summary_path", TABLES, ids=_name)
def test_a_kept_table_rescores_to_its_bleu(summary_path: Path, multi30k_dir: Path) -> None:
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    reference = multi30k_dir / summary["references"]["file"]
    assert hashlib.sha256(reference.read_bytes()).hexdigest() == summary["references"]["sha256"]
    refs = reference.read_text(encoding="utf-8").splitlines()
    with open(_sibling(summary_path, "results", ".csv"), newline="", encoding="utf-8") as f:
        runs = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    rescored: dict[str, list[float]] = {}
    for run in runs:
        assert run["translation"], f"{run['variant']} seed {run['seed']}: no kept translation"
        bleu = _bleu(read_translations(summary_path.parent / run["translation"]), refs)
        assert bleu == pytest.approx(float(run["bleu"]), abs=1e-6), run["translation"]
        rescored.setdefault(run["variant"], []).append(bleu)
    # the printed means of table.md
    lines = _sibling(summary_path, "table", ".md").read_text(encoding="utf-8").splitlines()
    header = next(line for line in lines if line.startswith("| # |"))
    column = [c.strip() for c in header.split("|")].index("BLEU (mean ± sd)")
    for i, variant in enumerate(v["variant"] for v in summary["variants"]):
        row = next(line for line in lines if line.startswith(f"| {i + 1} | {variant} |"))
        printed = row.split("|")[column].strip().split(" ±")[0]
        expected = f"{statistics.fmean(rescored[variant]):.2f}" if variant in rescored else "—"
        assert printed == expected, (
            f"{variant}: table.md prints {printed}, rescoring gives {expected}"
        )


@pytest.mark.parametrize("summary_path", TABLES, ids=_name)
def test_a_kept_table_comes_back_from_its_files(
    summary_path: Path, multi30k_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    if any(kv.startswith("data.data_dir=") for kv in summary["overrides"]):
        pytest.skip(f"{summary_path}: made with a data folder of its own machine (data.data_dir)")
    monkeypatch.setenv("CSAN_DATA", str(multi30k_dir.parent))
    copy = tmp_path / "table"
    shutil.copytree(summary_path.parent, copy, ignore=shutil.ignore_patterns("runs"))
    title = _sibling(summary_path, "table", ".md").read_text(encoding="utf-8").split("\n")[0][2:]
    run_compare(
        summary["config"],
        [v["variant"] for v in summary["variants"]],
        summary["seeds"],
        copy,
        overrides=summary["overrides"],
        say=lambda _: None,
        command=summary["command"],
        title=title,
        train=False,
        tag=_tag(summary_path),
        significance=summary["significance"]["method"],
    )
    for stem, suffix in (("table", ".md"), ("results", ".csv"), ("summary", ".json")):
        kept = _sibling(summary_path, stem, suffix)
        assert _sibling(copy / summary_path.name, stem, suffix).read_bytes() == kept.read_bytes()


def _ablation_rows(csv_path: Path) -> list[dict[str, str]]:
    with open(csv_path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _ablations() -> list[Path]:
    """``ablation-<variant>.csv`` of window sweeps that kept their validation translations."""
    return [
        path
        for path in sorted(RESULTS.rglob("ablation-*.csv"))
        if any(row.get("hyp_file") for row in _ablation_rows(path))
    ]


ABLATIONS = _ablations()


def test_the_kept_window_sweeps_are_checked() -> None:
    kept = {_name(path) for path in ABLATIONS}
    folder = "table1-3seeds-cpu-2026-11-24"
    assert kept >= {f"{folder}/ablation-csan1d.csv", f"{folder}/ablation-csan2d.csv"}


@pytest.mark.parametrize("csv_path", ABLATIONS, ids=_name)
def test_a_kept_ablation_rescores_to_its_bleu(csv_path: Path, multi30k_dir: Path) -> None:
    refs = (multi30k_dir / "valid.de").read_text(encoding="utf-8").splitlines()
    rescored: dict[str, list[float]] = {}
    for row in _ablation_rows(csv_path):
        if row["status"] != "ok":
            continue
        assert row["hyp_file"], f"{row['variant']} seed {row['seed']}: no kept translation"
        bleu = _bleu(read_translations(csv_path.parent / row["hyp_file"]), refs)
        assert bleu == pytest.approx(float(row["valid_bleu"]), abs=1e-6), row["hyp_file"]
        rescored.setdefault(row["x"], []).append(bleu)
    # the printed means of ablation-<variant>.md: one row per point, then the vanilla baseline
    text = csv_path.with_suffix(".md").read_text(encoding="utf-8")
    for x, values in rescored.items():
        mean = f"{statistics.fmean(values):.2f}"
        if x == "vanilla":
            assert f"- vanilla baseline: {mean}" in text
        else:
            row = next(line for line in text.splitlines() if line.startswith(f"| {x} |"))
            assert row.split("|")[2].strip().split(" ±")[0] == mean, row


@pytest.mark.parametrize("csv_path", ABLATIONS, ids=_name)
def test_a_kept_ablation_comes_back_from_its_files(
    csv_path: Path, multi30k_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded ``csan ablate`` command with ``--report-only``, on a copy without ``runs/``."""
    import shlex

    from csan.cli import main

    machine = json.loads((csv_path.parent / f"machine-{csv_path.stem}.json").read_text("utf-8"))
    argv = shlex.split(machine["command"])[1:]  # without the leading "csan"
    monkeypatch.setenv("CSAN_DATA", str(multi30k_dir.parent))
    copy = tmp_path / "sweep"
    shutil.copytree(csv_path.parent, copy, ignore=shutil.ignore_patterns("runs"))
    argv[argv.index("--out") + 1] = str(copy)
    assert main([*argv, "--report-only"]) == 0
    for suffix in (".md", ".csv"):
        kept = csv_path.with_suffix(suffix)
        assert (copy / kept.name).read_bytes() == kept.read_bytes(), kept.name
