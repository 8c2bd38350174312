"""``csan bench variants``: the rows of a compare table trained side by side, update by update."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from csan.bench.nmt import main
from csan.bench.variants import compiled_side_by_side, run_variant_bench
from csan.errors import CsanError

EAGER = ["train.compile=false", "train.cpu_bf16=false"]


def test_rows_share_batches_and_report_relative_speed(small_overrides: list[str]) -> None:
    rows = run_variant_bench(
        "tiny",
        variants=["vanilla", "csan1d", "rel_pos"],
        steps=3,
        warmup=1,
        overrides=[*small_overrides, *EAGER],
    )
    assert [r["variant"] for r in rows] == ["vanilla", "csan1d", "rel_pos"]
    assert rows[0]["relative_speed"] == 1.0
    assert all(r["steps"] == 3 for r in rows)
    assert rows[1]["added_params"] == 0  # csan1d reuses the vanilla projections
    assert rows[2]["added_params"] > 0  # rel_pos: its relative embeddings
    for r in rows:
        assert 0 < r["q1_step_ms"] <= r["median_step_ms"] <= r["q3_step_ms"]
        assert r["steps_per_s"] == pytest.approx(1000 / r["median_step_ms"], rel=0.01)


def test_more_steps_than_one_epoch_go_round_the_corpus(
    small_overrides: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from csan.data.batching import TokenBatchSampler

    taken: list[int] = []
    real_take = TokenBatchSampler.take

    def spy(self: TokenBatchSampler, count: int, first_epoch: int = 1) -> list[list[int]]:
        taken.append(len(self))
        return real_take(self, count, first_epoch)

    monkeypatch.setattr(TokenBatchSampler, "take", spy)
    rows = run_variant_bench(
        "tiny",
        variants=["vanilla"],
        steps=3,
        warmup=0,
        overrides=[*small_overrides, *EAGER, "train.max_tokens=100000"],
    )
    assert taken and taken[0] < 3  # the corpus has fewer batches than the steps asked for
    assert rows[0]["steps"] == 3


def test_no_steps_is_a_clear_error(small_overrides: list[str]) -> None:
    with pytest.raises(CsanError, match="--steps must be >= 1"):
        run_variant_bench("tiny", variants=["vanilla"], steps=0, overrides=small_overrides)


def test_cli_writes_table_and_machine(small_overrides: list[str], tmp_path: Path) -> None:
    sets = [x for o in [*small_overrides, *EAGER] for x in ("--set", o)]
    argv = ["variants", "--config", "tiny", "--variants", "vanilla,convs2s", "--steps", "2"]
    assert main([*argv, "--warmup", "0", *sets, "--out", str(tmp_path)]) == 0
    (md,) = tmp_path.glob("variants-tiny-cpu-*.md")
    payload = json.loads(md.with_suffix(".json").read_text())
    assert payload["config"] == "tiny" and "machine" in payload
    assert [r["variant"] for r in payload["rows"]] == ["vanilla", "convs2s"]
    assert payload["rows"][1]["params"] != payload["rows"][0]["params"]
    assert "| convs2s |" in md.read_text()


class _Outer(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def _compile_models(n: int) -> None:
    """Compile ``n`` models whose sublayer types differ (as the table's attention variants do): each
    takes an entry in the cache of the one shared ``forward``."""
    for i in range(n):
        inner = type(f"Linear{i}", (torch.nn.Linear,), {})(4, 4)
        torch.compile(_Outer(inner), backend="eager")(torch.ones(2, 4))


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    """An empty TorchDynamo cache before and after: the tests count its entries."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.usefixtures("fresh_dynamo")
def test_side_by_side_compilation_makes_room_for_every_model() -> None:
    with compiled_side_by_side(12):
        _compile_models(12)  # 12 > the default limit of 8: would run the last ones eager


@pytest.mark.usefixtures("fresh_dynamo")
def test_side_by_side_compilation_fails_loudly_past_the_limit() -> None:
    with (
        pytest.raises(CsanError, match="fell back to eager"),
        compiled_side_by_side(1),
    ):  # room for 8
        _compile_models(10)
