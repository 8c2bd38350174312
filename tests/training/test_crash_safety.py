"""Crash safety: kill -9 at random moments, SIGTERM/SIGINT, NaN losses and divergence.

The resumed-equals-uninterrupted invariant is tested in-process in ``test_training.py``; here the
interruptions are real: a training subprocess is killed with SIGKILL while it checkpoints every step,
and after each kill ``LAST`` must name a complete checkpoint that loads, and the run, resumed to the
end, must log exactly the trajectory of a run that was never interrupted.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from checkpoint_states import assert_same_training_state

from csan import checkpoint as ckpt
from csan.cli import main
from csan.config import load_config
from csan.decoding import load_model
from csan.errors import CsanError
from csan.training import trainer as trainer_module
from csan.training.loss import TranslationLoss
from csan.training.trainer import train

STEPS = 24
# what the clock and the host decide, not the run (host_steal: csan.host)
TIMING = {"time", "tokens_per_s", "train_seconds", "wall_seconds", "host_steal"}


def crash_overrides(tiny_overrides: list[str]) -> list[str]:
    return [
        *tiny_overrides,
        "data.train_subset=300",
        "data.valid_subset=20",
        "train.max_tokens=512",
        "train.log_every=1",
        "train.validate_every=8",
        "train.checkpoint_every=1",  # a checkpoint at every step: kills often land mid-write
        "train.keep_last=2",
        f"train.max_steps={STEPS}",
    ]


def start_training(out: Path, items: list[str]) -> subprocess.Popen[str]:
    sets = [arg for item in items for arg in ("--set", item)]
    return subprocess.Popen(
        [sys.executable, "-m", "csan", "train", "--config", "tiny", *sets, "--out", str(out),
         "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip


def last_step(run: Path) -> int:
    """The step ``LAST`` names (-1 when there is none yet)."""
    try:
        return int((run / "checkpoints" / "LAST").read_text().strip().removeprefix("step_"))
    except (OSError, ValueError):
        return -1


def wait_for(condition, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"training ended early ({proc.returncode}): {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("timed out waiting for the training subprocess")
        time.sleep(0.02)


def assert_complete_checkpoint(run: Path) -> int:
    """``LAST`` names a whole checkpoint: weights load, trainer state is whole; returns its step."""
    folder = ckpt.latest_checkpoint(run)
    assert folder is not None and folder.name == f"step_{last_step(run):08d}"
    assert sorted(p.name for p in folder.iterdir()) == sorted(ckpt.CHECKPOINT_FILES)
    loaded = load_model(folder)
    assert all(torch.isfinite(p).all() for p in loaded.model.parameters())
    tensors, meta = ckpt.load_trainer_state(folder)
    ckpt.check_trainer_state(folder, tensors, meta)
    assert meta["step"] == last_step(run) == loaded.meta["step"]
    return meta["step"]


def comparable(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    # a resumed process marks where it started ("resume" lines): bookkeeping, like the timings
    return [
        {k: v for k, v in r.items() if k not in TIMING} for r in records if r["kind"] != "resume"
    ]


def test_kill_9_at_random_moments_loses_nothing_but_the_last_steps(
    tmp_path: Path, tiny_overrides: list[str]
) -> None:
    run, straight = tmp_path / "killed", tmp_path / "straight"
    items = [*crash_overrides(tiny_overrides), "model.dropout=0.1"]  # the RNG state matters too
    train(load_config("tiny", items), straight, progress=False)  # also fills $CSAN_CACHE
    # kill within about three steps of this machine's pace (a step and its checkpoint: 30 ms on
    # a fast CPU), so that three kills land mid-run however fast the machine is
    stamps = [
        r["time"]
        for r in map(json.loads, (straight / "metrics.jsonl").read_text().splitlines())
        if r["kind"] == "train"
    ]
    window = min(0.4, 3 * (stamps[-1] - stamps[0]) / (len(stamps) - 1))
    rng = random.Random(20240607)
    reached = -1
    for _ in range(3):
        proc = start_training(run, items)
        before = reached
        wait_for(lambda b=before: last_step(run) > b, proc)  # it resumed and made progress
        time.sleep(rng.uniform(0.0, window))  # then anywhere: mid-step, mid-checkpoint, mid-log
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        reached = assert_complete_checkpoint(run)
        assert before < reached < STEPS
    result = train(load_config("tiny", items), run, progress=False)
    assert result.steps == STEPS
    assert assert_complete_checkpoint(run) == STEPS
    leftovers = [p.name for p in (run / "checkpoints").iterdir() if "." in p.name]
    assert leftovers == []
    # every step logged once, and the same numbers as the run that was never killed
    assert comparable(run) == comparable(straight)
    resumes = [
        json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if "resume" in x
    ]
    assert len(resumes) == 3  # the second, third and last process each started from a checkpoint
    # and the state it ends in is the uninterrupted run's, bit for bit
    last = Path("checkpoints") / f"step_{STEPS:08d}"
    assert_same_training_state(run / last, straight / last)


def test_sigterm_checkpoints_and_exits_143(tmp_path: Path, tiny_overrides: list[str]) -> None:
    run = tmp_path / "run"
    items = [*tiny_overrides, "train.max_steps=100000", "train.checkpoint_every=3",
             "train.validate_every=null", "train.evaluate_test=true"]  # fmt: skip
    proc = start_training(run, items)
    wait_for(lambda: last_step(run) >= 3, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    stopped = [line for line in out.splitlines() if line.startswith("training interrupted by")]
    assert len(stopped) == 1, out
    step = assert_complete_checkpoint(run)
    assert stopped[0].startswith(f"training interrupted by SIGTERM at step {step}: checkpoint ")
    assert stopped[0].endswith("run the same command to resume")
    summary = json.loads((run / "results.json").read_text())
    assert summary["stop_reason"] == "signal SIGTERM" and summary["interrupted_by"] == "SIGTERM"
    assert summary["steps"] == step and summary["test"] is None  # no test scoring after a signal
    assert not (run / "test2016.hyp").exists()
    load_model(run / "model")


def test_sigint_in_process_stops_at_a_step_boundary(
    tmp_path: Path, tiny_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    cfg = load_config(
        "tiny", [*tiny_overrides, "train.max_steps=100000", "train.checkpoint_every=2",
                 "train.validate_every=null"],
    )  # fmt: skip

    def interrupt() -> None:
        deadline = time.monotonic() + 300
        while last_step(run) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)  # the trainer's handler turns it into a stop request

    handler = signal.getsignal(signal.SIGINT)
    sender = threading.Thread(target=interrupt)
    sender.start()
    result = train(cfg, run, progress=False)
    sender.join()
    assert result.interrupted_by == "SIGINT" and result.stop_reason == "signal SIGINT"
    assert assert_complete_checkpoint(run) == result.steps >= 2
    assert f"training interrupted by SIGINT at step {result.steps}" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGINT) is handler  # the trainer gave the handler back


# -- numerics -------------------------------------------------------------------------------------
class PoisonedLoss(TranslationLoss):
    """The real loss, made non-finite on chosen forward calls (1-based): in the value or the gradient."""

    calls = 0
    bad_calls: ClassVar[set[int]] = set()
    where = "loss"

    def forward(self, src, tgt_in, tgt_out):
        loss, nll, correct = super().forward(src, tgt_in, tgt_out)
        PoisonedLoss.calls += 1
        if PoisonedLoss.calls in PoisonedLoss.bad_calls:
            if PoisonedLoss.where == "loss":
                loss = loss * float("nan")
            else:  # a finite loss whose gradient overflows
                loss = loss + InfGradient.apply(self.model.src_embed.weight)
        return loss, nll, correct


class InfGradient(torch.autograd.Function):
    """Zero in the forward pass, an infinite gradient in the backward pass."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.new_zeros(())

    @staticmethod
    def backward(ctx, grad):
        return torch.full(ctx.shape, math.inf)


