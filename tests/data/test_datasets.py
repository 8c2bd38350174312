"""Dataset registry and resolution: explicit folder, $CSAN_DATA, cache download (never the network)."""

from __future__ import annotations

import gzip
import hashlib
import io
import urllib.error
from pathlib import Path

import pytest

from csan.data import (
    DATASETS,
    DatasetSpec,
    RemoteFile,
    datasets,
    file_sha256,
    resolve_data_dir,
    split_paths,
    verify_checksums,
)
from csan.errors import CsanError

_TINY_TEXT = {"train.en": b"a dog\n", "train.de": b"ein Hund\n"}


def _tiny_spec(tmp_path: Path, *, gzipped: bool, corrupt: str | None = None) -> DatasetSpec:
    """A two-file dataset whose 'upstream' is file:// URLs in tmp_path."""
    upstream = tmp_path / "upstream"
    upstream.mkdir(exist_ok=True)
    files = {}
    for name, data in _TINY_TEXT.items():
        src = upstream / (name + (".gz" if gzipped else ""))
        src.write_bytes(gzip.compress(data) if gzipped else data)
        sha = hashlib.sha256(data).hexdigest()
        if name == corrupt:
            sha = "0" * 64
        files[name] = RemoteFile(src.as_uri(), sha, gzipped=gzipped)
    return DatasetSpec("tiny", "tiny", ("train",), ("en", "de"), files)


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> DatasetSpec:
    spec = _tiny_spec(tmp_path, gzipped=True)
    monkeypatch.setitem(DATASETS, "tiny", spec)
    return spec


def test_registry_knows_multi30k_and_newstest() -> None:
    m = DATASETS["multi30k"]
    assert m.splits == ("train", "valid", "test2016") and set(m.langs) == {"en", "de", "fr", "cs"}
    assert m.files["valid.de"].url.endswith("/data/task1/raw/val.de.gz")
    assert m.files["test2016.en"].url.endswith("/data/task1/raw/test_2016_flickr.en.gz")
    assert all(f.gzipped and len(f.sha256) == 64 for f in m.files.values())
    n = DATASETS["newstest2014"]
    assert n.folder == "newstest" and n.files["newstest2014.de"].url.endswith("newstest2014.de")
    assert not n.files["newstest2014.en"].gzipped


def test_unknown_dataset_lists_known_ones() -> None:
    with pytest.raises(CsanError, match=r"unknown dataset 'wmt99'.*multi30k, newstest2014"):
        resolve_data_dir("wmt99")


def test_split_paths() -> None:
    assert split_paths(Path("d"), "test2016", "de", "en") == (
        Path("d/test2016.de"),
        Path("d/test2016.en"),
    )


def test_explicit_dir_used_as_is(tiny: DatasetSpec, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "train.en").write_text("anything\n")
    with pytest.raises(CsanError) as info:
        resolve_data_dir("tiny", folder)
    assert str(folder) in str(info.value) and "train.de" in str(info.value)
    assert "train.en" not in str(info.value).split("missing")[1], "only missing files are listed"
    (folder / "train.de").write_text("egal\n")
    assert resolve_data_dir("tiny", folder) == folder, "no checksum check on an explicit folder"


