"""Scale-out: two CPU processes under torchrun (gloo) train like one process with the same batch.

Why the two runs can be compared step by step: the sampler cuts and shuffles the batches of an epoch
the same way in every process, and shard ``r`` of ``N`` takes batches ``r, r + N, ...``. With two
processes, optimizer step ``k`` therefore sees batches ``2k`` and ``2k + 1``: exactly the two that
one process with ``train.update_freq=2`` accumulates at step ``k``, normalised by the same token count.
Only the order of the floating-point sums may differ (DDP all-reduces the two gradients), so the
losses agree to rounding, which Adam carries along. On 1 thread they came out identical to the four
logged decimals for all 20 steps; the tolerances (1e-3 per train loss, 1% on the valid loss) leave
room for other summation orders (thread counts, gloo's ring) while catching a wrong batch, a wrong
normaliser or a missed all-reduce, each of which moves the loss by far more (~1-5%) within 20 steps.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from safetensors.torch import load_file

from csan.config import load_config
from csan.training.trainer import train

STEPS = 20
TAG_VAR = "CSAN_TEST_TORCHRUN"  # in each torchrun's environment, to find its processes by


def overrides(tiny_overrides: list[str]) -> list[str]:
    return [
        *tiny_overrides,
        "data.valid_subset=50",
        "train.max_tokens=512",
        f"train.max_steps={STEPS}",
        "train.log_every=1",
        "train.validate_every=10",
        "train.checkpoint_every=5",
        # Adam ignores a constant gradient scale, but not beside an L2 term: DDP averaging the
        # ranks' gradients where the sum is due moves these weights by 2e-2 in 20 steps (measured
        # by halving the gradient in one process), 200x the tolerance of the comparison below
        "train.weight_decay=0.1",
    ]


def records(run: Path, kind: str) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def tagged(tag: str) -> list[int]:
    """The live processes whose environment holds ``tag``: torchrun's agent and its workers.

    (The workers cannot be found by session or process group: the agent starts each in a session of
    its own, and an agent that died leaves them to init. The environment they inherit finds them.)
    """
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if tag.encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
    return found


def torchrun(nproc: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``python -m csan ARGS`` under torchrun; a hang fails with every process's Python stack.

    (20 tiny steps take ~20 s; on a timeout the agent and every worker get SIGABRT, which
    ``PYTHONFAULTHANDLER`` turns into a traceback of all its threads on stderr, then SIGKILL.)
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", "-m", "csan", *args]  # fmt: skip
    token = uuid.uuid4().hex
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1", TAG_VAR: token}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pids = tagged(f"{TAG_VAR}={token}")
        tree = subprocess.run(
            ["ps", "-ww", "-o", "pid,ppid,sid,stat,etime,args", "-p", ",".join(map(str, pids)) or "0"],
            capture_output=True, text=True,
        ).stdout  # fmt: skip
        for sig in (signal.SIGABRT, signal.SIGKILL):  # stacks first, then make sure
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            time.sleep(2)
        try:  # the workers held the pipes; with all of them gone this returns at once
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            out, err = "(no output: the pipes stayed open)", ""
        pytest.fail(
            f"torchrun still running after {timeout:.0f} s; processes:\n{tree}\n"
            f"stdout:\n{out[-3000:]}\nstderr (stacks after SIGABRT):\n{err[-12000:]}"
        )
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_two_processes_match_one_with_update_freq_2(
    tmp_path: Path, tiny_overrides: list[str]
) -> None:
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    # in-process first: it also fills $CSAN_CACHE, which the two ranks then read
    one = train(
        load_config("tiny", [*overrides(tiny_overrides), "train.update_freq=2"]),
        single,
        progress=False,
    )
    sets = [arg for item in overrides(tiny_overrides) for arg in ("--set", item)]
    proc = torchrun(2, "train", "--config", "tiny", *sets, "--out", str(ddp), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]

    # rank 0 alone speaks and writes: one banner, one line per step, no leftovers of another writer
    banners = [line for line in proc.stdout.splitlines() if line.startswith("model: ")]
    assert len(banners) == 1 and banners[0].endswith(", 2 processes"), proc.stdout
    assert proc.stdout.count(f"training stopped: max_steps={STEPS}") == 1
    train_ddp, train_one = records(ddp, "train"), records(single, "train")
    assert [r["step"] for r in train_ddp] == list(range(1, STEPS + 1))
    assert [r["step"] for r in records(ddp, "valid")] == [10, 20]
    assert (ddp / "checkpoints" / "LAST").read_text().strip() == f"step_{STEPS:08d}"
    assert not [
        p for p in (ddp / "checkpoints").iterdir() if ".tmp-" in p.name or ".old-" in p.name
    ]
    assert sorted(p.name for p in ddp.iterdir()) == sorted(p.name for p in single.iterdir())

    # the same trajectory: same batches per step, same epoch position, losses equal to rounding
    assert [r["epoch"] for r in train_ddp] == [r["epoch"] for r in train_one]
    for a, b in zip(train_ddp, train_one):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-3), (a, b)
    assert train_ddp[-1]["loss"] < train_ddp[0]["loss"]
    valid_ddp = records(ddp, "valid")[-1]["loss"]
    assert valid_ddp == pytest.approx(one.best_valid["loss"], rel=0.01)
    summary = json.loads((ddp / "results.json").read_text())
    assert summary["steps"] == STEPS and summary["stop_reason"] == f"max_steps={STEPS}"
    # the weights: the same sums, maybe in another order (equal to the bit here, 2026-11-23)
    last = Path("checkpoints") / f"step_{STEPS:08d}" / "model.safetensors"
    w_ddp, w_one = load_file(str(ddp / last)), load_file(str(single / last))
    worst = max((w_ddp[k] - w_one[k]).abs().max().item() for k in w_one)
    assert worst < 1e-4, f"weights differ by up to {worst:.2e} after {STEPS} steps"


# -- the stop vote, with a real gloo group and no model --------------------------------------------
VOTER = textwrap.dedent(
    """
    import json, os, sys, types
    import torch
    from csan.config import load_config
    from csan.training.distributed import init_distributed, shutdown
    from csan.training.safety import agree_to_stop

    rank = int(os.environ["RANK"])
    info = init_distributed(torch.device("cpu"))
    cfg = load_config("tiny", ["train.max_minutes=1"])
    answers = []
    for case in json.loads(sys.argv[1]):
        limit, sig = case[str(rank)]
        stop = types.SimpleNamespace(signal=sig)
        reason, _ = agree_to_stop(limit, stop, info, max_minutes=cfg.train.max_minutes)
        answers.append(reason)
    shutdown(info)
    print(json.dumps(answers))
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_rank_that_must_stop_stops_all_ranks_at_the_same_step() -> None:
    """A signal (or the clock) seen by one rank only: every rank returns the same reason."""
    sigterm = 15
    cases = [
        {"0": [None, None], "1": [None, None]},  # nobody stops
        {"0": [None, None], "1": [None, sigterm]},  # SIGTERM reached rank 1 only
        {"0": ["max_minutes=1.0", None], "1": [None, None]},  # rank 0's clock ran out first
        {"0": ["max_minutes=1.0", None], "1": [None, sigterm]},  # the signal wins
    ]
    expected = [None, "signal SIGTERM", "max_minutes=1.0", "signal SIGTERM"]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", VOTER, json.dumps(cases)],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    for rank, proc in enumerate(procs):
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-2000:]
        assert json.loads(out) == expected, f"rank {rank}"
