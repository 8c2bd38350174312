"""Typed config: presets, dotted overrides, YAML files with ``base:``, and the error messages."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from csan.attention.cnn import ConvThenAttention
from csan.config import Config, config_from_dict, dump_config, load_config, presets
from csan.errors import CsanError
from csan.models import check_model


@pytest.mark.parametrize("name", presets())
def test_every_preset_loads_and_round_trips_through_yaml(name: str, tmp_path: Path) -> None:
    cfg = load_config(name)
    assert isinstance(cfg, Config)
    assert cfg.model.d_model % cfg.model.heads == 0
    dumped = tmp_path / "dumped.yaml"
    dumped.write_text(dump_config(cfg), encoding="utf-8")
    assert load_config(str(dumped)) == cfg
    assert config_from_dict(cfg.to_dict()) == cfg


def test_presets_include_the_documented_ones() -> None:
    assert {"tiny", "multi30k-small"} <= set(presets())


def test_default_source_is_multi30k_small() -> None:
    assert load_config() == load_config("multi30k-small")


def test_the_main_job_trains_small_batches_with_two_convolutions_in_two_encoder_layers() -> None:
    """multi30k-small (2026-11-29): 1,024 target tokens a batch and cnn@0-1 with two sublayers; the
    presets whose kept tables were trained at 4,096 tokens with vanilla attention still say so."""
    main = load_config("multi30k-small")
    assert main.train.max_tokens == 1024
    assert main.model.encoder_attention == "cnn@0-1"
    assert main.model.attention_options == {"cnn": {"conv_layers": 2}}
    for name in ("compare-multi30k", "converged-multi30k", "converged-multi30k-fp32"):
        kept = load_config(name)
        assert kept.train.max_tokens == 4096, name
        assert kept.model.encoder_attention == "vanilla", name
        # their CNN rows: the default two sublayers, as the kept tables were trained
        cnn_row = load_config(name, ["model.encoder_attention=cnn@0-1"])
        assert cnn_row.model.attention_options == {}, name
    assert len(ConvThenAttention(d_model=8, heads=2).convs) == 2
    convs2s = load_config("convs2s-multi30k")
    assert (convs2s.model.arch, convs2s.train.max_tokens) == ("convs2s", 4096)
    assert (convs2s.model.encoder_attention, convs2s.model.attention_options) == ("vanilla", {})


def test_the_presets_options_for_a_variant_no_layer_uses_give_way_but_the_users_do_not(
    tmp_path: Path,
) -> None:
    """Another attention on the main preset drops the preset's cnn options; options the user gives
    for a variant that no layer uses are still refused, from --set or from the user's own file."""
    for spec in ("vanilla", "csan1d", "csan2d@0"):
        cfg = load_config("multi30k-small", [f"model.encoder_attention={spec}"])
        assert cfg.model.attention_options == {}
        check_model(cfg.model)
    kept = load_config("multi30k-small", ["model.encoder_attention=cnn@0"])
    assert kept.model.attention_options == {"cnn": {"conv_layers": 2}}
    mine = ["model.encoder_attention=vanilla", "model.attention_options.cnn.kernel=5"]
    with pytest.raises(CsanError, match=r"model\.attention_options\.cnn: no layer uses cnn"):
        check_model(load_config("multi30k-small", mine).model)
    own = tmp_path / "own.yaml"
    own.write_text(
        "base: multi30k-small\nmodel:\n  encoder_attention: vanilla\n"
        "  attention_options:\n    cnn:\n      kernel: 5\n",
        encoding="utf-8",
    )
    with pytest.raises(CsanError, match="no layer uses cnn"):
        check_model(load_config(str(own)).model)
    own.write_text("base: multi30k-small\nmodel:\n  encoder_attention: csan1d\n", encoding="utf-8")
    assert load_config(str(own)).model.attention_options == {}
    # a null drops an inherited mapping, in a file as with --set
    dropped = load_config("multi30k-small", ["model.attention_options.cnn=null"])
    assert dropped.model.attention_options == {}


