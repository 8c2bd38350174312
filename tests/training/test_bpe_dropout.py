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
from csan.errors import CsanError
from csan.training.data import TrainingData, load_training_data
from csan.training.trainer import train


@pytest.fixture(scope="module")
def data(tiny_overrides: list[str]) -> TrainingData:
    cfg = load_config("tiny", [*tiny_overrides, "data.train_subset=300", "data.bpe_dropout=0.1"])
    return load_training_data(cfg)


def texts(data: TrainingData, tensor: torch.Tensor) -> list[str]:
    return data.spm.decode(tensor.tolist())


def test_a_seeded_batch_is_cut_afresh_and_reproducibly(data: TrainingData) -> None:
    indices = data.sampler.batches(1)[0]
    usual = data.batch(indices)  # no seed: the cached ids
    assert usual.src.tolist() == data.batch(indices, seed=None).src.tolist()
    assert [len(data.train.tgt[i]) + 1 for i in indices] == usual.tgt_out.ne(0).sum(1).tolist()

    a, again, other = (data.batch(indices, seed=s) for s in (5, 5, 6))
    for field in ("src", "tgt_in", "tgt_out"):
        assert torch.equal(getattr(a, field), getattr(again, field))
    assert not torch.equal(a.tgt_out, other.tgt_out)
    # merges were dropped: more pieces, on both sides, for the same sentences and the same text
    assert a.src_tokens > usual.src_tokens and a.tgt_tokens > usual.tgt_tokens
    assert a.indices == usual.indices == indices
    assert texts(data, a.src) == texts(data, usual.src)
    assert texts(data, a.tgt_out) == texts(data, usual.tgt_out)


def test_a_sampled_side_longer_than_max_len_keeps_its_usual_ids(data: TrainingData) -> None:
    indices = data.sampler.batches(1)[0]
    usual = data.batch(indices)
    longest = max(len(data.train.src[i]) for i in indices)
    tight = dataclasses.replace(data, max_len=longest + 1)  # only the usual ids fit
    cut = tight.batch(indices, seed=5)
    assert cut.src.shape[1] == longest + 1
    loose = data.batch(indices, seed=5)
    assert loose.src.shape[1] > longest + 1  # without the limit some source got longer
    rows = [r for r, i in enumerate(indices) if len(data.train.src[i]) == longest]
    assert all(cut.src[r].tolist() == usual.src[r].tolist() for r in rows)
    assert texts(tight, cut.src) == texts(tight, usual.src)


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
