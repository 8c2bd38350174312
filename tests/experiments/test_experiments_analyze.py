"""``csan analyze``: n-gram gaps (Fig. 3) and the convergence table on synthetic metrics files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from csan.cli import main
from csan.errors import CsanError
from csan.experiments.analyze import (
    convergence_runs,
    expand_run_dirs,
    ngram_report,
    write_convergence,
    write_ngram,
)

REFS = ["a small dog runs on the green grass .", "two men are playing football in a park ."]
OTHER = ["a dog runs on the grass .", "two men play football in the park ."]


def test_ngram_gaps_of_the_baseline_against_itself_are_zero(tmp_path: Path) -> None:
    report = ngram_report(REFS, {"base": OTHER, "same": OTHER, "ref": REFS})
    assert [(g.precision, g.bleu) for g in report.gaps["same"]] == [(0.0, 0.0)] * 4
    assert all(g.precision > 0 for g in report.gaps["ref"])  # the references are better
    files = write_ngram(report, tmp_path)
    assert [f.name for f in files] == ["ngram.md", "ngram.csv", "ngram.png"]
    assert "| same | Δ BLEU-n | +0.00 | +0.00 | +0.00 | +0.00 |" in files[0].read_text()


def test_ngram_needs_a_system() -> None:
    with pytest.raises(CsanError, match="a baseline and at least one system"):
        ngram_report(REFS, {"base": OTHER})


def test_cli_analyze_ngram(tmp_path: Path, capsys) -> None:
    for name, lines in (("ref", REFS), ("base", OTHER)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    argv = [
        "analyze",
        "ngram",
        "--ref",
        str(tmp_path / "ref"),
        "--baseline",
        str(tmp_path / "base"),
    ]
    argv += ["--systems", f"copy={tmp_path / 'base'}", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    assert "| copy | Δ precision | +0.00" in capsys.readouterr().out
    assert (tmp_path / "out" / "ngram.png").is_file()


def test_cli_analyze_ngram_pools_seeds_and_reads_kept_gzip_files(tmp_path: Path, capsys) -> None:
    """Three seeds' files per system, joined, against the references repeated three times."""
    (tmp_path / "ref").write_text("\n".join(REFS) + "\n")
    for seed, lines in enumerate((OTHER, REFS, OTHER), start=1):
        data = ("\n".join(lines) + "\n").encode()
        (tmp_path / f"base-seed{seed}.hyp.gz").write_bytes(gzip.compress(data))
        (tmp_path / f"sys-seed{seed}.hyp").write_bytes(data if seed != 2 else b"x\ny\n")
    pool = ",".join

    def argv(base: list[str], system: list[str]) -> list[str]:
        return [
            "analyze", "ngram", "--ref", str(tmp_path / "ref"), "--baseline", pool(base),
            "--systems", f"sys={pool(system)}", "--out", str(tmp_path / "out"),
        ]  # fmt: skip

    base = [str(tmp_path / f"base-seed{s}.hyp.gz") for s in (1, 2, 3)]
    system = [str(tmp_path / f"sys-seed{s}.hyp") for s in (1, 2, 3)]
    assert main(argv(base, system)) == 0
    pooled = ngram_report(
        REFS * 3, {"base": [*OTHER, *REFS, *OTHER], "sys": [*OTHER, "x", "y", *OTHER]}
    )
    expected = pooled.gaps["sys"][0].precision
    assert expected < 0  # seed 2 of the system is worse than the baseline's
    assert f"| sys | Δ precision | {expected:+.2f}" in capsys.readouterr().out

    assert main(argv(base, system[:2])) == 2  # pooled files must match in number
    assert "the same number of files to pool (baseline: 3, sys: 2)" in capsys.readouterr().err


def write_metrics(folder: Path, points: list[tuple[float, float]]) -> Path:
    folder.mkdir(parents=True)
    lines = [json.dumps({"kind": "train", "step": 1, "epoch": 0.5, "loss": 3.0})]
    lines += [
        json.dumps({"kind": "valid", "step": i, "epoch": e, "loss": 1.0, "accuracy": a})
        for i, (e, a) in enumerate(points)
    ]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_convergence_table_from_metrics(tmp_path: Path) -> None:
    write_metrics(
        tmp_path / "cmp" / "runs" / "conv_qkv-seed1", [(1.0, 0.8), (2.0, 0.92), (3.0, 0.96)]
    )
    write_metrics(
        tmp_path / "cmp" / "runs" / "vanilla-seed1", [(1.0, 0.7), (2.0, 0.85), (3.0, 0.91)]
    )
    half = write_metrics(tmp_path / "half", [(0.5, 0.6), (1.0, 0.7), (1.5, 0.95)])
    runs = convergence_runs(expand_run_dirs([str(tmp_path / "cmp"), f"mid={half}"]))
    assert [r.name for r in runs] == ["conv_qkv-seed1", "vanilla-seed1", "mid"]
    conv, vanilla, mid = runs
    assert (conv.epochs_to(0.90), conv.epochs_to(0.95)) == (2.0, 3.0)
    assert (vanilla.epochs_to(0.90), vanilla.epochs_to(0.95)) == (3.0, None)
    assert mid.epochs_to(0.95) == 1.5 and mid.per_epoch() == {1: 0.7, 2: 0.95}
    md, csv_file, png = write_convergence(runs, tmp_path / "out")
    text = md.read_text()
    assert "| run | to 0.90 | ≈ to 0.90 | to 0.95 | ≈ to 0.95 | ep 1 | ep 2 | ep 3 |" in text
    # 0.85 at epoch 2, 0.91 at 3: 0.90 is crossed at 2 + 0.05 / 0.06
    row = "| vanilla-seed1 | 3 | 2.83 | not reached | not reached | 0.7000 | 0.8500 | 0.9100 |"
    assert row in text
    assert "| mid | 1.5 | 1.40 | 1.5 | 1.50 | 0.7000 | 0.9500 | — |" in text
    assert csv_file.read_text().startswith("run,to 0.90,≈ to 0.90,to 0.95,≈ to 0.95,ep 1")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_convergence_thresholds_relative_to_a_run(tmp_path: Path) -> None:
    base = write_metrics(tmp_path / "base", [(1.0, 0.30), (2.0, 0.45), (3.0, 0.50)])
    conv = write_metrics(tmp_path / "conv", [(1.0, 0.46), (2.0, 0.48), (3.0, 0.52)])
    runs = convergence_runs({"vanilla": base, "conv": conv})
    md = write_convergence(runs, tmp_path / "out", relative_to="vanilla")[0].read_text()
    # 0.90 x 0.50 = 0.45 and 0.95 x 0.50 = 0.475
    head = (
        "| run | to 0.90×vanilla (0.4500) | ≈ to 0.90×vanilla (0.4500) | to 0.95×vanilla (0.4750) |"
    )
    assert head in md
    assert "| vanilla | 2 | 2.00 | 3 | 2.50 |" in md and "| conv | 1 | 1.00 | 2 | 1.75 |" in md
    with pytest.raises(CsanError, match="--relative-to 'base': no such run"):
        write_convergence(runs, tmp_path / "out", relative_to="base")


def test_convergence_errors_name_the_file(tmp_path: Path) -> None:
    run = write_metrics(tmp_path / "bad", [(1.0, 0.5)])
    with open(run / "metrics.jsonl", "a") as f:
        f.write("{not json\n")
    with pytest.raises(CsanError, match=r"bad/metrics.jsonl:3: not a JSON line"):
        convergence_runs({"bad": run})
    with pytest.raises(CsanError, match="no such run folder"):
        expand_run_dirs([str(tmp_path / "missing")])