def poison(monkeypatch: pytest.MonkeyPatch, bad_calls: set[int], where: str = "loss") -> None:
    monkeypatch.setattr(PoisonedLoss, "calls", 0)
    monkeypatch.setattr(PoisonedLoss, "bad_calls", bad_calls)
    monkeypatch.setattr(PoisonedLoss, "where", where)
    monkeypatch.setattr(trainer_module, "TranslationLoss", PoisonedLoss)


def numerics_cfg(tiny_overrides: list[str], steps: int):
    return load_config(
        "tiny", [*tiny_overrides, f"train.max_steps={steps}", "train.max_bad_steps=3",
                 "train.checkpoint_every=2", "train.validate_every=null", "data.valid_subset=20",
                 "train.log_every=1"],
    )  # fmt: skip


@pytest.mark.parametrize("where", ["loss", "gradient"])
def test_non_finite_updates_are_skipped_with_a_warning(
    tmp_path: Path,
    tiny_overrides: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    poison(monkeypatch, {3, 4}, where)  # calls 3 and 4: two bad updates in a row, then good ones
    result = train(numerics_cfg(tiny_overrides, 6), tmp_path, progress=False)
    out = capsys.readouterr().out
    what = "loss (nan)" if where == "loss" else "gradient norm (inf)"
    assert f"warning: non-finite {what} at step 3; update skipped (1 in a row" in out
    assert "at step 3; update skipped (2 in a row, train.max_bad_steps=3)" in out
    assert result.steps == 6 and PoisonedLoss.calls == 8  # 2 batches spent on skipped updates
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    assert [r["step"] for r in logged] == [1, 2, 3, 4, 5, 6]
    assert all(math.isfinite(r["loss"]) for r in logged)
    model = load_model(tmp_path).model
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_divergence_stops_and_keeps_the_last_good_checkpoint(
    tmp_path: Path,
    tiny_overrides: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    poison(monkeypatch, set(range(6, 100)))  # from the 6th update on, every loss is NaN
    items = [*tiny_overrides, "train.max_steps=50", "train.max_bad_steps=3",
             "train.checkpoint_every=2", "train.validate_every=null", "data.valid_subset=20"]  # fmt: skip
    argv = ["train", "--config", "tiny", "--out", str(tmp_path), "--no-progress"]
    code = main([*argv, *[a for item in items for a in ("--set", item)]])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().split("\n")
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(
        "csan: error: training diverged: 3 updates in a row with a non-finite loss after step 5 "
        "(train.max_bad_steps=3); the last good checkpoint is "
    ), lines[0]
    assert "step_00000004 (step 4)" in lines[0] and "lower train.lr" in lines[0]
    assert assert_complete_checkpoint(tmp_path) == 4
    assert not (tmp_path / "model").exists() and not (tmp_path / "results.json").exists()


def test_a_huge_learning_rate_diverges_cleanly(
    tmp_path: Path, tiny_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = load_config(
        "tiny", [*tiny_overrides, "train.lr=1e30", "train.warmup=1", "train.max_steps=40",
                 "train.max_bad_steps=2", "train.checkpoint_every=1", "train.validate_every=null",
                 "data.valid_subset=20"],
    )  # fmt: skip
    with pytest.raises(CsanError, match=r"^training diverged: 2 updates in a row"):
        train(cfg, tmp_path, progress=False)
    out = capsys.readouterr().out
    assert "warning: non-finite" in out
    folder = ckpt.latest_checkpoint(tmp_path)
    if folder is not None:  # whatever was kept loads and holds finite weights
        assert_complete_checkpoint(tmp_path)


# -- the pieces that make a crash recoverable ------------------------------------------------------
def fake_checkpoint(root: Path, step: int, *, files=ckpt.CHECKPOINT_FILES) -> Path:
    folder = root / "checkpoints" / f"step_{step:08d}"
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_bytes(b"")
    return folder


def test_latest_checkpoint_without_a_usable_last_pointer(tmp_path: Path) -> None:
    fake_checkpoint(tmp_path, 10)
    newest = fake_checkpoint(tmp_path, 20)
    fake_checkpoint(tmp_path, 30, files=("model.safetensors", "config.json"))  # half there
    (tmp_path / "checkpoints" / "step_00000040.tmp-123").mkdir()  # being written when killed
    last = tmp_path / "checkpoints" / "LAST"
    assert ckpt.latest_checkpoint(tmp_path) == newest  # killed before LAST was first written
    last.write_bytes(b"\xff\xfe\x00garbage")
    assert ckpt.latest_checkpoint(tmp_path) == newest
    last.write_text("step_00000099\n")  # names a folder someone deleted
    assert ckpt.latest_checkpoint(tmp_path) == newest
    last.write_text("step_00000010\n")  # a usable LAST wins
    assert ckpt.latest_checkpoint(tmp_path).name == "step_00000010"


def test_stale_temporaries_are_removed(tmp_path: Path) -> None:
    keep = fake_checkpoint(tmp_path, 10)
    root = tmp_path / "checkpoints"
    for name in ("step_00000020.tmp-77", "step_00000005.old-77"):
        (root / name).mkdir()
        (root / name / "model.safetensors").write_bytes(b"x")
    (root / ".LAST.tmp-77").write_text("step_00000020\n")
    (root / "LAST").write_text("step_00000010\n")
    removed = ckpt.remove_stale_temporaries(root)
    assert sorted(removed) == [".LAST.tmp-77", "step_00000005.old-77", "step_00000020.tmp-77"]
    assert sorted(p.name for p in root.iterdir()) == ["LAST", keep.name]


def test_trim_metrics_drops_lines_past_the_checkpoint_and_a_torn_line(tmp_path: Path) -> None:
    from csan.training.safety import trim_metrics

    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"kind": "train", "step": s, "loss": 1.0}) for s in range(1, 6)]
    path.write_text("\n".join(lines) + "\n" + '{"kind": "train", "st', encoding="utf-8")
    assert trim_metrics(path, 3) == 3
    assert path.read_text(encoding="utf-8") == "\n".join(lines[:3]) + "\n"
    assert trim_metrics(path, 3) == 0
    path.write_text(lines[0], encoding="utf-8")  # whole record, newline lost
    trim_metrics(path, 3)
    assert path.read_text(encoding="utf-8") == lines[0] + "\n"
