"""From a folder of ``<split>.<lang>`` files to encoded splits, cached on disk.

The cache holds, in ``cache_dir``:

* ``spm-<key>.model``: the subword model learned on the train split, keyed by the sha256 of
  ``train.<src>``/``train.<tgt>``, the vocabulary size and the training settings;
* ``<split>.<src>-<tgt>.<key>.npz``: the ids of one split, keyed by the sha256 of its two files
  and of the subword model's bytes. Arrays only (``allow_pickle=False``), written atomically.

A changed file changes its key, so stale entries are never read (they are left on disk).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from csan.data.corpus import read_parallel
from csan.data.datasets import file_sha256, split_paths
from csan.data.subwords import SubwordModel
from csan.errors import CsanError

__all__ = ["EncodedSplit", "PreparedCorpus", "prepare_corpus"]

log = logging.getLogger("csan.data")

_FORMAT = "csan-encoded-v2"  # v2: control characters dropped (csan.textio.normalize); bump when the cache layout or the training settings change


@dataclass
class EncodedSplit:
    """One split: subword ids without BOS/EOS, and the normalised text (BLEU references).

    Example:
        >>> split = EncodedSplit(src=[[5, 6], []], tgt=[[7], [8, 9]], src_text=["a b", ""],
        ...                      tgt_text=["c", "d e"])
        >>> len(split), split.lengths(), len(split.without_empty())
        (2, ([3, 1], [2, 3]), 1)
    """

    src: list[list[int]]
    tgt: list[list[int]]
    src_text: list[str]
    tgt_text: list[str]

    def __len__(self) -> int:
        """Number of pairs (empty lines included)."""
        return len(self.src)

    def lengths(self) -> tuple[list[int], list[int]]:
        """(source, target) lengths with the special token each side gets, for batching.

        Example:
            >>> EncodedSplit([[5, 6]], [[7]], ["a b"], ["c"]).lengths()
            ([3], [2])
        """
        return [len(s) + 1 for s in self.src], [len(t) + 1 for t in self.tgt]

    def without_empty(self) -> EncodedSplit:
        """A copy without the pairs where either side has no tokens (for training data).

        Example:
            >>> EncodedSplit([[5], []], [[7], [8]], ["a", ""], ["b", "c"]).without_empty().src_text
            ['a']
        """
        keep = [i for i, (s, t) in enumerate(zip(self.src, self.tgt)) if s and t]
        return EncodedSplit(
            [self.src[i] for i in keep],
            [self.tgt[i] for i in keep],
            [self.src_text[i] for i in keep],
            [self.tgt_text[i] for i in keep],
        )


@dataclass
class PreparedCorpus:
    """The subword model and the encoded splits of one language direction.

    Example (the second call reads the subword model and the train ids from the cache):
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> for lang, text in (("de", "ein Hund\\nzwei Katzen\\n"), ("en", "a dog\\ntwo cats\\n")):
        ...     _ = (d / f"train.{lang}").write_text(text * 10, encoding="utf-8")
        ...     _ = (d / f"valid.{lang}").write_text(text.splitlines()[0], encoding="utf-8")
        >>> first = prepare_corpus(d, src_lang="de", tgt_lang="en", splits=["train"],
        ...                        vocab_size=280, cache_dir=d / "cache")
        >>> pc = prepare_corpus(d, src_lang="de", tgt_lang="en", splits=["train", "valid"],
        ...                     vocab_size=280, cache_dir=d / "cache")
        >>> first.cache_hits, pc.cache_hits
        ({'spm': False, 'train': False}, {'spm': True, 'train': True, 'valid': False})
        >>> len(pc.spm), pc.splits["valid"].tgt_text, pc.spm.decode(pc.splits["valid"].tgt)
        (280, ['a dog'], ['a dog'])
    """

    spm: SubwordModel
    splits: dict[str, EncodedSplit]
    cache_hits: dict[str, bool] = field(default_factory=dict)  # name ("spm", split) -> from cache


def prepare_corpus(
    folder: str | os.PathLike[str],
    *,
    src_lang: str,
    tgt_lang: str,
    splits: Sequence[str],
    vocab_size: int,
    cache_dir: str | os.PathLike[str],
    spm: SubwordModel | None = None,
    files: Mapping[str, tuple[Path, Path]] | None = None,
) -> PreparedCorpus:
    """Read, (learn subwords on train,) encode and cache the splits in ``folder``.

    Each split ``s`` is read from ``<folder>/<s>.<src_lang>`` and ``<folder>/<s>.<tgt_lang>`` with
    :func:`~csan.data.corpus.read_parallel` (empty lines kept: filter them before training). If
    ``spm`` is None, a joint :class:`SubwordModel` of ``vocab_size`` pieces is learned on both
    sides of the ``train`` split, which must then be in ``splits``; otherwise ``spm`` is used and
    ``vocab_size`` is ignored. A second call with the same files loads the model and the ids from
    ``cache_dir`` instead of training and encoding again. ``files`` gives a split's two files
    explicitly (``{"train": (src_path, tgt_path), ...}``), in place of the folder's.

    Raises:
        CsanError: a file problem (see :func:`read_parallel`); no ``train`` split to learn from;
            a vocabulary size the data cannot support.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "train.de").write_text("ein Hund\\nzwei Katzen\\n" * 10, encoding="utf-8")
        >>> _ = (d / "train.en").write_text("a dog\\ntwo cats\\n" * 10, encoding="utf-8")
        >>> pc = prepare_corpus(d, src_lang="de", tgt_lang="en", splits=["train"],
        ...                     vocab_size=280, cache_dir=d / "cache")
        >>> len(pc.splits["train"]), pc.spm.decode(pc.splits["train"].tgt[:2])
        (20, ['a dog', 'two cats'])
    """
    folder = Path(folder)
    cache = Path(cache_dir)
    splits = list(dict.fromkeys(splits))
    if not splits:
        raise CsanError("prepare_corpus: no splits requested")
    paths = {
        s: tuple((files or {}).get(s) or split_paths(folder, s, src_lang, tgt_lang)) for s in splits
    }
    texts = {s: read_parallel(*paths[s]) for s in splits}
    hashes = {s: tuple(map(file_sha256, paths[s])) for s in splits}
    hits: dict[str, bool] = {}
    if spm is None:
        if "train" not in texts:
            raise CsanError(
                f"prepare_corpus: splits={splits} has no 'train' split to learn subwords from "
                "(or pass a trained subword model)"
            )
        spm, hits["spm"] = _subword_model(cache, hashes["train"], texts["train"], vocab_size)
    elif len(spm) != vocab_size:
        log.warning(
            "using the given subword model of %d pieces, not vocab_size=%d", len(spm), vocab_size
        )
    encoded: dict[str, EncodedSplit] = {}
    for s in splits:
        key = _key(_FORMAT, *hashes[s], spm.sha256, src_lang, tgt_lang)
        path = cache / f"{s}.{src_lang}-{tgt_lang}.{key[:16]}.npz"
        src_text = [a for a, _ in texts[s]]
        tgt_text = [b for _, b in texts[s]]
        ids = _load_ids(path, len(texts[s]))
        hits[s] = ids is not None
        if ids is None:
            ids = spm.encode(src_text), spm.encode(tgt_text)
            _save_ids(path, *ids)
        log.info(
            "%s split %s (%d pairs): %s %s",
            "loaded" if hits[s] else "encoded",
            s,
            len(src_text),
            "cache hit" if hits[s] else "cache miss, wrote",
            path,
        )
        encoded[s] = EncodedSplit(ids[0], ids[1], src_text, tgt_text)
    return PreparedCorpus(spm=spm, splits=encoded, cache_hits=hits)


def _key(*parts: object) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()


def _subword_model(
    cache: Path, train_hashes: tuple[str, ...], pairs: list[tuple[str, str]], vocab_size: int
) -> tuple[SubwordModel, bool]:
    key = _key(_FORMAT, *train_hashes, vocab_size)
    path = cache / f"spm-{key[:16]}.model"
    if path.is_file():
        try:
            model = SubwordModel.from_file(path)
        except CsanError as err:
            log.warning("ignoring a broken cached subword model: %s", err)
        else:
            log.info("subword model: cache hit %s", path)
            return model, True
    log.info("learning a %d-piece subword model on %d training pairs", vocab_size, len(pairs))
    model = SubwordModel.train([t for pair in pairs for t in pair], vocab_size=vocab_size)
    model.save(path)
    log.info("subword model: cache miss, wrote %s", path)
    return model, False


def _flatten(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in seqs], out=offsets[1:])
    flat = np.fromiter((i for s in seqs for i in s), dtype=np.int32, count=int(offsets[-1]))
    return flat, offsets


def _unflatten(flat: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    values, cuts = flat.tolist(), offsets.tolist()
    return [values[a:b] for a, b in itertools.pairwise(cuts)]


def _save_ids(path: Path, src: list[list[int]], tgt: list[list[int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    src_flat, src_off = _flatten(src)
    tgt_flat, tgt_off = _flatten(tgt)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, src=src_flat, src_offsets=src_off, tgt=tgt_flat, tgt_offsets=tgt_off)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load_ids(path: Path, n_pairs: int) -> tuple[list[list[int]], list[list[int]]] | None:
    """The cached ids, or None when absent or unreadable (then they are encoded again)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in ("src", "src_offsets", "tgt", "tgt_offsets")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        log.warning("%s: unreadable cache file (%s); encoding again", path, err)
        return None
    for side in ("src", "tgt"):
        off = arrays[f"{side}_offsets"]
        if len(off) != n_pairs + 1 or off[0] != 0 or off[-1] != len(arrays[side]):
            log.warning("%s: inconsistent cache file; encoding again", path)
            return None
    return (
        _unflatten(arrays["src"], arrays["src_offsets"]),
        _unflatten(arrays["tgt"], arrays["tgt_offsets"]),
    )
