"""The named variants: the paper's placement, the groups, and every named variant builds a model."""

from __future__ import annotations

import pytest

from csan.config import load_config
from csan.errors import CsanError
from csan.experiments.variants import (
    ARCHS,
    GROUPS,
    TABLE1,
    lower_half,
    resolve_variants,
    variant_names,
)
from csan.models import build_model
from csan.models.layout import layer_variants


@pytest.mark.parametrize(("layers", "spec"), [(6, "0-2"), (3, "0-1"), (2, "0"), (1, "0")])
def test_lower_half_of_the_encoder(layers: int, spec: str) -> None:
    assert lower_half(load_config("tiny", [f"model.encoder_layers={layers}"])) == spec


def test_table1_rows_in_the_papers_order_and_placement() -> None:
    cfg = load_config("tiny", ["model.encoder_layers=6"])
    rows = resolve_variants(["table1"], cfg)
    assert [v.name for v in rows] == list(TABLE1) and len(rows) == 10
    assert rows[0].overrides == ("model.encoder_attention=vanilla",)
    assert rows[-1].overrides == ("model.encoder_attention=csan2d@0-2",)


def test_groups_raw_placements_and_duplicates() -> None:
    cfg = load_config("tiny")
    rows = resolve_variants(["vanilla", "context", "csan2d@1", "vanilla"], cfg)
    names = [v.name for v in rows]
    assert names[0] == "vanilla" and names.count("vanilla") == 1
    assert len(names) == 1 + 12 + 1 and names[-1] == "csan2d@1"
    assert rows[-1].overrides == ("model.encoder_attention=csan2d@1",)
    both = {v.name: v for v in rows}["context-deep_global+deep-both"].overrides
    assert "model.attention_options.context.context=deep_global+deep" in both
    assert {"model.encoder_attention=context", "model.decoder_attention=context"} <= set(both)


def test_unknown_variant_names_the_choices() -> None:
    with pytest.raises(CsanError, match=r"variant 'csan 2d': not a named variant .*table1"):
        resolve_variants(["csan 2d"], load_config("tiny"))
    with pytest.raises(CsanError, match="no variants given"):
        resolve_variants([" "], load_config("tiny"))


@pytest.mark.parametrize("name", variant_names())
def test_every_named_variant_builds(name: str) -> None:
    (variant,) = resolve_variants([name], load_config("tiny"))
    cfg = load_config("tiny", list(variant.overrides))
    model = build_model(cfg.model, 100)
    if name in ARCHS:
        assert type(model).__name__ == "ConvS2S"
        return
    encoder = layer_variants(cfg.model.encoder_attention, cfg.model.encoder_layers)
    built = [layer.self_attn.name for layer in model.encoder_layers]
    assert built == encoder
    if name in TABLE1 and name != "vanilla":
        assert built == [TABLE1[name][0], "vanilla"]  # lower half of 2 layers


def test_groups_only_name_known_variants() -> None:
    assert set().union(*GROUPS.values()) <= set(variant_names())
