"""Session fixtures shared by the whole suite, and the two test tiers.

- ``@pytest.mark.slow`` tests run only with ``CSAN_SLOW=1`` (or ``-m slow``); the default suite stays
  within a few minutes on 2 CPU cores. This hook is the only one that decides it.
- ``CSAN_CACHE`` points at one temporary folder for the whole session, so no test writes into
  ``~/.cache`` and the subword model of the real corpus is learned (and its splits encoded) once.
- Under pytest-xdist (``scripts/check.sh`` runs ``-n auto``) each worker takes its share of the
  cores as torch threads (2 cores, 2 workers: one thread each), so the workers do not oversubscribe.
- The real Multi30k corpus is found under ``$CSAN_DATA/multi30k`` (default: ``shared/data`` beside
  the repository, as in this project's layout), MNIST under ``$CSAN_DATA/mnist``; tests that need
  them are skipped when they are absent, and fail instead under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_ROOT = REPO_ROOT.parent / "shared" / "data"

# With --doctest-modules every .py file is also collected as a module; conftest.py files in folders
# without __init__.py are all named "conftest" and clash there. Pytest loads them as conftests anyway.
collect_ignore_glob = ["*conftest.py"]


def _threads_per_worker() -> int | None:
    """The cores this process may run on, shared between pytest-xdist's workers; None outside
    xdist, or where the user set ``OMP_NUM_THREADS`` themselves."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers < 1 or "OMP_NUM_THREADS" in os.environ:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // workers)


def pytest_configure(config: pytest.Config) -> None:
    threads = _threads_per_worker()
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # for the csan processes tests start, too
        import torch

        torch.set_num_threads(threads)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("CSAN_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: set CSAN_SLOW=1 (or -m slow) to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def csan_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``$CSAN_CACHE`` for the session: encoded corpora and subword models are built once here."""
    folder = tmp_path_factory.mktemp("csan-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CSAN_CACHE", str(folder))
        yield folder


def data_root() -> Path:
    """``$CSAN_DATA`` if set, else ``shared/data`` beside the repository; absolute, so that a relative
    ``CSAN_DATA`` (as the README writes it) survives a symlink or a chdir."""
    env = os.environ.get("CSAN_DATA")
    return (Path(env) if env else DEFAULT_DATA_ROOT).resolve()


_DATA_ROOT = data_root()  # read at import: some tests unset CSAN_DATA around themselves


def _real_data(name: str, label: str, found: Callable[[Path], list[str]]) -> Path:
    """``$CSAN_DATA/<name>``, or a skip (a failure under ``CI=true``) naming what ``found`` says is
    missing there."""
    folder = _DATA_ROOT / name
    missing = found(folder)
    if missing:
        message = f"{label} not found at {folder} (lacks {', '.join(missing)}; set CSAN_DATA)"
        if os.environ.get("CI", "").lower() == "true":  # CI must test with the data, not skip
            pytest.fail(message)
        pytest.skip(message)
    return folder


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The real Multi30k folder (train/valid/test2016 .en/.de); skip when it is not here."""
    needed = [
        f"{split}.{lang}" for split in ("train", "valid", "test2016") for lang in ("en", "de")
    ]
    return _real_data(
        "multi30k", "Multi30k", lambda folder: [n for n in needed if not (folder / n).is_file()]
    )


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    """The real MNIST folder (the four IDX .gz files); skip when it is not here (fail under CI)."""
    from csan.spatial.mnist import MNIST_FILES

    def missing(folder: Path) -> list[str]:
        return [n for n in MNIST_FILES if not any((folder / f).is_file() for f in (n, f"{n}.gz"))]

    return _real_data("mnist", "MNIST", missing)


@pytest.fixture(scope="session")
def tiny_overrides(multi30k_dir: Path) -> list[str]:
    """``--set`` items that make the ``tiny`` preset quick and deterministic on one CPU thread."""
    return [
        f"data.data_dir={multi30k_dir}",
        "train.threads=1",
        "train.device=cpu",
        "train.checkpoint_minutes=null",
        "model.dropout=0",
    ]


@pytest.fixture(scope="session")
def resumable_overrides(tiny_overrides: list[str]) -> list[str]:
    """``tiny_overrides`` for a run that is resumed: checkpoints every 2 steps, a short validation
    and no test translation."""
    return [
        *tiny_overrides,
        "data.valid_subset=20",
        "train.checkpoint_every=2",
        "train.evaluate_test=false",
    ]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny_overrides: list[str]) -> Path:
    """A run folder of the ``tiny`` preset trained 50 steps (checkpoints, final ``model/``, test score).

    Shared by the checkpoint and CLI tests; treat it as read-only.
    """
    from csan.config import load_config
    from csan.training.trainer import train

    out = tmp_path_factory.mktemp("tiny-run")
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            "train.max_steps=50",
            "train.validate_every=25",
            "train.log_every=10",
            "train.evaluate_test=true",
        ],
    )
    train(cfg, out, progress=False)
    return out


# Executables that torch.compile runs in the background (Triton's ``ptxas`` on CUDA): the folders of
# the packages that ship them.
_COMPILERS = tuple(
    f"{Path(spec.origin).parent}{os.sep}".encode()
    for spec in map(importlib.util.find_spec, ("torch", "triton"))
    if spec is not None and spec.origin is not None
)


def _descendants(root: int) -> dict[int, str]:
    """The live processes under ``root`` (children, their children, ...): pid -> command line; not
    torch.compile's worker pool, nor the compilers it runs (``ptxas`` on CUDA), which it owns."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] not in ("Z", "X"):  # exited, not yet reaped: not running
            parent[int(stat.parent.name)] = int(fields[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, ppid in parent.items():
            if ppid == pid and child not in found:
                try:
                    cmd = (Path("/proc") / str(child) / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"compile_worker" in cmd or cmd.startswith(_COMPILERS):
                    continue
                found[child] = cmd.replace(b"\0", b" ").decode(errors="replace").strip()
                frontier.append(child)
    return found


@pytest.fixture(autouse=True)
def no_process_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that started processes (``csan train``, ``torchrun``, ...) leaves none running: what
    is still there when it ends, failed or not, is killed; a test that passed is then an error, since
    it leaked them. (torch.compile's own worker pool lives for the session and is left alone, with
    the compilers it runs.)"""
    if not Path("/proc/self/stat").exists():  # not Linux: nothing to look at
        yield
        return
    before = set(_descendants(os.getpid()))
    yield
    left = {pid: cmd for pid, cmd in _descendants(os.getpid()).items() if pid not in before}
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in left:  # reap our own children, so none stays a zombie
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    report = getattr(request.node, "rep_call", None)
    if left and report is not None and report.passed:
        shown = "; ".join(f"{pid}: {cmd[:120]}" for pid, cmd in left.items())
        pytest.fail(f"the test left {len(left)} process(es) running (killed now): {shown}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Keep each phase's report on the item (``rep_call``), for the fixture above."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
