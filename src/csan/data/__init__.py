"""The data layer: read and check parallel text, find datasets, subwords, batches.

Typical use by the trainer::

    folder = resolve_data_dir("multi30k", data_dir)           # --data-dir, $CSAN_DATA, or download
    pc = prepare_corpus(folder, src_lang="de", tgt_lang="en", splits=["train", "valid"],
                        vocab_size=8000, cache_dir=run_dir / "cache")
    train = pc.splits["train"]
    sampler = TokenBatchSampler(*train.lengths(), max_tokens=4096, max_positions=256)
    for indices in sampler:
        batch = collate([(train.src[i], train.tgt[i]) for i in indices], indices)

Example:
    >>> normalize("Zwei\\u00a0Hunde ")
    'Zwei Hunde'
"""

from csan.data.batching import Batch, TokenBatchSampler, collate, cut_batches
from csan.data.corpus import normalize, read_lines, read_parallel
from csan.data.datasets import (
    DATASETS,
    DatasetSpec,
    RemoteFile,
    default_cache_dir,
    file_sha256,
    get_dataset,
    resolve_data_dir,
    split_paths,
    verify_checksums,
)
from csan.data.prepared import EncodedSplit, PreparedCorpus, prepare_corpus
from csan.data.subwords import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordModel

__all__ = [
    "BOS_ID",
    "DATASETS",
    "EOS_ID",
    "PAD_ID",
    "UNK_ID",
    "Batch",
    "DatasetSpec",
    "EncodedSplit",
    "PreparedCorpus",
    "RemoteFile",
    "SubwordModel",
    "TokenBatchSampler",
    "collate",
    "cut_batches",
    "default_cache_dir",
    "file_sha256",
    "get_dataset",
    "normalize",
    "prepare_corpus",
    "read_lines",
    "read_parallel",
    "resolve_data_dir",
    "split_paths",
    "verify_checksums",
]
