"""The ``csan`` command line, mostly in-process (``csan.cli.main``) on one shared tiny model."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_helpers import assert_one_line_error, run
from safetensors.torch import load_file

from csan.decoding import load_model
from csan.machine import describe_machine

SUBCOMMANDS = ["train", "translate", "evaluate", "info", "average", "attention", "bench"]
INPUT = ["A dog runs on the grass .", "", "Two men are talking .", "   ", "", "A girl ."]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def set_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def total_parameters(table: str) -> int:
    match = re.search(r"^total\s+([\d,]+)$", table, flags=re.MULTILINE)
    assert match, table
    return int(match.group(1).replace(",", ""))


def assert_mean_of_steps(model_dir: Path, run_dir: Path, steps: tuple[int, ...]) -> None:
    """The weights in ``model_dir`` are the mean of those of the run's checkpoints ``steps``."""
    parts = [
        load_file(str(run_dir / "checkpoints" / f"step_{s:08d}" / "model.safetensors"))
        for s in steps
    ]
    for name, value in load_file(str(model_dir / "model.safetensors")).items():
        mean = sum(part[name].double() for part in parts) / len(parts)
        torch.testing.assert_close(value, mean.float(), rtol=0, atol=1e-6)


# -- help and usage -------------------------------------------------------------------------------
def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and out.startswith("usage: csan")
    for name in SUBCOMMANDS:
        assert name in out


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_subcommand_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: csan {command}")


@pytest.mark.parametrize(
    "argv",
    [["train"], ["compare"], ["ablate"], ["plot", "attention"], ["stn"]],
    ids=lambda argv: " ".join(argv),
)
def test_help_text_is_the_docstring_without_its_example(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """These commands take their --help description from their docstring, which has an example."""
    code, out, _ = run(capsys, *argv, "--help")
    assert code == 0 and out.startswith(f"usage: csan {' '.join(argv)}")
    assert ">>>" not in out and "Example" not in out


def test_missing_required_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "translate")
    assert code == 2 and "--model" in err and "Traceback" not in err


# -- train ----------------------------------------------------------------------------------------
def test_train_unknown_set_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "run"
    code, _, err = run(
        capsys, "train", "--config", "tiny", "--set", "train.lrr=1", "--out", out_dir
    )
    assert_one_line_error(code, err, "'train.lrr'", "did you mean train.lr?")
    assert not out_dir.exists()


