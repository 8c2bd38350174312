"""`csan bench long` reports a kernel that the memory cap stops as out of memory, not as a crash."""

from __future__ import annotations

import argparse
import subprocess

import pytest

from csan.bench import long as bench_long


def _args(**kw: object) -> argparse.Namespace:
    base = dict(
        variant="csan2d",
        length=16384,
        steps=2,
        layers=1,
        d_model=64,
        heads=8,
        head_window=3,
        memory_limit_gb=4.0,
        step_timeout=10.0,
    )
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize(
    ("stderr", "status"),
    [
        (
            "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
            "can't allocate memory: you tried to allocate 27648851968 bytes. Error code 12",
            "out of memory (cap 4 GiB, one allocation of 25.8 GiB refused)",
        ),
        ("Traceback ...\nMemoryError", "out of memory (cap 4 GiB)"),
        ("Traceback ...\nValueError: bad", "failed (exit 1: ValueError: bad)"),
    ],
)
def test_child_failures_are_classified(
    monkeypatch: pytest.MonkeyPatch, stderr: str, status: str
) -> None:
    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr=stderr)

    monkeypatch.setattr(bench_long.subprocess, "run", fake_run)
    row = bench_long._run_child(_args(), "dense")
    assert row["status"] == status
    assert seen[0][seen[0].index("--memory-limit-gb") + 1] == "4.0"  # the cap reaches the child


def test_memory_cap_refuses_a_large_allocation() -> None:
    code = (
        "import torch; from csan.bench.long import _cap_memory; _cap_memory(3.0)\n"
        "try:\n    torch.empty(2**31, dtype=torch.float32).fill_(1)\n"
        "except RuntimeError as e:\n    print('refused' if 'allocate' in str(e) else e)\n"
    )
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "refused", out.stderr[-500:]
