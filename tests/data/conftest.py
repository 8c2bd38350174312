"""Shared fixtures of the data tests: the real corpus (skipped when absent) and small helpers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from csan.data import SubwordModel, read_lines

REPO_ROOT = Path(__file__).resolve().parents[2]
_CSAN_DATA = os.environ.get("CSAN_DATA")  # read once: tests unset it (see _isolated_data_env)


def shared_data_root() -> Path:
    """``$CSAN_DATA`` if set, else ``../shared/data`` next to the repository root."""
    return Path(_CSAN_DATA) if _CSAN_DATA else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated_data_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the user's cache; CSAN_DATA is unset unless a test sets it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("CSAN_DATA", raising=False)


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The real Multi30k folder; the test is skipped when it is not on this machine."""
    folder = shared_data_root() / "multi30k"
    if not (folder / "train.de").is_file():
        pytest.skip(f"real corpus not found at {folder} (set CSAN_DATA)")
    return folder


@pytest.fixture(scope="session")
def real_lines(multi30k_dir: Path) -> dict[str, list[str]]:
    """Normalised lines of all Multi30k files, keyed ``"<split>.<lang>"``."""
    return {
        f"{s}.{lang}": read_lines(multi30k_dir / f"{s}.{lang}")
        for s in ("train", "valid", "test2016")
        for lang in ("en", "de")
    }


@pytest.fixture(scope="session")
def small_spm(real_lines: dict[str, list[str]]) -> SubwordModel:
    """A joint 1000-piece model learned on 2000 real pairs (fast: well under a second)."""
    texts = real_lines["train.en"][:2000] + real_lines["train.de"][:2000]
    return SubwordModel.train(texts, vocab_size=1000)


def _write_corpus(folder: Path, files: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        (folder / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return folder


@pytest.fixture
def write_corpus() -> Callable[[Path, dict[str, list[str]]], Path]:
    """``write_corpus(folder, {"train.de": [lines], ...})`` writes UTF-8 files, one line each."""
    return _write_corpus