def test_csan_data_env(tiny: DatasetSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "env-data"
    (root / "tiny").mkdir(parents=True)
    for name, data in _TINY_TEXT.items():
        (root / "tiny" / name).write_bytes(data)
    monkeypatch.setenv("CSAN_DATA", str(root))
    monkeypatch.setattr(datasets, "_fetch", _no_network)
    assert resolve_data_dir("tiny") == root / "tiny"


def _no_network(url: str) -> io.BytesIO:
    raise urllib.error.URLError("network is unreachable (test)")


def test_download_into_cache_from_file_url(tiny: DatasetSpec, tmp_path: Path) -> None:
    folder = resolve_data_dir("tiny")
    assert folder == tmp_path / "xdg-cache" / "csan" / "data" / "tiny"
    for name, data in _TINY_TEXT.items():
        assert (folder / name).read_bytes() == data, f"{name} decompressed"
    assert sorted(p.name for p in folder.iterdir()) == sorted(_TINY_TEXT), "no temp files left"
    verify_checksums(folder, "tiny")


def test_cached_files_are_not_downloaded_again(
    tiny: DatasetSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = resolve_data_dir("tiny")
    monkeypatch.setattr(datasets, "_fetch", _no_network)
    assert resolve_data_dir("tiny") == folder
    assert resolve_data_dir("tiny", download=False) == folder


def test_plain_download_without_gzip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(DATASETS, "tiny", _tiny_spec(tmp_path, gzipped=False))
    folder = resolve_data_dir("tiny")
    assert (folder / "train.de").read_bytes() == _TINY_TEXT["train.de"]


def test_checksum_mismatch_is_an_error_and_saves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = _tiny_spec(tmp_path, gzipped=True, corrupt="train.de")
    monkeypatch.setitem(DATASETS, "tiny", spec)
    with pytest.raises(CsanError) as info:
        resolve_data_dir("tiny")
    message = str(info.value)
    actual = hashlib.sha256(_TINY_TEXT["train.de"]).hexdigest()
    assert "train.de" in message and "0" * 64 in message and actual in message
    cache = tmp_path / "xdg-cache" / "csan" / "data" / "tiny"
    assert not (cache / "train.de").exists()
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")], "temp file removed"


def test_verify_checksums_names_file_and_hashes(tiny: DatasetSpec, tmp_path: Path) -> None:
    folder = resolve_data_dir("tiny")
    (folder / "train.en").write_bytes(b"changed\n")
    with pytest.raises(CsanError) as info:
        verify_checksums(folder, "tiny")
    message = str(info.value)
    assert str(folder / "train.en") in message
    assert tiny.files["train.en"].sha256 in message
    assert hashlib.sha256(b"changed\n").hexdigest() in message


def test_offline_error_says_where_to_put_files(
    tiny: DatasetSpec, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(datasets, "_fetch", _no_network)
    for kwargs in ({}, {"download": False}):
        with pytest.raises(CsanError) as info:
            resolve_data_dir("tiny", **kwargs)
        message = str(info.value)
        assert "--data-dir" in message and "CSAN_DATA" in message
        assert str(tmp_path / "xdg-cache" / "csan" / "data" / "tiny") in message
        assert "\n" not in message


def test_corrupt_gzip_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = _tiny_spec(tmp_path, gzipped=True)
    (tmp_path / "upstream" / "train.en.gz").write_bytes(b"not gzip at all")
    monkeypatch.setitem(DATASETS, "tiny", spec)
    with pytest.raises(CsanError, match=r"train\.en\.gz: not a valid gzip file"):
        resolve_data_dir("tiny")


def test_real_files_verify(multi30k_dir: Path) -> None:
    verify_checksums(multi30k_dir, "multi30k")
    newstest = multi30k_dir.parent / "newstest"
    if newstest.is_dir():
        verify_checksums(newstest, "newstest2014")


def test_real_data_found_through_csan_data(
    multi30k_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CSAN_DATA", str(multi30k_dir.parent))
    monkeypatch.setattr(datasets, "_fetch", _no_network)
    assert resolve_data_dir("multi30k") == multi30k_dir


def test_the_shared_french_and_czech_sides_match_their_checksums(multi30k_dir: Path) -> None:
    spec = DATASETS["multi30k"]
    for name in ("train.fr", "valid.fr", "test2016.fr", "train.cs", "valid.cs", "test2016.cs"):
        assert file_sha256(multi30k_dir / name) == spec.files[name].sha256, name


def test_only_the_pair_a_run_needs_is_required(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    for split in ("train", "valid"):
        for lang in ("fr", "en"):
            (own / f"{split}.{lang}").write_text("x\n")
    # any language codes in the user's own folder; only the splits asked for
    assert resolve_data_dir("multi30k", own, langs=("fr", "en"), splits=("train", "valid")) == own
    with pytest.raises(
        CsanError, match=r"missing test2016\.fr, test2016\.en \(given as data dir\)"
    ):
        resolve_data_dir("multi30k", own, langs=("fr", "en"), splits=("train", "test2016"))
    with pytest.raises(CsanError, match="has the languages en, de, fr, cs, not xx"):
        resolve_data_dir("multi30k", langs=("en", "xx"))
