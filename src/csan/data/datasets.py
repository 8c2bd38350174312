"""Named datasets: where their files are, where they come from, and their sha256.

A dataset is a folder of ``<split>.<lang>`` text files (``train.de``, ``valid.en``, ...).
:func:`resolve_data_dir` finds it, in this order:

1. an explicit ``data_dir`` (the ``--data-dir`` option), used as-is (no checksum check);
2. ``$CSAN_DATA/<folder>`` when it holds every file of the dataset;
3. a user cache folder, ``$XDG_CACHE_HOME/csan/data/<folder>`` (default ``~/.cache/csan/data``),
   where missing files are downloaded from their public source with :mod:`urllib`, checked against
   their sha256 and moved into place atomically (so concurrent processes, e.g. DDP ranks, are safe).
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import tempfile
import urllib.request
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from csan.errors import CsanError

__all__ = [
    "DATASETS",
    "DatasetSpec",
    "RemoteFile",
    "default_cache_dir",
    "file_sha256",
    "get_dataset",
    "resolve_data_dir",
    "split_paths",
    "verify_checksums",
]

log = logging.getLogger("csan.data")

_MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{}.{}.gz"
_NEWSTEST_URL = (
    "https://raw.githubusercontent.com/Helsinki-NLP/OPUS-MT-testsets/master/testsets/de-en/{}.{}"
)
_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset: its public URL, whether it is gzipped there, and its sha256.

    Example:
        >>> f = get_dataset("multi30k").files["train.en"]
        >>> f.url.rsplit("/", 1)[-1], f.gzipped, len(f.sha256)
        ('train.en.gz', True, 64)
    """

    url: str  # where to download it (https:// or file://)
    sha256: str  # hex digest of the (decompressed) file
    gzipped: bool = False  # the download is gzip-compressed and is stored decompressed


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: the folder name and the files ``<split>.<lang>`` it holds.

    Example:
        >>> f = RemoteFile("file:///data/toy/train.en", sha256="0" * 64)
        >>> DatasetSpec("toy", "toy", ("train",), ("en",), {"train.en": f}).splits
        ('train',)
        >>> DatasetSpec("toy", "toy", ("train",), ("en", "de"), {"train.en": f})
        Traceback (most recent call last):
        ...
        ValueError: dataset toy: files ['train.en'] != ['train.de', 'train.en']
    """

    name: str  # registry key, e.g. "multi30k"
    folder: str  # sub-folder of $CSAN_DATA and of the cache folder
    splits: tuple[str, ...]  # split names, e.g. ("train", "valid", "test2016")
    langs: tuple[str, ...]  # language codes, e.g. ("en", "de")
    files: dict[str, RemoteFile]  # "<split>.<lang>" -> where it comes from

    def __post_init__(self) -> None:
        expected = {f"{s}.{lang}" for s in self.splits for lang in self.langs}
        if set(self.files) != expected:
            raise ValueError(
                f"dataset {self.name}: files {sorted(self.files)} != {sorted(expected)}"
            )


MULTI30K_LANGS = ("en", "de", "fr", "cs")  # task 1: English descriptions and three translations


def _multi30k() -> DatasetSpec:
    upstream = {"train": "train", "valid": "val", "test2016": "test_2016_flickr"}
    sha = {
        "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
        "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
        "valid.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
        "valid.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
        "test2016.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
        "test2016.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
        "train.fr": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
        "valid.fr": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
        "test2016.fr": "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6",
        "train.cs": "2be68b38c8d586ff4f54eb13cc6e1baaaa053695b3f070d3038303a47f2268da",
        "valid.cs": "d53827e469b0a1ca8d57e9e26b2b64c4bc4b33f5479c7b03ae87ae5c882c3e33",
        "test2016.cs": "45adb85f688de8407fddcbe1b36dca15d12aab868149b337e2576f2d6d2ff8d8",
    }
    files = {
        f"{split}.{lang}": RemoteFile(
            _MULTI30K_URL.format(up, lang), sha[f"{split}.{lang}"], gzipped=True
        )
        for split, up in upstream.items()
        for lang in MULTI30K_LANGS
    }
    return DatasetSpec("multi30k", "multi30k", tuple(upstream), MULTI30K_LANGS, files)


def _newstest2014() -> DatasetSpec:
    sha = {
        "en": "7294bccf2879a97b3706b95c9595f1459617a8ee7130d5d8581c910e69736971",
        "de": "ae5d110486bc33d7175e9e28c7d0051eb3e5fcd2166dd93371089852c091a20e",
    }
    files = {
        f"newstest2014.{lang}": RemoteFile(_NEWSTEST_URL.format("newstest2014", lang), sha[lang])
        for lang in ("de", "en")
    }
    return DatasetSpec("newstest2014", "newstest", ("newstest2014",), ("de", "en"), files)


DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (_multi30k(), _newstest2014())}
"""The registry: dataset name -> :class:`DatasetSpec`."""


def get_dataset(name: str) -> DatasetSpec:
    """Look a dataset up by name.

    Example:
        >>> get_dataset("multi30k").splits
        ('train', 'valid', 'test2016')
    """
    try:
        return DATASETS[name]
    except KeyError:
        raise CsanError(
            f"unknown dataset {name!r}; known datasets: {', '.join(sorted(DATASETS))}"
        ) from None


def split_paths(
    folder: str | os.PathLike[str], split: str, src_lang: str, tgt_lang: str
) -> tuple[Path, Path]:
    """The two files ``<folder>/<split>.<src_lang>`` and ``<folder>/<split>.<tgt_lang>``.

    Example:
        >>> split_paths("data", "valid", "de", "en")
        (PosixPath('data/valid.de'), PosixPath('data/valid.en'))
    """
    folder = Path(folder)
    return folder / f"{split}.{src_lang}", folder / f"{split}.{tgt_lang}"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of a file's bytes, read in 1 MiB chunks.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
        >>> _ = p.write_bytes(b"")
        >>> file_sha256(p)[:12]
        'e3b0c44298fc'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify_checksums(folder: str | os.PathLike[str], name: str) -> None:
    """Check that ``folder`` holds every file of dataset ``name`` with the registered sha256.

    Raises:
        CsanError: a file is missing (all missing ones are listed) or its hash differs (the
            message names the file, the expected and the actual hash).

    Example:
        >>> verify_checksums("/no/such/folder", "newstest2014")
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: /no/such/folder: missing newstest2014.de, newstest2014.en; dataset newstest2014 expects newstest2014.de, newstest2014.en
    """
    spec = get_dataset(name)
    folder = Path(folder)
    _require_files(folder, spec, f"; dataset {name} expects {_file_list(spec)}")
    for filename, remote in spec.files.items():
        actual = file_sha256(folder / filename)
        if actual != remote.sha256:
            raise CsanError(
                f"{folder / filename}: sha256 mismatch: expected {remote.sha256}, got {actual}"
            )


def default_cache_dir() -> Path:
    """The user cache folder for datasets: ``$XDG_CACHE_HOME/csan/data`` or ``~/.cache/csan/data``.

    Example:
        >>> default_cache_dir().parts[-2:]
        ('csan', 'data')
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "csan" / "data"


