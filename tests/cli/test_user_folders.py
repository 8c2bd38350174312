"""csan never destroys what it did not write: the attack cases 1-9 of issue 18, each as a test.

Output folders (``csan average --out``, ``csan train --out``) that exist and are not csan's are
refused with one line and left as they were; output files are replaced atomically with their
permissions kept, symlinks are written through, FIFOs and devices are written as streams.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from cli_helpers import assert_one_line_error, run, snapshot

from csan.decoding import load_model


# -- 1-3: csan average --out ------------------------------------------------------------------------
def test_average_refuses_a_user_folder_and_leaves_it_alone(capsys, tmp_path, tiny_run) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("my notes\n")
    code, _, err = run(capsys, "average", "--run", tiny_run, "--last", "2", "--out", notes)
    assert_one_line_error(code, err, str(notes), "not a csan model folder", "todo.txt", "--force")
    assert (notes / "todo.txt").read_text() == "my notes\n" and len(snapshot(notes)) == 1


def test_average_refuses_to_write_over_its_own_run(capsys, tiny_run) -> None:
    before = sorted(p.name for p in (tiny_run / "checkpoints").iterdir())
    for out in (tiny_run, tiny_run / "checkpoints", tiny_run.parent):
        code, _, err = run(capsys, "average", "--run", tiny_run, "--last", "2", "--out", out)
        assert_one_line_error(code, err, "would overwrite the run")
    assert sorted(p.name for p in (tiny_run / "checkpoints").iterdir()) == before


def test_average_refuses_a_file_even_with_force(capsys, tmp_path, tiny_run) -> None:
    target = tmp_path / "model.txt"
    target.write_text("keep me\n")
    code, _, err = run(capsys, "average", "--run", tiny_run, "--out", target, "--force")
    assert_one_line_error(code, err, "is a file, expected a model folder")
    assert target.read_text() == "keep me\n"


def test_average_replaces_its_own_model_folder(capsys, tmp_path, tiny_run) -> None:
    out = tmp_path / "avg"
    assert run(capsys, "average", "--run", tiny_run, "--last", "1", "--out", out)[0] == 0
    assert load_model(out).meta["made_from"].count("step_") == 1
    code, _, err = run(capsys, "average", "--run", tiny_run, "--last", "2", "--out", out)
    assert code == 0, err
    assert load_model(out).meta["made_from"].count("step_") == 2


# -- 4-5: csan train --out ------------------------------------------------------------------------
def test_train_refuses_a_folder_that_only_looks_like_a_run(
    capsys, tmp_path, tiny_overrides
) -> None:
    fake = tmp_path / "fake"
    (fake / "model").mkdir(parents=True)
    for name in ("config.yaml", "metrics.jsonl", "results.json"):
        (fake / name).write_text(f"the user's {name}\n")
    (fake / "model" / "weights.bin").write_bytes(b"\x00weights")
    before = snapshot(fake)
    sets = [a for item in tiny_overrides for a in ("--set", item)]
    code, _, err = run(capsys, "train", "--config", "tiny", *sets, "--out", fake)
    assert_one_line_error(code, err, str(fake), "not a csan run folder", "model/weights.bin")
    assert snapshot(fake) == before


def test_train_refuses_a_file_before_reading_data(capsys, tmp_path) -> None:
    target = tmp_path / "run"
    target.write_text("not a folder\n")
    absent = tmp_path / "no-data"  # the data is never looked at
    code, _, err = run(capsys, "train", "--config", "tiny", "--data-dir", absent, "--out", target)
    assert_one_line_error(code, err, "is a file, expected a run folder")
    assert target.read_text() == "not a folder\n"


def test_train_accepts_its_own_run_and_an_empty_folder(tmp_path, tiny_run) -> None:
    from csan.checkpoint import check_run_output, is_run_folder

    assert is_run_folder(tiny_run)
    check_run_output(tiny_run)
    (tmp_path / "empty").mkdir()
    check_run_output(tmp_path / "empty")
    check_run_output(tmp_path / "new")


# -- 6-9: csan translate --output -----------------------------------------------------------------
def translate(capsys, tiny_run: Path, tmp_path: Path, output: Path) -> tuple[int, str]:
    src = tmp_path / "in.en"
    src.write_text("A dog runs .\nTwo men .\n", encoding="utf-8")
    code, _, err = run(
        capsys, "translate", "--model", tiny_run, "--input", src, "--output", output, "--beam", 1
    )
    return code, err


def test_a_symlink_is_written_through(capsys, tmp_path, tiny_run) -> None:
    target, link = tmp_path / "real.de", tmp_path / "link.de"
    target.write_text("old\n")
    link.symlink_to(target)
    code, err = translate(capsys, tiny_run, tmp_path, link)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(target.read_text(encoding="utf-8").splitlines()) == 2


def test_a_fifo_is_written_as_a_stream(capsys, tmp_path, tiny_run) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    code, err = translate(capsys, tiny_run, tmp_path, fifo)
    reader.join(timeout=60)
    assert code == 0, err
    assert not reader.is_alive() and len(received[0].splitlines()) == 2
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_character_device_stays_a_device(capsys, tmp_path, tiny_run) -> None:
    link = tmp_path / "null"
    link.symlink_to("/dev/null")  # /dev/null itself, through a link we may create
    code, err = translate(capsys, tiny_run, tmp_path, Path("/dev/null"))
    assert code == 0, err
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)
    code, err = translate(capsys, tiny_run, tmp_path, link)
    assert code == 0, err
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode) and link.is_symlink()


def test_a_replaced_file_keeps_its_permissions(capsys, tmp_path, tiny_run) -> None:
    private = tmp_path / "private.de"
    private.write_text("old\n")
    private.chmod(0o600)
    code, err = translate(capsys, tiny_run, tmp_path, private)
    assert code == 0, err
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert len(private.read_text(encoding="utf-8").splitlines()) == 2


def test_leftovers_of_an_interrupted_final_model_are_removed(tmp_path, tiny_overrides) -> None:
    from csan.config import load_config
    from csan.training.trainer import train

    cfg = load_config("tiny", [*tiny_overrides, "train.max_steps=4", "train.evaluate_test=false"])
    out = tmp_path / "run"
    train(cfg, out, progress=False)
    (out / "model.tmp-999999").mkdir()  # a final-model write killed half way
    (out / "model.tmp-999999" / "model.safetensors").write_bytes(b"half")
    (out / "notes.tmp-1").write_text("not csan's name: kept\n")
    train(load_config("tiny", [*tiny_overrides, "train.max_steps=5", "train.evaluate_test=false"]),
          out, progress=False, force=True)  # fmt: skip
    assert not (out / "model.tmp-999999").exists()
    assert (out / "notes.tmp-1").read_text() == "not csan's name: kept\n"


# -- 18: streaming ---------------------------------------------------------------------------------
def test_translate_answers_each_line_as_it_comes(tiny_run: Path) -> None:
    """A line written to csan translate's stdin is answered before the next one is sent."""
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "csan", "translate", "--model", str(tiny_run), "--beam", "1",
         "--threads", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        answers = []
        for sentence in ("A dog runs .", "Two men are talking .", ""):
            proc.stdin.write(sentence + "\n")
            proc.stdin.flush()
            started = time.monotonic()
            answers.append(proc.stdout.readline())  # blocks until csan answers this line
            assert time.monotonic() - started < 60
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        proc.kill()
    assert len(answers) == 3 and all(a.endswith("\n") for a in answers) and answers[2] == "\n"
