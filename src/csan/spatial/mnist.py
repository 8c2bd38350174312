"""The MNIST files: where they are, their checksums, the IDX reader, the download for users elsewhere.

The four published files (LeCun, Cortes and Burges), IDX format, gzip-compressed or not. What is checked is
the sha256 of the **decompressed content** (:data:`MNIST_FILES`), so a file recompressed by anyone still
passes, and a damaged one is refused with a message naming it. :func:`mnist_dir` finds them, in this order:

1. an explicit ``data_dir`` (``--data-dir``), which must hold them;
2. ``$CSAN_DATA/mnist`` when it holds all four;
3. the user cache ``$XDG_CACHE_HOME/csan/data/mnist`` (default ``~/.cache/csan/data/mnist``), where missing
   files are downloaded from a public mirror (:data:`MNIST_MIRRORS`, tried in order), checked against
   their sha256 and moved into place atomically (stored decompressed).

Tests never download: they read ``$CSAN_DATA/mnist``.

Example:
    >>> sorted(MNIST_FILES)[0]
    't10k-images-idx3-ubyte'
    >>> read_idx("/no/such/file")
    Traceback (most recent call last):
    ...
    csan.errors.CsanError: /no/such/file: no such file (nor /no/such/file.gz)
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import zlib
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from csan.data.datasets import RemoteFile, _download, default_cache_dir
from csan.errors import CsanError

__all__ = ["IDX_TYPES", "MNIST_FILES", "MNIST_MIRRORS", "load_mnist", "mnist_dir", "read_idx"]

# sha256 of the decompressed files (shared/data/README.md; the same content on every public mirror)
MNIST_FILES = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
# public mirrors of the four .gz files, tried in order (the first is the one torchvision uses)
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
# IDX type codes -> (numpy big-endian dtype); the format stores every number big-endian
IDX_TYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_SPLITS = {"train": "train", "test": "t10k"}


def _read_content(path: Path) -> bytes:
    """The decompressed bytes of ``path`` (gzip when it starts with the gzip magic)."""
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise CsanError(f"{path}: not a valid gzip file ({e})") from None


def read_idx(path: str | os.PathLike[str], *, sha256: str | None = None) -> Tensor:
    """Read an IDX file (gzip-compressed or not) into a tensor of its shape.

    ``path`` may name the file with or without ``.gz``; the other form is tried when it is absent.
    With ``sha256``, the decompressed content must have that digest. Unsigned bytes give uint8.

    Raises:
        CsanError: missing file, bad gzip, checksum mismatch (expected and actual digest), bad magic
            number, or a length that does not match the header's dimensions; the message names the path.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x-idx1-ubyte"
        >>> _ = p.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9]))
        >>> read_idx(p)
        tensor([7, 8, 9], dtype=torch.uint8)
    """
    path = Path(path)
    if not path.is_file():
        other = path.with_suffix("") if path.suffix == ".gz" else path.with_name(path.name + ".gz")
        if not other.is_file():
            raise CsanError(f"{path}: no such file (nor {other})")
        path = other
    content = _read_content(path)
    if sha256 is not None:
        actual = hashlib.sha256(content).hexdigest()
        if actual != sha256:
            raise CsanError(
                f"{path}: sha256 of the content mismatch: expected {sha256}, got {actual} "
                "(damaged or not the published file)"
            )
    if len(content) < 4 or content[0] != 0 or content[1] != 0 or content[2] not in IDX_TYPES:
        raise CsanError(f"{path}: not an IDX file (magic number {content[:4].hex() or 'missing'})")
    dtype, ndim = IDX_TYPES[content[2]], content[3]
    header = 4 + 4 * ndim
    if len(content) < header:
        raise CsanError(f"{path}: truncated IDX header ({len(content)} bytes, {ndim} dimensions)")
    shape = tuple(int(d) for d in np.frombuffer(content, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(content) != expected:
        raise CsanError(
            f"{path}: {len(content)} bytes, the IDX header {shape} says {expected} (truncated or damaged)"
        )
    array = np.frombuffer(content, dtype=dtype, offset=header).reshape(shape)
    return torch.from_numpy(array.astype(dtype.newbyteorder("="), copy=True))


def _has(folder: Path, name: str) -> bool:
    return (folder / name).is_file() or (folder / f"{name}.gz").is_file()


def mnist_dir(data_dir: str | os.PathLike[str] | None = None, *, download: bool = True) -> Path:
    """The folder holding the four MNIST files, downloading them into the cache if needed.

    Order: ``data_dir`` (must hold them), ``$CSAN_DATA/mnist``, the user cache (downloads there when
    ``download``; every download is checked against :data:`MNIST_FILES` before it is kept).

    Example:
        >>> mnist_dir("/no/such/folder")
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: /no/such/folder: lacks the MNIST files t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, train-images-idx3-ubyte, train-labels-idx1-ubyte (.gz or not; given as data dir)
    """
    if data_dir is not None:
        folder = Path(data_dir)
        missing = [n for n in sorted(MNIST_FILES) if not _has(folder, n)]
        if missing:
            raise CsanError(
                f"{folder}: lacks the MNIST files {', '.join(missing)} (.gz or not; given as data dir)"
            )
        return folder
    env = os.environ.get("CSAN_DATA")
    if env and all(_has(Path(env) / "mnist", n) for n in MNIST_FILES):
        return Path(env) / "mnist"
    cache = default_cache_dir() / "mnist"
    missing = [n for n in sorted(MNIST_FILES) if not _has(cache, n)]
    if missing and not download:
        raise CsanError(
            f"MNIST: no local copy of {', '.join(missing)} and downloads are disabled; put the "
            f"files in {cache}, or in <dir>/mnist and set CSAN_DATA=<dir>, or pass --data-dir"
        )
    for name in missing:
        _download_one(name, cache / name)
    return cache


def _download_one(name: str, target: Path) -> None:
    errors = []
    for mirror in MNIST_MIRRORS:
        remote = RemoteFile(url=f"{mirror}{name}.gz", sha256=MNIST_FILES[name], gzipped=True)
        try:
            _download(remote, target)  # checks the content's sha256 before keeping the file
            return
        except (OSError, http.client.HTTPException, CsanError) as e:
            errors.append(f"{remote.url}: {e}")
    raise CsanError(f"MNIST {name}: every mirror failed: {'; '.join(errors)}")


def load_mnist(
    split: Literal["train", "test"],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    download: bool = True,
) -> tuple[Tensor, Tensor]:
    """Images (N, 28, 28) uint8 and labels (N,) int64 of ``split``, checksums verified.

    Example (needs the files; see :func:`mnist_dir`)::

        images, labels = load_mnist("test")  # (10000, 28, 28), (10000,)
    """
    if split not in _SPLITS:
        raise CsanError(f"MNIST split must be 'train' or 'test', got {split!r}")
    folder = mnist_dir(data_dir, download=download)
    prefix = _SPLITS[split]
    name = f"{prefix}-images-idx3-ubyte"
    images = read_idx(folder / name, sha256=MNIST_FILES[name])
    name = f"{prefix}-labels-idx1-ubyte"
    labels = read_idx(folder / name, sha256=MNIST_FILES[name]).long()
    if images.dim() != 3 or labels.dim() != 1 or images.shape[0] != labels.shape[0]:
        raise CsanError(
            f"{folder}: MNIST {split} images {tuple(images.shape)} do not match labels "
            f"{tuple(labels.shape)}"
        )
    return images, labels
