"""prepare_corpus: encodes every split, caches ids and the subword model, invalidates on change."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from csan.data import PreparedCorpus, SubwordModel, prepare_corpus
from csan.errors import CsanError

WriteCorpus = Callable[[Path, dict[str, list[str]]], Path]

_DE = ["Ein Hund läuft über die Wiese .", "Zwei Männer spielen Fußball .", "Eine Frau liest ."]
_EN = ["A dog runs across the meadow .", "Two men play soccer .", "A woman reads ."]


@pytest.fixture
def corpus(tmp_path: Path, write_corpus: WriteCorpus) -> Path:
    return write_corpus(
        tmp_path / "corpus",
        {
            "train.de": _DE * 30 + ["", "Größe"],
            "train.en": _EN * 30 + ["empty source", ""],
            "valid.de": ["Ein Mann liest ."],
            "valid.en": ["A man reads ."],
        },
    )


def _prepare(corpus: Path, tmp_path: Path, **kwargs: object) -> PreparedCorpus:
    return prepare_corpus(
        corpus,
        src_lang="de",
        tgt_lang="en",
        splits=["train", "valid"],
        vocab_size=300,
        cache_dir=tmp_path / "cache",
        **kwargs,  # type: ignore[arg-type]
    )


def _no_training(*args: object, **kwargs: object) -> SubwordModel:
    raise AssertionError("SubwordModel.train called although the cache should be used")


def _no_encoding(self: SubwordModel, texts: list[str], **kwargs: object) -> list[list[int]]:
    raise AssertionError("encode called although the cache should be used")


def test_splits_are_encoded_and_aligned(corpus: Path, tmp_path: Path) -> None:
    pc = _prepare(corpus, tmp_path)
    train = pc.splits["train"]
    assert len(train) == 92 and len(pc.splits["valid"]) == 1
    assert len(pc.spm) == 300
    assert train.src_text[:3] == _DE and train.tgt_text[-2:] == ["empty source", ""]
    assert train.src[90] == [] and train.tgt[91] == [], "empty lines are kept, for the trainer"
    assert pc.spm.decode(train.src) == train.src_text
    assert pc.spm.decode(pc.splits["valid"].tgt) == ["A man reads ."]
    src_lens, tgt_lens = train.lengths()
    assert src_lens[0] == len(train.src[0]) + 1 and tgt_lens[91] == 1
    kept = train.without_empty()
    assert len(kept) == 90 and kept.src_text == train.src_text[:90]
    assert all(s and t for s, t in zip(kept.src, kept.tgt))


def test_second_call_hits_the_cache(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = _prepare(corpus, tmp_path)
    assert not any(first.cache_hits.values())
    monkeypatch.setattr(SubwordModel, "train", _no_training)
    monkeypatch.setattr(SubwordModel, "encode", _no_encoding)
    with caplog.at_level(logging.INFO, logger="csan"):
        second = _prepare(corpus, tmp_path)
    assert all(second.cache_hits.values()) and set(second.cache_hits) == {"spm", "train", "valid"}
    assert second.spm.to_bytes() == first.spm.to_bytes()
    for name, split in first.splits.items():
        assert second.splits[name] == split, f"{name}: cached split differs"
    assert "cache hit" in caplog.text
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert not [f for f in files if f.endswith(".tmp")], files
    assert len(files) == 3, files


def test_cache_files_hold_no_pickles(corpus: Path, tmp_path: Path) -> None:
    _prepare(corpus, tmp_path)
    for path in (tmp_path / "cache").glob("*.npz"):
        with np.load(path, allow_pickle=False) as z:
            assert all(z[k].dtype.kind == "i" for k in z.files), path


def test_changed_file_invalidates_the_cache(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _prepare(corpus, tmp_path)
    (corpus / "valid.en").write_text("A man writes .\n", encoding="utf-8")
    monkeypatch.setattr(SubwordModel, "train", _no_training)
    second = _prepare(corpus, tmp_path)
    assert second.cache_hits == {"spm": True, "train": True, "valid": False}
    assert second.splits["valid"].tgt_text == ["A man writes ."]
    assert second.splits["valid"].tgt != first.splits["valid"].tgt
    monkeypatch.undo()
    lines = (corpus / "train.en").read_text(encoding="utf-8").replace("dog", "cat")
    (corpus / "train.en").write_text(lines, encoding="utf-8")
    third = _prepare(corpus, tmp_path)
    assert third.cache_hits == {"spm": False, "train": False, "valid": False}, (
        "a new train file means a new subword model, so every split is encoded again"
    )


def test_vocab_size_is_part_of_the_key(corpus: Path, tmp_path: Path) -> None:
    a = _prepare(corpus, tmp_path)
    b = prepare_corpus(
        corpus,
        src_lang="de",
        tgt_lang="en",
        splits=["train"],
        vocab_size=310,
        cache_dir=tmp_path / "cache",
    )
    assert (len(a.spm), len(b.spm)) == (300, 310) and not b.cache_hits["spm"]


def test_given_model_is_used_without_train_split(corpus: Path, tmp_path: Path) -> None:
    spm = _prepare(corpus, tmp_path).spm
    pc = prepare_corpus(
        corpus,
        src_lang="en",
        tgt_lang="de",
        splits=["valid"],
        vocab_size=300,
        cache_dir=tmp_path / "other-cache",
        spm=spm,
    )
    assert pc.spm is spm and pc.splits["valid"].src_text == ["A man reads ."]


def test_broken_cache_file_is_rebuilt(corpus: Path, tmp_path: Path) -> None:
    _prepare(corpus, tmp_path)
    for path in (tmp_path / "cache").glob("valid.*.npz"):
        path.write_bytes(b"garbage")
    again = _prepare(corpus, tmp_path)
    assert again.cache_hits["valid"] is False and again.splits["valid"].tgt_text == [
        "A man reads ."
    ]


def test_errors(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(CsanError, match="no 'train' split"):
        prepare_corpus(
            corpus,
            src_lang="de",
            tgt_lang="en",
            splits=["valid"],
            vocab_size=300,
            cache_dir=tmp_path / "c",
        )
    with pytest.raises(CsanError, match=r"test2016\.de: no such file"):
        prepare_corpus(
            corpus,
            src_lang="de",
            tgt_lang="en",
            splits=["train", "test2016"],
            vocab_size=300,
            cache_dir=tmp_path / "c",
        )
