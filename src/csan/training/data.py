"""The data a training run needs: subword model, encoded splits, the batch sampler."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from torch import nn

from csan.config import Config, DataConfig, ModelConfig
from csan.data import (
    Batch,
    EncodedSplit,
    SubwordModel,
    TokenBatchSampler,
    collate,
    prepare_corpus,
    resolve_data_dir,
    split_paths,
)
from csan.errors import CsanError
from csan.models import build_model
from csan.training.distributed import DistInfo, barrier, same_on_all_ranks

__all__ = ["TrainingData", "cache_root", "corpus_files", "load_training_data"]

log = logging.getLogger("csan")


def cache_root() -> Path:
    """Where encoded corpora are cached: ``$CSAN_CACHE`` or ``~/.cache/csan``.

    Example:
        >>> import os
        >>> cache_root() == Path(os.environ.get("CSAN_CACHE") or Path.home() / ".cache" / "csan")
        True
    """
    base = os.environ.get("CSAN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "csan")
    path = Path(base)
    if path.exists() and not path.is_dir():
        what = "CSAN_CACHE" if os.environ.get("CSAN_CACHE") else "the cache folder"
        raise CsanError(f"{what} {path}: is a file, expected a folder for encoded corpora")
    return path


@dataclass
class TrainingData:
    """What a run trains and validates on (see :func:`load_training_data`): the subword model, the
    encoded splits and the token-budget batch sampler; :meth:`batch` pads a batch of pairs.

    Example (a corpus of 3 sentence pairs, 20 times over):
        >>> from unittest import mock
        >>> from csan.config import load_config
        >>> from csan.toy import TOY_PAIRS, toy_corpus
        >>> d = toy_corpus()
        >>> cfg = load_config("tiny", [f"data.data_dir={d}", "data.vocab_size=300"])
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     data = load_training_data(cfg)
        >>> indices = data.sampler.batches(1)[0]  # the first batch of epoch 1: every pair fits
        >>> batch = data.batch(indices[:2])
        >>> len(indices), len(batch), batch.src.shape[0], batch.indices == indices[:2]
        (60, 2, 2, True)
        >>> data.spm.decode([batch.tgt_out[0, :-1].tolist()])[0] in [de for _, de in TOY_PAIRS]
        True
    """

    spm: SubwordModel
    train: EncodedSplit
    valid: EncodedSplit
    tests: dict[str, EncodedSplit]  # name -> test set, each scored at the end (may be empty)
    sampler: TokenBatchSampler
    n_train: int  # pairs kept for training
    n_dropped: int  # pairs dropped (too long or empty)
    pad_to_multiple: int = 1  # batch widths rounded up to this
    bpe_dropout: float = 0.0  # data.bpe_dropout: each epoch's training pairs cut afresh
    max_len: int = 128  # a sampled side longer than this (with EOS) keeps its usual segmentation
    seed: int = 0  # train.seed: with the epoch, seeds the epoch's cut
    _epoch: _EpochCut | None = field(default=None, repr=False)  # the latest epoch's, kept

    @property
    def batches_per_epoch(self) -> int:
        """This process's batches in an epoch: with BPE-dropout, epoch 1's count (the others
        differ by a few batches, as their cuts do); what an epoch budget is planned with."""
        return len(self.epoch_batches(1)) if self.bpe_dropout > 0 else len(self.sampler)

    def build_model(self, cfg: ModelConfig) -> nn.Module:
        """The model ``cfg`` for this data: its vocabulary, and with ``model.output_vocab=target``
        a softmax over the pieces the training targets use (:meth:`Transformer.set_output_vocab`).

        Example (the toy corpus's German side uses fewer pieces than its joint vocabulary holds):
            >>> from unittest import mock
            >>> from csan.config import load_config
            >>> from csan.toy import toy_corpus
            >>> d = toy_corpus()
            >>> cfg = load_config("tiny", [f"data.data_dir={d}", "data.vocab_size=300",
            ...                            "model.output_vocab=target"])
            >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
            ...     data = load_training_data(cfg)
            >>> model = data.build_model(cfg.model)
            >>> model.vocab_size, 10 < len(model.output_ids) < 300
            (300, True)
        """
        model = build_model(cfg, len(self.spm))
        if cfg.output_vocab == "target":
            model.set_output_vocab(sorted({i for t in self.train.tgt for i in t}))
        return model

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This process's batches of ``epoch`` (lists of indices into ``train``): the sampler's,
        cut by the epoch's own segmentation where ``bpe_dropout`` is on (see :meth:`batch`).

        Example (BPE-dropout 0.3 on the toy corpus: the same pairs, more pieces, the same text):
            >>> from unittest import mock
            >>> from csan.config import load_config
            >>> from csan.toy import toy_corpus
            >>> d = toy_corpus()
            >>> cfg = load_config("tiny", [f"data.data_dir={d}", "data.vocab_size=300",
            ...                            "data.bpe_dropout=0.3"])
            >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
            ...     data = load_training_data(cfg)
            >>> indices = [i for b in data.epoch_batches(1) for i in b]
            >>> sorted(indices) == list(range(data.n_train))
            True
            >>> usual, cut = data.batch(indices), data.batch(indices, epoch=1)
            >>> cut.src_tokens > usual.src_tokens, data.spm.decode(cut.src.tolist()) == (
            ...     data.spm.decode(usual.src.tolist()))
            (True, True)
        """
        return self._for_epoch(epoch).batches

    def batch(self, indices: list[int], *, epoch: int | None = None) -> Batch:
        """Pad the training pairs at ``indices`` into a :class:`Batch`.

        With ``bpe_dropout`` and an ``epoch``, the pairs are cut as that epoch cuts them: every
        training text sampled afresh by :meth:`SubwordModel.sample` (BPE-dropout), seeded by
        ``seed`` and the epoch, so every process and a resumed run cut the same way; a side that
        would pass ``max_len`` keeps its usual ids. Without an epoch, the usual ids.
        """
        split = self._for_epoch(epoch) if epoch is not None else self.train
        pairs = [(split.src[i], split.tgt[i]) for i in indices]
        return collate(pairs, indices, pad_to_multiple=self.pad_to_multiple)

    def _for_epoch(self, epoch: int) -> _EpochCut:
        """``epoch``'s ids and batches, worked out once (the trainer asks for them at every log
        line): the usual ids, or with ``bpe_dropout`` the epoch's own cut and its batches."""
        if self._epoch is not None and self._epoch.epoch == epoch:
            return self._epoch
        if self.bpe_dropout <= 0:
            src, tgt = self.train.src, self.train.tgt
            batches = self.sampler.batches(epoch)
        else:
            src, tgt = self._sample(epoch)
            lengths = [len(ids) + 1 for ids in src], [len(ids) + 1 for ids in tgt]
            batches = self.sampler.batches(epoch, lengths=lengths)
        self._epoch = _EpochCut(epoch, src, tgt, batches)
        return self._epoch

    def _sample(self, epoch: int) -> tuple[list[list[int]], list[list[int]]]:
        """The training pairs' ids as ``epoch`` cuts them with BPE-dropout, seeded by chunk."""
        n, chunk = len(self.train), 8192
        src: list[list[int]] = []
        tgt: list[list[int]] = []
        for c, start in enumerate(range(0, n, chunk)):
            stop = min(start + chunk, n)
            state = np.random.SeedSequence([self.seed, epoch, c]).generate_state(1)[0]
            texts = self.train.src_text[start:stop] + self.train.tgt_text[start:stop]
            cut = self.spm.sample(texts, alpha=self.bpe_dropout, seed=int(state))
            usual = self.train.src[start:stop] + self.train.tgt[start:stop]
            fit = [ids if len(ids) < self.max_len else old for ids, old in zip(cut, usual)]
            src += fit[: stop - start]
            tgt += fit[stop - start :]
        return src, tgt


@dataclass(frozen=True)
class _EpochCut:
    """One epoch's training ids (``src``, ``tgt``, indexed as ``TrainingData.train``) and batches."""

    epoch: int
    src: list[list[int]]
    tgt: list[list[int]]
    batches: list[list[int]]


def _subset(split: EncodedSplit, n: int | None) -> EncodedSplit:
    if n is None or n >= len(split):
        return split
    return EncodedSplit(split.src[:n], split.tgt[:n], split.src_text[:n], split.tgt_text[:n])


def _prefixes(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def corpus_files(
    dc: DataConfig, *, with_test: bool = True, download: bool = True
) -> dict[str, tuple[Path, Path]]:
    """The two files of every split a run reads: ``"train"``, ``"valid"`` and one
    ``"test:<name>"`` per test set, from ``data.*_prefix`` paths (``<prefix>.<lang>``) where given,
    else from the corpus folder (``<folder>/<split>.<lang>``, see ``resolve_data_dir``).

    Example:
        >>> import pathlib, tempfile
        >>> from csan.config import DataConfig
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ("tr", "dev", "t1", "t2"):
        ...     for lang in ("en", "de"):
        ...         _ = (d / f"{name}.{lang}").write_text("x\\n")
        >>> files = corpus_files(DataConfig(train_prefix=f"{d}/tr", valid_prefix=f"{d}/dev",
        ...                                 test_prefix=f"{d}/t1, {d}/t2"))
        >>> {k: [p.name for p in v] for k, v in files.items()}
        {'train': ['tr.en', 'tr.de'], 'valid': ['dev.en', 'dev.de'], 'test:t1': ['t1.en', 't1.de'], 'test:t2': ['t2.en', 't2.de']}
    """
    langs = (dc.src_lang, dc.tgt_lang)

    def by_prefix(prefix: str) -> tuple[Path, Path]:
        pair = Path(f"{prefix}.{dc.src_lang}"), Path(f"{prefix}.{dc.tgt_lang}")
        for path in pair:
            if not path.is_file():
                raise CsanError(f"{path}: no such file (from the prefix {prefix!r})")
        return pair

    roles = {"train": (dc.train_prefix, dc.train_split), "valid": (dc.valid_prefix, dc.valid_split)}
    tests = _prefixes(dc.test_prefix) if with_test else []
    need = [split for prefix, split in roles.values() if not prefix]
    if with_test and not tests and dc.test_split:
        need.append(dc.test_split)
    folder = (
        resolve_data_dir(dc.dataset, dc.data_dir, download=download, langs=langs, splits=need)
        if need
        else None
    )
    files: dict[str, tuple[Path, Path]] = {}
    for role, (prefix, split) in roles.items():
        files[role] = by_prefix(prefix) if prefix else split_paths(folder, split, *langs)
    for prefix in tests:
        files[f"test:{Path(prefix).name}"] = by_prefix(prefix)
    if with_test and not tests and dc.test_split:
        files[f"test:{dc.test_split}"] = split_paths(folder, dc.test_split, *langs)
    return files


def load_training_data(
    cfg: Config,
    *,
    spm_bytes: bytes | None = None,
    dist: DistInfo | None = None,
    pad_to_multiple: int = 1,
) -> TrainingData:
    """Resolve the corpus folder, learn or reuse the subword model, encode, and build the sampler.

    With ``spm_bytes`` (a resumed run) the run's own subword model is reused. ``pad_to_multiple``
    rounds the batch widths up (the token budget counts the rounded widths): 8 suits GPU tensor
    cores; on a CPU exact widths are faster, since rounding to 8 makes a quarter of the source
    positions of Multi30k padding.

    Example (the encoded corpus is cached under ``$CSAN_CACHE``; a second load reads it back):
        >>> from unittest import mock
        >>> from csan.config import load_config
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus()
        >>> cfg = load_config("tiny", [f"data.data_dir={d}", "data.vocab_size=300",
        ...                            "train.evaluate_test=true"])
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     data = load_training_data(cfg)
        >>> data.n_train, data.n_dropped, len(data.spm), len(data.valid), sorted(data.tests)
        (60, 0, 300, 60, ['test2016'])
        >>> data.valid.src_text[:2], data.spm.encode(["a dog runs ."])[0] == data.train.src[0]
        (['a dog runs .', 'a cat sleeps .'], True)
    """
    dc, tc = cfg.data, cfg.train
    dist = dist or DistInfo()
    files = corpus_files(dc, with_test=tc.evaluate_test)
    spm = SubwordModel.from_bytes(spm_bytes) if spm_bytes is not None else None
    train_files = " and ".join(str(p) for p in files["train"])

    def prepare():
        try:
            return prepare_corpus(
                files["train"][0].parent,
                src_lang=dc.src_lang,
                tgt_lang=dc.tgt_lang,
                splits=list(files),
                vocab_size=dc.vocab_size,
                cache_dir=cache_root() / "prepared" / dc.dataset,
                spm=spm,
                files=files,
            )
        except CsanError as e:
            if str(e).startswith("cannot train a subword model"):  # say which files
                raise CsanError(f"{train_files}: {e}") from None
            raise

    # Under DDP rank 0 learns the subword model and fills the cache first; the others then read
    # the cache, so every rank has the same vocabulary (and the cache is written once).
    if dist.is_main:
        corpus = prepare()
    barrier(dist)
    if not dist.is_main:
        corpus = prepare()
    if not same_on_all_ranks(corpus.spm.to_bytes(), dist):
        raise CsanError(
            f"rank {dist.rank}: the subword model differs between processes; is CSAN_CACHE "
            f"({cache_root()}) a folder every process sees?"
        )
    train = _subset(corpus.splits["train"], dc.train_subset)
    valid = _subset(corpus.splits["valid"], dc.valid_subset)
    tests = {
        name.removeprefix("test:"): split
        for name, split in corpus.splits.items()
        if name.startswith("test:")
    }
    max_len = min(dc.max_len, cfg.model.max_positions)
    # empty sides cannot be learned from; they are dropped like over-long pairs
    keep = [i for i in range(len(train)) if train.src[i] and train.tgt[i]]
    kept = EncodedSplit(
        [train.src[i] for i in keep],
        [train.tgt[i] for i in keep],
        [train.src_text[i] for i in keep],
        [train.tgt_text[i] for i in keep],
    )
    if not keep:
        raise CsanError(f"{train_files}: no line pair with text on both sides to train on")
    src_len, tgt_len = kept.lengths()
    try:
        sampler = TokenBatchSampler(
            src_len,
            tgt_len,
            max_tokens=tc.max_tokens,
            max_positions=max_len,
            shuffle=True,
            seed=tc.seed,
            num_shards=dist.world_size,
            shard_index=dist.rank,
            pad_to_multiple=pad_to_multiple,
        )
    except CsanError as e:  # e.g. every pair longer than data.max_len
        raise CsanError(f"{train_files}: {e} (data.max_len={dc.max_len})") from None
    n_dropped = len(train) - len(keep) + sampler.num_dropped
    log.info("training pairs: %d kept, %d dropped", len(keep) - sampler.num_dropped, n_dropped)
    return TrainingData(
        spm=corpus.spm,
        train=kept,
        valid=valid,
        tests=tests,
        sampler=sampler,
        pad_to_multiple=pad_to_multiple,
        bpe_dropout=dc.bpe_dropout,
        max_len=max_len,
        seed=tc.seed,
        n_train=len(keep) - sampler.num_dropped,
        n_dropped=n_dropped,
    )