def resolve_data_dir(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
    langs: Sequence[str] | None = None,
    splits: Sequence[str] | None = None,
) -> Path:
    """The folder holding dataset ``name``'s ``<split>.<lang>`` files, downloading them if needed.

    Order: explicit ``data_dir`` (used as-is), then ``$CSAN_DATA/<folder>`` if complete, then the
    user cache folder (see :func:`default_cache_dir`), where files that are absent are downloaded
    (only when ``download`` is true) and verified against their sha256. Only the files of
    ``langs`` (a run's source and target language) and ``splits`` are needed (default: all the
    dataset's); in ``data_dir`` any language codes go, not only the dataset's.

    Raises:
        CsanError: unknown dataset; ``data_dir`` lacks files (they are listed); a download fails
            or is disabled with no local copy (the message says where to put the files and
            mentions ``--data-dir`` and ``CSAN_DATA``); a downloaded file has the wrong sha256.

    Example:
        >>> resolve_data_dir("imagenet")
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: unknown dataset 'imagenet'; known datasets: multi30k, newstest2014
    """
    spec = get_dataset(name)
    langs = tuple(langs or spec.langs)
    splits = tuple(splits or spec.splits)
    if data_dir is not None:
        folder = Path(data_dir)
        needed = [f"{split}.{lang}" for split in splits for lang in langs]
        missing = [f for f in needed if not (folder / f).is_file()]
        if missing:
            raise CsanError(f"{folder}: missing {', '.join(missing)} (given as data dir)")
        return folder
    unknown = [lang for lang in langs if lang not in spec.langs]
    if unknown:
        raise CsanError(
            f"dataset {name} has the languages {', '.join(spec.langs)}, not {', '.join(unknown)}; "
            "give your own files with --data-dir"
        )
    spec = _narrowed(spec, langs, splits)
    env = os.environ.get("CSAN_DATA")
    if env:
        folder = Path(env) / spec.folder
        if not _missing(folder, spec):
            return folder
        log.info("CSAN_DATA=%s: %s lacks %s; using the cache", env, folder, _missing(folder, spec))
    cache = default_cache_dir() / spec.folder
    missing = _missing(cache, spec)
    if missing and not download:
        raise CsanError(_no_copy_message(spec, cache, missing, "downloads are disabled"))
    for filename in missing:
        remote = spec.files[filename]
        try:
            _download(remote, cache / filename)
        except (OSError, http.client.HTTPException) as err:  # URLError, timeouts, resets
            raise CsanError(
                _no_copy_message(spec, cache, missing, f"download of {remote.url} failed: {err}")
            ) from None
    return cache