def test_overrides_set_dotted_keys_with_yaml_typed_values() -> None:
    cfg = load_config(
        "tiny",
        [
            "train.lr=5e-4",
            "model.d_model=128",
            "model.pre_norm=false",
            "model.encoder_attention=csan2d",
            "model.attention_options.csan2d.window=7",
            "model.attention_options.csan2d.head_window=3",
            "train.adam_betas=[0.9, 0.997]",
            "data.data_dir=/some/where",
        ],
    )
    assert cfg.train.lr == 5e-4 and isinstance(cfg.train.lr, float)
    assert cfg.model.d_model == 128 and isinstance(cfg.model.d_model, int)
    assert cfg.model.pre_norm is False
    assert cfg.model.encoder_attention == "csan2d"
    assert cfg.model.attention_options == {"csan2d": {"window": 7, "head_window": 3}}
    assert cfg.train.adam_betas == (0.9, 0.997)
    assert cfg.data.data_dir == "/some/where"
    # untouched fields keep the preset's values
    assert cfg.model.heads == load_config("tiny").model.heads


def test_exponent_notation_without_dot_is_a_float(tmp_path: Path) -> None:
    # YAML 1.1 reads "5e-4" as a string; the CLI help shows exactly this form
    assert load_config("tiny", ["train.lr=5e-4"]).train.lr == 5e-4
    path = tmp_path / "exp.yaml"
    path.write_text("base: tiny\ntrain:\n  lr: 3e-4\n  adam_eps: 1e-8\n", encoding="utf-8")
    cfg = load_config(str(path))
    assert (cfg.train.lr, cfg.train.adam_eps) == (3e-4, 1e-8)


def test_later_override_wins_and_null_resets_optional() -> None:
    cfg = load_config("tiny", ["train.lr=1", "train.lr=2", "data.data_dir=x", "data.data_dir=null"])
    assert cfg.train.lr == 2.0
    assert cfg.data.data_dir is None


def test_int_accepted_for_float_and_integral_float_for_int() -> None:
    cfg = load_config("tiny", ["train.lr=1", "model.d_model=64.0"])
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)
    assert cfg.model.d_model == 64 and isinstance(cfg.model.d_model, int)


@pytest.mark.parametrize(
    ("override", "named", "suggestion"),
    [
        ("train.lrr=1", "train.lrr", "train.lr"),
        ("model.d_modle=8", "model.d_modle", "model.d_model"),
        ("modle.d_model=8", "modle", "model"),
        ("model.convs2s.kernal=3", "model.convs2s.kernal", "model.convs2s.kernel"),
    ],
)
def test_unknown_key_is_named_with_a_suggestion(override: str, named: str, suggestion: str) -> None:
    with pytest.raises(CsanError) as info:
        load_config("tiny", [override])
    message = str(info.value)
    assert repr(named) in message
    assert f"did you mean {suggestion}?" in message


def test_unknown_key_without_close_match_still_named() -> None:
    with pytest.raises(CsanError, match=r"unknown config key 'train\.zzzzzz'"):
        load_config("tiny", ["train.zzzzzz=1"])


@pytest.mark.parametrize(
    ("override", "key", "expected"),
    [
        ("train.lr=abc", "train.lr", "float"),
        ("model.d_model=1.5", "model.d_model", "int"),
        ("model.d_model=abc", "model.d_model", "int"),
        ("model.pre_norm=3", "model.pre_norm", "bool"),
        ("train.adam_betas=[0.9]", "train.adam_betas", "tuple"),
        ("train.adam_betas=[0.9, x]", "train.adam_betas[1]", "float"),
        ("train.max_steps=true", "train.max_steps", "int"),
        ("model.attention_options=3", "model.attention_options", "dict"),
    ],
)
def test_wrong_type_names_the_key_and_the_type(override: str, key: str, expected: str) -> None:
    with pytest.raises(CsanError) as info:
        load_config("tiny", [override])
    message = str(info.value)
    assert message.startswith(f"{key}: expected"), message
    assert expected in message
    assert "\n" not in message