def test_train_wrong_type(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(
        capsys, "train", "--config", "tiny", "--set", "model.d_model=1.5", "--out", tmp_path
    )
    assert_one_line_error(code, err, "model.d_model", "expected int")


def test_train_error_from_a_real_process(tmp_path: Path) -> None:
    """The installed entry point: status 2, one line, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "csan", "train", "--config", "tiny", "--set", "nope.x=1",
         "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert_one_line_error(proc.returncode, proc.stderr, "'nope'")
    assert proc.stdout == ""


def test_train_with_mismatched_corpus_names_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test2016"):
        write_lines(corpus / f"{split}.en", ["a dog", "a cat", "a bird"])
        write_lines(corpus / f"{split}.de", ["ein Hund", "eine Katze", "ein Vogel"])
    write_lines(corpus / "train.de", ["ein Hund", "eine Katze"])  # one line short
    code, _, err = run(
        capsys, "train", "--config", "tiny", "--data-dir", corpus, "--out", tmp_path / "run",
        "--no-progress",
    )  # fmt: skip
    assert_one_line_error(code, err, str(corpus / "train.de"), "3 lines", "2")


def test_train_with_incomplete_corpus_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "corpus").mkdir()
    write_lines(tmp_path / "corpus" / "train.en", ["a"])
    code, _, err = run(
        capsys, "train", "--config", "tiny", "--data-dir", tmp_path / "corpus", "--out",
        tmp_path / "run",
    )  # fmt: skip
    assert_one_line_error(code, err, "train.de")


def test_train_small_run_end_to_end(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_overrides: list[str]
) -> None:
    sets = [arg for item in tiny_overrides for arg in ("--set", item)]
    code, out, err = run(
        capsys, "train", "--config", "tiny", *sets, "--set", "train.max_steps=3",
        "--set", "train.validate_every=3", "--out", tmp_path, "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    assert "training stopped: max_steps=3" in out
    assert load_model(tmp_path).meta["made_from"] == "copy of step_00000003"


# -- translate ------------------------------------------------------------------------------------
def test_translate_file_keeps_line_count_and_empty_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path
) -> None:
    src = write_lines(tmp_path / "in.en", INPUT)
    out = tmp_path / "out.de"
    code, stdout, err = run(
        capsys, "translate", "--model", tiny_run, "--input", src, "--output", out
    )
    assert code == 0, err
    assert stdout == ""
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    assert len(lines) == len(INPUT)
    for line_in, line_out in zip(INPUT, lines):
        assert (line_out == "") == (line_in.strip() == ""), (line_in, line_out)


def test_translate_stdin_to_stdout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_run: Path
) -> None:
    data = "\n".join(INPUT) + "\n"
    set_stdin(monkeypatch, data.encode())
    code, stdout, err = run(capsys, "translate", "--model", tiny_run, "--beam", "1")
    assert code == 0, err
    lines = stdout.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(INPUT)
    assert [line == "" for line in lines[:-1]] == [line.strip() == "" for line in INPUT]


@pytest.mark.parametrize(
    ("data", "n_lines"),
    [
        (b"a dog\n\n\n", 3),  # trailing empty lines count
        (b"a dog\na cat", 2),  # no final newline
        (b"a dog\r\n\r\na cat\r\n", 3),  # CRLF
        ("a\u2028dog\n\x0ca cat\n\u0085\n".encode(), 3),  # Unicode separators end no line
        (b"", 0),
    ],
)
def test_translate_stdin_line_count(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_run: Path,
    data: bytes,
    n_lines: int,
) -> None:
    set_stdin(monkeypatch, data)
    code, stdout, err = run(capsys, "translate", "--model", tiny_run, "--beam", "1")
    assert code == 0, err
    assert stdout.count("\n") == n_lines


def test_translate_bad_utf8_on_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny_run: Path
) -> None:
    set_stdin(monkeypatch, b"ok\n\xff\xfe bad\n")
    code, _, err = run(capsys, "translate", "--model", tiny_run)
    assert_one_line_error(code, err, "<stdin>:2", "invalid UTF-8")


@pytest.mark.parametrize("existing", [True, False])
def test_translate_bad_model_leaves_output_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, existing: bool
) -> None:
    src = write_lines(tmp_path / "in.en", INPUT)
    out = tmp_path / "out.de"
    if existing:
        out.write_text("precious\n", encoding="utf-8")
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text("{}", encoding="utf-8")
    code, _, err = run(capsys, "translate", "--model", bad, "--input", src, "--output", out)
    assert_one_line_error(code, err, str(bad))
    if existing:
        assert out.read_text(encoding="utf-8") == "precious\n"
    else:
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["in.en", "not-a-model", *(["out.de"] if existing else [])]
    )


class _Payload:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_translate_refuses_a_pickle_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    folder = tmp_path / "legacy"
    folder.mkdir()
    with open(folder / "model.pt", "wb") as f:
        pickle.dump({"model": _Payload(marker)}, f)
    src = write_lines(tmp_path / "in.en", ["a dog"])
    code, _, err = run(capsys, "translate", "--model", folder, "--input", src)
    assert_one_line_error(code, err, str(folder / "model.pt"), "pickle")
    code, _, err = run(capsys, "info", "--model", folder)
    assert_one_line_error(code, err, "pickle")
    assert not marker.exists()


def test_translate_missing_input_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path
) -> None:
    code, _, err = run(capsys, "translate", "--model", tiny_run, "--input", tmp_path / "nope.en")
    assert_one_line_error(code, err, str(tmp_path / "nope.en"))


# -- evaluate -------------------------------------------------------------------------------------
def test_evaluate_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path, multi30k_dir: Path
) -> None:
    src_lines = (multi30k_dir / "valid.en").read_text(encoding="utf-8").splitlines()[:20]
    ref_lines = (multi30k_dir / "valid.de").read_text(encoding="utf-8").splitlines()[:20]
    src = write_lines(tmp_path / "src.en", src_lines)
    ref = write_lines(tmp_path / "ref.de", ref_lines)
    hyp = tmp_path / "hyp.de"
    code, out, err = run(
        capsys, "evaluate", "--model", tiny_run, "--src", src, "--ref", ref, "--json",
        "--output", hyp, "--beam", "1",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert isinstance(result, dict)
    assert {"bleu", "chrf", "signature"} <= set(result)
    assert 0 <= result["bleu"] <= 100 and 0 <= result["chrf"] <= 100
    assert result["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert result["n_sentences"] == 20
    assert hyp.read_text(encoding="utf-8").count("\n") == 20
    # scoring the written translations gives the same numbers
    code, out2, _ = run(
        capsys, "evaluate", "--model", tiny_run, "--hyp", hyp, "--ref", ref, "--json"
    )
    assert code == 0 and json.loads(out2)["bleu"] == pytest.approx(result["bleu"])


def test_evaluate_hypotheses_equal_to_references(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ref = write_lines(tmp_path / "ref.de", ["Ein Hund läuft über die Wiese .", "Zwei Männer ."])
    code, out, err = run(capsys, "evaluate", "--model", tmp_path, "--hyp", ref, "--ref", ref)
    assert code == 0, err
    assert out.startswith("BLEU = 100.00")
    assert "signature: nrefs:1" in out


def test_evaluate_line_count_mismatch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path
) -> None:
    src = write_lines(tmp_path / "src.en", ["a", "b", "c"])
    ref = write_lines(tmp_path / "ref.de", ["a", "b"])
    code, _, err = run(capsys, "evaluate", "--model", tiny_run, "--src", src, "--ref", ref)
    assert_one_line_error(code, err, "src.en has 3 lines", "ref.de has 2")


# -- info, average, attention ---------------------------------------------------------------------
def test_info_parameter_table_and_csan_adds_zero_parameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, vanilla, err = run(capsys, "info", "--config", "tiny")
    assert code == 0, err
    # the host's product rate, after the machine and mode lines (bf16 only where native)
    (host,) = [line for line in vanilla.splitlines() if line.startswith("host: ")]
    rate = float(host.split(" at ")[1].split(" GFLOP/s")[0].replace(",", ""))
    assert rate > 0 and ("in bf16" in host) == describe_machine().native_bf16
    assert "encoder_layers" in vanilla and "decoder_layers" in vanilla
    total = total_parameters(vanilla)
    assert total > 0
    for variant in ("csan1d", "csan2d"):
        code, table, err = run(
            capsys, "info", "--config", "tiny", "--set", f"model.encoder_attention={variant}",
            "--set", f"model.decoder_attention={variant}",
        )  # fmt: skip
        assert code == 0, err
        assert f"encoder attention '{variant}'" in table
        assert total_parameters(table) == total
    code, table, _ = run(capsys, "info", "--config", "tiny", "--set", "model.d_model=128")
    assert code == 0 and total_parameters(table) > total  # the count does follow the config


def test_info_of_a_trained_model_and_presets(
    capsys: pytest.CaptureFixture[str], tiny_run: Path
) -> None:
    code, table, err = run(capsys, "info", "--model", tiny_run)
    assert code == 0, err
    model = load_model(tiny_run).model
    assert total_parameters(table) == sum(p.numel() for p in model.parameters())
    code, out, _ = run(capsys, "info", "--presets")
    assert code == 0 and "tiny" in out.split()


def test_info_bad_model_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "info", "--config", "tiny", "--set", "model.encoder_attention=csan1d",
        "--set", "model.attention_options.csan1d.window=4",
    )  # fmt: skip
    assert_one_line_error(code, err, "window", "4")


def test_average(capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path) -> None:
    out = tmp_path / "avg"
    code, stdout, err = run(capsys, "average", "--run", tiny_run, "--last", 2, "--out", out)
    assert code == 0, err
    assert "step_00000025" in stdout and "step_00000050" in stdout
    assert_mean_of_steps(out, tiny_run, (25, 50))
    load_model(out)


def test_average_leaves_out_checkpoints_written_only_to_resume_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path
) -> None:
    """A signal's or the timer's checkpoint between two planned ones is not averaged, as the run's
    own final model does not average it."""
    import shutil

    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    for step in (25, 50):
        name = f"step_{step:08d}"
        shutil.copytree(tiny_run / "checkpoints" / name, run_dir / "checkpoints" / name)
    timer = run_dir / "checkpoints" / "step_00000037"
    shutil.copytree(run_dir / "checkpoints" / "step_00000025", timer)
    meta = json.loads((timer / "trainer.json").read_text(encoding="utf-8"))
    (timer / "trainer.json").write_text(json.dumps({**meta, "unplanned": True}), encoding="utf-8")

    out = tmp_path / "avg"
    code, stdout, err = run(capsys, "average", "--run", run_dir, "--last", 2, "--out", out)
    assert code == 0, err
    assert "average of step_00000025, step_00000050" in stdout
    assert "left out, written only to resume from: step_00000037" in stdout
    assert_mean_of_steps(out, run_dir, (25, 50))


@pytest.mark.parametrize("last", ["0", "-1"])
def test_average_rejects_a_bad_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path, last: str
) -> None:
    code, _, err = run(
        capsys, "average", "--run", tiny_run, "--last", last, "--out", tmp_path / "a"
    )
    assert_one_line_error(code, err, "--last")
    assert not (tmp_path / "a").exists()


def test_average_without_checkpoints(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "average", "--run", tmp_path, "--out", tmp_path / "a")
    assert_one_line_error(code, err, "no checkpoints to average")


def test_attention_lists_the_variants(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "attention")
    assert code == 0
    self_line = next(line for line in out.splitlines() if line.startswith("self-attention:"))
    assert {"vanilla", "csan1d", "csan2d"} <= set(self_line.split(": ")[1].split(", "))
