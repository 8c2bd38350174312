"""`csan bench train`: three systems timed on the same batches, whatever the corpus's size."""

from __future__ import annotations

import pytest

from csan.bench.train import run_train_bench
from csan.errors import CsanError
from csan.toy import toy_corpus

_TOY = ["data.vocab_size=300", "train.compile=false"]


def test_a_corpus_of_fewer_batches_than_asked_goes_round_again(tmp_path, monkeypatch):
    monkeypatch.setenv("CSAN_CACHE", str(tmp_path / "cache"))
    d = toy_corpus(tmp_path / "toy", repeat=2)  # 6 pairs: one batch an epoch
    rows = run_train_bench("tiny", steps=3, warmup=2, overrides=[f"data.data_dir={d}", *_TOY])
    assert [r["steps"] for r in rows] == [3, 3, 3]
    assert all(r["median_step_ms"] > 0 and r["tokens_per_s"] > 0 for r in rows)
    torch_row = rows[-1]
    assert torch_row["system"] == "torch.nn.Transformer fp32"
    assert torch_row["relative_to_torch"] == 1.0
    # csan and the torch reference are the same architecture: parameter counts within 5%
    assert abs(rows[0]["params"] - torch_row["params"]) / torch_row["params"] < 0.05


@pytest.mark.parametrize(("steps", "warmup"), [(0, 1), (2, -1)])
def test_no_steps_to_time_is_a_clear_error(steps, warmup):
    with pytest.raises(CsanError, match="steps must be >= 1 and warmup >= 0"):
        run_train_bench("tiny", steps=steps, warmup=warmup)
