"""What keeps a run folder consistent when things go wrong: signals, a second trainer, a kill -9.

- :class:`StopRequest`: SIGINT/SIGTERM ask the loop to checkpoint and stop at the next step boundary
  (a second signal stops at once, with ``KeyboardInterrupt``).
- :class:`RunLock`: one trainer per run folder; a second ``csan train --out`` on a folder in use
  fails before it writes anything. The lock is a ``flock`` on ``<run>/.lock``, which the kernel
  releases when the process dies, even by ``kill -9``.
- :func:`trim_metrics`: after a crash, ``metrics.jsonl`` may hold lines for steps past the checkpoint
  the run resumes from (and a half-written last line); they are dropped so the log reads as if the
  run had never been interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

from csan import checkpoint as ckpt
from csan.errors import CsanError
from csan.training.distributed import DistInfo, any_rank

__all__ = ["RunLock", "StopRequest", "agree_to_stop", "trim_metrics"]


class StopRequest:
    """SIGINT/SIGTERM ask the loop to checkpoint and exit at the next step boundary.

    Example:
        >>> import os
        >>> with StopRequest() as stop:
        ...     os.kill(os.getpid(), signal.SIGTERM)  # recorded, not fatal
        ...     stop.signal == signal.SIGTERM
        True
    """

    def __init__(self) -> None:
        self.signal: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is not None:  # second signal: stop now
            raise KeyboardInterrupt
        self.signal = signum

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def agree_to_stop(
    reason: str | None, stop: StopRequest, dist: DistInfo, *, max_minutes: float | None
) -> tuple[str | None, str | None]:
    """Why to stop now, the same on every rank: ``(reason, signal name or None)``.

    ``reason`` is the limit this rank has reached, if any. A signal or a time limit one rank sees
    stops all. Under DDP this is a collective (one small all-reduce): every rank calls it at the same
    point. Steps and epochs advance in lockstep, so only the clock and signals need the vote.

    Example:
        >>> agree_to_stop("max_steps=5", StopRequest(), DistInfo(), max_minutes=None)
        ('max_steps=5', None)
    """
    sig = float(stop.signal or 0)
    if dist.enabled:
        sig, over = any_rank([sig, 1.0 if reason else 0.0], dist)
        if over and reason is None:
            reason = f"max_minutes={max_minutes}"
    if sig:
        name = signal.Signals(int(sig)).name
        return f"signal {name}", name
    return reason, None


class RunLock:
    """An exclusive lock on a run folder for the life of a ``with`` block (Unix ``flock``).

    A second process training into the same folder gets a :class:`CsanError` at once. The folder
    (and its missing parents) is created for the lock; :meth:`undo` removes what the lock created
    (those folders while they hold nothing else, or the lock file), for a start that is refused.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()) / "new" / "run"
        >>> with RunLock(run) as lock:
        ...     (run / ".lock").is_file()
        True
        >>> lock.undo(); run.parent.exists()
        False
    """

    def __init__(self, run_dir: Path) -> None:
        self.folder = Path(run_dir)
        self.path = self.folder / ".lock"
        self._fd: int | None = None
        self._created: Path | None = None  # the first folder this lock created
        self._made_file = False

    def __enter__(self) -> RunLock:
        missing = [d for d in [*reversed(self.folder.parents), self.folder] if not d.exists()]
        self.folder.mkdir(parents=True, exist_ok=True)
        self._created = missing[0] if missing else None
        try:
            import fcntl
        except ImportError:  # not Unix: no lock
            return self
        self._made_file = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            self._made_file = False  # the holder's file
            raise CsanError(
                f"{self.folder}: another `csan train` (pid {holder}) is using this run "
                "folder; wait for it to end or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None

    def undo(self) -> None:
        """Release the lock and remove what taking it created: the lock file, and the folders it
        made while they hold nothing else."""
        self.__exit__(None, None, None)
        if self._made_file:
            self.path.unlink(missing_ok=True)
        if self._created is None or not self.folder.is_dir() or any(self.folder.iterdir()):
            return
        for folder in [self.folder, *self.folder.parents]:
            folder.rmdir()
            if folder == self._created:
                return


def _step_of(line: str) -> int | None:
    """The ``step`` of one metrics line, or None when the line is not a whole JSON record."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, int) else None


def trim_metrics(path: Path, step: int) -> int:
    """Keep only the whole lines of ``path`` (metrics.jsonl) up to ``step``; returns lines dropped.

    Example (a crash after step 2's checkpoint left a line of step 3 and half a line):
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> _ = path.write_text('{"step": 1}\\n{"step": 2}\\n{"step": 3}\\n{"step": 4, "lo')
        >>> trim_metrics(path, 2), path.read_text()
        (2, '{"step": 1}\\n{"step": 2}\\n')
    """
    path = Path(path)
    if not path.is_file():
        return 0
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    kept = [line for line in lines if (s := _step_of(line)) is not None and s <= step]
    if len(kept) < len(lines) or not text.endswith("\n"):
        ckpt.atomic_write_text(path, "".join(line + "\n" for line in kept))
    return len(lines) - len(kept)
