"""The suite's own guarantees: a failing test leaves no process running."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_failing_test_leaves_no_child_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    (tmp_path / "test_leaks.py").write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys
            def test_starts_a_child_then_fails():
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
                open({str(pid_file)!r}, "w").write(str(child.pid))
                assert False, "this test fails with its child still running"
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_leaks.py")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1 and "1 failed" in proc.stdout, proc.stdout + proc.stderr
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # killed by the fixture; its parent (that pytest) has exited since
    assert not Path(f"/proc/{pid}").exists(), f"child {pid} still running after the test failed"
