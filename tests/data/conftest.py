"""Shared fixtures of the data tests: no user cache or CSAN_DATA, the real corpus's lines, helpers.

The corpus folder is ``multi30k_dir`` of tests/conftest.py (skipped when absent).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from csan.data import SubwordModel, read_lines


@pytest.fixture(autouse=True)
def _isolated_data_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the user's cache; CSAN_DATA is unset unless a test sets it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("CSAN_DATA", raising=False)


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
