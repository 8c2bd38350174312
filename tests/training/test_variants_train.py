"""Every attention variant trains through the normal trainer with the ``tiny`` preset, without NaN."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import csan.attention
from csan.config import load_config
from csan.training.trainer import train

ENCODER_ONLY = {"block", "cnn", "bi_direct", "neighbor", "local_hard", "local_soft"}


def placements(name: str) -> list[str]:
    """Encoder everywhere; the decoder too (and cross-attention) where the variant can run causally."""
    sets = [f"model.encoder_attention={name}"]
    if name not in ENCODER_ONLY:
        sets.append(f"model.decoder_attention={name}")
    if name in csan.attention.available_cross():
        sets.append(f"model.cross_attention={name}")
    return sets


@pytest.mark.parametrize("name", csan.attention.available())
def test_variant_trains_without_nan(name: str, tmp_path: Path, tiny_overrides: list[str]) -> None:
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            *placements(name),
            "train.max_steps=6",
            "train.log_every=1",
            "train.validate_every=6",
            "data.train_subset=200",
            "data.valid_subset=20",
            "train.average_last=1",
        ],
    )
    result = train(cfg, tmp_path, progress=False)
    assert result.steps == 6
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert len(losses) == 6
    assert all(math.isfinite(x) for x in losses)
    valid = [r for r in records if r["kind"] == "valid"]
    assert valid and math.isfinite(valid[-1]["loss"])