def _narrowed(spec: DatasetSpec, langs: tuple[str, ...], splits: tuple[str, ...]) -> DatasetSpec:
    """The part of ``spec`` a run needs: those languages and splits."""
    splits = tuple(s for s in spec.splits if s in splits) or spec.splits
    files = {f"{s}.{lang}": spec.files[f"{s}.{lang}"] for s in splits for lang in langs}
    return DatasetSpec(spec.name, spec.folder, splits, langs, files)


def _missing(folder: Path, spec: DatasetSpec) -> list[str]:
    return [f for f in spec.files if not (folder / f).is_file()]


def _file_list(spec: DatasetSpec) -> str:
    return ", ".join(spec.files)


def _require_files(folder: Path, spec: DatasetSpec, context: str) -> None:
    missing = _missing(folder, spec)
    if missing:
        raise CsanError(f"{folder}: missing {', '.join(missing)}{context}")


def _no_copy_message(spec: DatasetSpec, cache: Path, missing: list[str], why: str) -> str:
    return (
        f"dataset {spec.name}: {why}; no local copy of {', '.join(missing)}. Put the files "
        f"({_file_list(spec)}) in {cache}, or in <dir>/{spec.folder} and set CSAN_DATA=<dir>, "
        f"or pass --data-dir <folder holding them>"
    )


def _fetch(url: str) -> BinaryIO:
    """Open ``url`` for reading (https:// or file://); tests replace this function."""
    return urllib.request.urlopen(url, timeout=_TIMEOUT_S)


@contextmanager
def _atomic_target(target: Path) -> Iterator[BinaryIO]:
    """A temporary file next to ``target``; renamed onto it only if the block succeeds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _download(remote: RemoteFile, target: Path) -> None:
    """Download ``remote`` to ``target`` via a temporary file, checking its sha256 first."""
    log.info("downloading %s -> %s", remote.url, target)
    digest = hashlib.sha256()
    with _atomic_target(target) as out, _fetch(remote.url) as response:
        stream: BinaryIO = response
        if remote.gzipped:
            stream = gzip.GzipFile(fileobj=response)  # type: ignore[assignment]
        try:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise CsanError(f"{remote.url}: not a valid gzip file: {err}") from None
        actual = digest.hexdigest()
        if actual != remote.sha256:
            raise CsanError(
                f"{target.name} from {remote.url}: sha256 mismatch: expected {remote.sha256}, "
                f"got {actual}; the file was not saved"
            )