def test_section_given_a_scalar_is_an_error() -> None:
    with pytest.raises(CsanError, match=r"^model: expected a mapping"):
        load_config("tiny", ["model=3"])


def test_override_without_equals_sign() -> None:
    with pytest.raises(CsanError, match=r"expected key=value"):
        load_config("tiny", ["train.lr"])


def test_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(CsanError) as info:
        load_config("no-such-preset")
    assert "no-such-preset" in str(info.value)
    assert "tiny" in str(info.value)


def test_missing_yaml_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(CsanError, match=r"absent\.yaml"):
        load_config(str(path))


def test_yaml_file_with_base_inherits_and_overrides(tmp_path: Path) -> None:
    child = tmp_path / "child.yaml"
    child.write_text(
        "base: tiny\nmodel:\n  heads: 2\n  attention_options:\n    csan1d: {window: 5}\n"
        "train:\n  lr: 0.0007\n",
        encoding="utf-8",
    )
    grandchild = tmp_path / "grandchild.yaml"
    grandchild.write_text(
        f"base: {child}\nmodel:\n  attention_options:\n    csan1d: {{backend: dense}}\n",
        encoding="utf-8",
    )
    tiny = load_config("tiny")
    cfg = load_config(str(grandchild), ["train.warmup=7"])
    assert cfg.model.heads == 2
    assert cfg.model.d_model == tiny.model.d_model  # inherited from the preset
    assert cfg.train.lr == 0.0007
    assert cfg.train.warmup == 7
    # nested mappings merge key by key, attention options per variant included
    assert cfg.model.attention_options == {"csan1d": {"window": 5, "backend": "dense"}}


def test_base_loop_is_an_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"base: {b}\n", encoding="utf-8")
    b.write_text(f"base: {a}\n", encoding="utf-8")
    with pytest.raises(CsanError, match="loops"):
        load_config(str(a))


def test_unknown_key_in_yaml_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad-key.yaml"
    path.write_text("base: tiny\ntrain:\n  warmpu: 10\n", encoding="utf-8")
    with pytest.raises(CsanError, match=r"'train\.warmpu' \(did you mean train\.warmup\?\)"):
        load_config(str(path))


@pytest.mark.parametrize(
    "text",
    [
        "model:\n  d_model: [1, 2\n",  # unclosed flow sequence
        "model:\n\td_model: 3\n",  # tab indentation
        "a: b: c\n",
    ],
)
def test_bad_yaml_is_one_line_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CsanError) as info:
        load_config(str(path))
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "not valid YAML" in message
    assert "\n" not in message


def test_yaml_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(CsanError, match=r"list\.yaml: expected a mapping"):
        load_config(str(path))


def test_none_means_none_and_an_old_zero_still_works_with_a_warning() -> None:
    cfg = load_config("tiny", ["train.max_minutes=null", "train.threads=null"])
    assert cfg.train.max_minutes is None and cfg.train.threads is None
    with pytest.warns(FutureWarning, match=r"train\.validate_every=0 is read as null"):
        old = load_config("tiny", ["train.validate_every=0"])
    assert old.train.validate_every is None
    with pytest.warns(FutureWarning, match=r"train\.average_last=0 is read as 1"):
        assert load_config("tiny", ["train.average_last=0"]).train.average_last == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a config saved by an older csan is read quietly
        saved = config_from_dict({"train": {"max_steps": 0, "checkpoint_minutes": 0}})
    assert saved.train.max_steps is None and saved.train.checkpoint_minutes is None


def test_a_files_base_is_found_next_to_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "other.yaml").write_text("base: tiny\nmodel:\n  d_model: 32\n")
    (tmp_path / "conf" / "mine.yaml").write_text("base: other.yaml\ntrain:\n  lr: 0.002\n")
    decoy = tmp_path / "elsewhere"
    decoy.mkdir()
    (decoy / "other.yaml").write_text("base: multi30k-small\n")  # the wrong base, if cwd decided
    monkeypatch.chdir(decoy)
    cfg = load_config(str(tmp_path / "conf" / "mine.yaml"))
    assert (cfg.model.d_model, cfg.train.lr) == (32, 0.002)
