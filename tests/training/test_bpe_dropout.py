"""BPE-dropout (``data.bpe_dropout``): training batches cut afresh into subwords, reproducibly, the
text unchanged; validation and the settings' range untouched. (Exact resume with it on is in
test_training.py.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from csan.config import load_config
from csan.config.checks import check_data_config
from csan.data import TokenBatchSampler
from csan.errors import CsanError
from csan.training.data import TrainingData, load_training_data
from csan.training.trainer import train


@pytest.fixture(scope="module")
def data(tiny_overrides: list[str]) -> TrainingData:
    cfg = load_config("tiny", [*tiny_overrides, "data.train_subset=300", "data.bpe_dropout=0.1"])
    return load_training_data(cfg)


def texts(data: TrainingData, tensor: torch.Tensor) -> list[str]:
    return data.spm.decode(tensor.tolist())


def fresh(data: TrainingData, **changes: object) -> TrainingData:
    """A copy without the cached cut (dataclasses.replace copies the private fields too)."""
    return dataclasses.replace(data, _epoch=None, **changes)


def test_each_epoch_cuts_the_pairs_afresh_and_reproducibly(data: TrainingData) -> None:
    data = fresh(data)
    indices = data.epoch_batches(1)[0]
    usual = data.batch(indices)  # no epoch: the cached ids
    assert [len(data.train.tgt[i]) + 1 for i in indices] == usual.tgt_out.ne(0).sum(1).tolist()

    one = data.batch(indices, epoch=1)
    two = data.batch(indices, epoch=2)
    again = data.batch(indices, epoch=1)  # cut again after epoch 2's: the same ids
    for field in ("src", "tgt_in", "tgt_out"):
        assert torch.equal(getattr(one, field), getattr(again, field))
    assert not torch.equal(one.tgt_out, two.tgt_out)
    assert fresh(data).batch(indices, epoch=1).src.tolist() == one.src.tolist()
    # merges were dropped: more pieces, on both sides, for the same sentences and the same text
    assert one.src_tokens > usual.src_tokens and one.tgt_tokens > usual.tgt_tokens
    assert one.indices == usual.indices == indices
    assert texts(data, one.src) == texts(data, usual.src)
    assert texts(data, one.tgt_out) == texts(data, usual.tgt_out)


def test_an_epochs_batches_are_cut_by_its_own_lengths(data: TrainingData) -> None:
    data = fresh(data)
    budget = data.sampler.max_tokens
    batches = data.epoch_batches(3)
    kept = sorted(i for b in data.sampler.batches(1) for i in b)  # within max_len as usually cut
    assert sorted(i for b in batches for i in b) == kept
    for indices in batches:
        b = data.batch(indices, epoch=3)
        width = max(b.src.shape[1], b.tgt_out.shape[1])
        assert len(indices) == 1 or len(indices) * width <= budget
    # longer pieces, the same token budget: more batches than the usual segmentation gives
    assert len(batches) > len(data.sampler)
    assert data.batches_per_epoch == len(data.epoch_batches(1))


def test_every_process_cuts_the_same_way_and_takes_its_share(data: TrainingData) -> None:
    shards = [
        fresh(
            data,
            sampler=TokenBatchSampler(
                *data.train.lengths(),
                max_tokens=data.sampler.max_tokens,
                max_positions=data.max_len,
                seed=data.seed,
                num_shards=2,
                shard_index=rank,
            ),
        )
        for rank in (0, 1)
    ]
    a, b = (s.epoch_batches(2) for s in shards)
    assert len(a) == len(b)
    assert {i for batch in a + b for i in batch} == {i for b in data.sampler.batches(1) for i in b}
    assert (
        shards[0].batch(a[0], epoch=2).src.tolist() == fresh(data).batch(a[0], epoch=2).src.tolist()
    )


def test_a_sampled_side_longer_than_max_len_keeps_its_usual_ids(data: TrainingData) -> None:
    kept = sorted(i for b in data.sampler.batches(1) for i in b)
    longest = max(len(data.train.src[i]) for i in kept)
    tight = fresh(data, max_len=longest + 1)  # the longest usual source just fits
    loose = fresh(data, max_len=10_000)
    assert loose.batch(kept, epoch=1).src.shape[1] > longest + 1  # sampled, some are longer
    cut = tight.batch(kept, epoch=1)
    assert cut.src.shape[1] == longest + 1
    rows = [r for r, i in enumerate(kept) if len(data.train.src[i]) == longest]
    assert rows and all(cut.src[r, :longest].tolist() == data.train.src[kept[r]] for r in rows)
    assert texts(tight, cut.src) == texts(tight, data.batch(kept).src)


def test_training_with_bpe_dropout_sees_other_batches(
    tmp_path: Path, tiny_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    def first_losses(rate: float) -> list[float]:
        run = tmp_path / f"run-{rate}"
        cfg = load_config(
            "tiny",
            [
                *tiny_overrides,
                "data.train_subset=300",
                f"data.bpe_dropout={rate}",
                "train.max_tokens=512",
                "train.max_steps=3",
                "train.log_every=1",
                "train.validate_every=null",
            ],
        )
        train(cfg, run, progress=False)
        lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        return [r["loss"] for r in lines if r["kind"] == "train"]

    usual, dropped = first_losses(0.0), first_losses(0.1)
    assert len(usual) == len(dropped) == 3
    assert usual != dropped
    assert "BPE-dropout 0.1" in capsys.readouterr().out


@pytest.mark.parametrize("rate", [-0.1, 1.0, float("nan")])
def test_a_bpe_dropout_outside_0_1_is_refused(rate: float) -> None:
    cfg = load_config("tiny", [f"data.bpe_dropout={rate}"])
    with pytest.raises(CsanError, match=r"data\.bpe_dropout=.*must be in \[0, 1\)"):
        check_data_config(cfg.data)
