"""Conv Q/K/V projections train under torch.compile (regression: inductor failed to lower the convolutions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from csan.config import load_config


@pytest.mark.slow
def test_conv_qkv_model_trains_compiled(tmp_path: Path, tiny_overrides: list[str]) -> None:
    from csan.training.trainer import train

    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            "model.encoder_attention=conv_qkv",
            "model.decoder_attention=conv_qkv",
            "model.cross_attention=conv_qkv",
            "train.compile=true",
            "train.cpu_bf16=auto",
            "train.max_steps=4",
            "train.validate_every=1000",
        ],
    )
    result = train(cfg, tmp_path / "run", progress=False)
    assert result.steps == 4
