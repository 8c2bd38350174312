"""The MNIST files: the IDX reader, checksum checks, the download (faked: nothing is fetched here)."""

from __future__ import annotations

import gzip
import hashlib
import io
from pathlib import Path

import pytest
import torch

from csan.data import datasets
from csan.errors import CsanError
from csan.spatial import MNIST_FILES, load_mnist, mnist_dir, read_idx
from csan.spatial import mnist as mnist_module


def idx_bytes(values: list[list[int]]) -> bytes:
    """An IDX file of unsigned bytes with shape (len(values), len(values[0]))."""
    rows, cols = len(values), len(values[0])
    header = bytes([0, 0, 0x08, 2]) + rows.to_bytes(4, "big") + cols.to_bytes(4, "big")
    return header + bytes(v for row in values for v in row)


def test_reads_raw_and_gzipped_idx_files(tmp_path):
    content = idx_bytes([[1, 2, 3], [4, 5, 255]])
    (tmp_path / "a-idx2-ubyte").write_bytes(content)
    (tmp_path / "b-idx2-ubyte.gz").write_bytes(gzip.compress(content))
    expected = torch.tensor([[1, 2, 3], [4, 5, 255]], dtype=torch.uint8)
    assert torch.equal(read_idx(tmp_path / "a-idx2-ubyte"), expected)
    assert torch.equal(read_idx(tmp_path / "b-idx2-ubyte"), expected)  # finds the .gz
    digest = hashlib.sha256(content).hexdigest()
    assert torch.equal(read_idx(tmp_path / "b-idx2-ubyte.gz", sha256=digest), expected)


def test_reads_big_endian_integers(tmp_path):
    header = bytes([0, 0, 0x0C, 1]) + (2).to_bytes(4, "big")
    path = tmp_path / "ints"
    path.write_bytes(header + (7).to_bytes(4, "big") + (-3).to_bytes(4, "big", signed=True))
    assert read_idx(path).tolist() == [7, -3]


def test_a_corrupt_file_is_rejected_with_a_clear_message(tmp_path):
    content = idx_bytes([[1, 2], [3, 4]])
    good = hashlib.sha256(content).hexdigest()
    damaged = bytearray(content)
    damaged[-1] ^= 0xFF
    path = tmp_path / "x-idx2-ubyte.gz"
    path.write_bytes(gzip.compress(bytes(damaged)))
    with pytest.raises(
        CsanError, match=rf"{path}: sha256 of the content mismatch: expected {good}, got "
    ):
        read_idx(path, sha256=good)
    path.write_bytes(gzip.compress(content)[:-6])  # a cut download
    with pytest.raises(CsanError, match=rf"{path}: not a valid gzip file"):
        read_idx(path)
    path.write_bytes(gzip.compress(content[:-1]))  # one pixel short
    with pytest.raises(CsanError, match=r"15 bytes, the IDX header \(2, 2\) says 16"):
        read_idx(path)
    path.write_bytes(gzip.compress(b"<html>not found</html>"))
    with pytest.raises(CsanError, match=r"not an IDX file \(magic number 3c68746d\)"):
        read_idx(path)


def test_a_folder_without_the_files_is_named(tmp_path):
    with pytest.raises(
        CsanError, match=rf"{tmp_path}: lacks the MNIST files t10k-images-idx3-ubyte"
    ):
        mnist_dir(tmp_path)


def test_no_download_when_disabled(tmp_path, monkeypatch):
    monkeypatch.delenv("CSAN_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(CsanError, match="downloads are disabled; put the files in"):
        mnist_dir(download=False)


def test_download_keeps_only_a_file_with_the_right_checksum(tmp_path, monkeypatch, mnist_dir):
    """The fake mirror serves the real t10k labels; then a damaged copy, which is refused."""
    name = "t10k-labels-idx1-ubyte"
    served = {"bytes": (mnist_dir / f"{name}.gz").read_bytes()}
    urls = []

    def fake_fetch(url):
        urls.append(url)
        return io.BytesIO(served["bytes"])

    monkeypatch.setattr(datasets, "_fetch", fake_fetch)
    target = tmp_path / name
    mnist_module._download_one(name, target)
    assert urls == [f"{mnist_module.MNIST_MIRRORS[0]}{name}.gz"]
    assert hashlib.sha256(target.read_bytes()).hexdigest() == MNIST_FILES[name]
    served["bytes"] = gzip.compress(gzip.decompress(served["bytes"])[:-1] + b"\x00")
    target.unlink()
    with pytest.raises(CsanError, match=r"every mirror failed: .*sha256 mismatch"):
        mnist_module._download_one(name, target)
    assert not target.exists() and len(urls) == 1 + len(mnist_module.MNIST_MIRRORS)


def test_the_real_files_load_with_their_checksums(mnist_dir):
    images, labels = load_mnist("test", data_dir=mnist_dir)
    assert images.shape == (10000, 28, 28) and images.dtype == torch.uint8
    assert labels.shape == (10000,) and labels.dtype == torch.int64
    assert torch.bincount(labels).tolist() == [
        980,
        1135,
        1032,
        1010,
        982,
        892,
        958,
        1028,
        974,
        1009,
    ]
    train, _ = load_mnist("train", data_dir=mnist_dir)
    pixels = train.float() / 255
    assert abs(pixels.mean().item() - 0.1307) < 1e-4 and abs(pixels.std().item() - 0.3081) < 1e-4


def test_a_bad_split_is_named(mnist_dir):
    with pytest.raises(CsanError, match="'train' or 'test', got 'valid'"):
        load_mnist("valid", data_dir=mnist_dir)  # type: ignore[arg-type]


def test_csan_data_is_used(mnist_dir, monkeypatch):
    monkeypatch.setenv("CSAN_DATA", str(Path(mnist_dir).parent))
    assert mnist_dir == mnist_module.mnist_dir(download=False)
