"""A config's ``float32`` section: settings a run takes only where its products are float32.

The main preset trains the plain Transformer in float32 and its convolutions under bf16 autocast
(the capability faked both ways); the section is checked when the config is read, the user's own
settings win over a preset's section, a run saves what it settled, and a resumed run keeps the
model its checkpoints were trained with on any machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from csan.config import apply_float32, config_from_dict, dump_config, load_config
from csan.decoding import load_model
from csan.errors import CsanError
from csan.experiments.grid import config_difference
from csan.machine import Machine, choose_runtime
from csan.training.prepare import settle_float32
from csan.training.trainer import train

NATIVE = Machine("AMD EPYC (Zen 4)", "AVX512", True, 2, 2)
AVX2 = Machine("AMD EPYC (Zen 3)", "AVX2", False, 2, 2)


def runtime(machine: Machine, cpu_bf16: object = "auto"):
    return choose_runtime(cpu_bf16, "auto", machine=machine, warn=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("machine", "cpu_bf16", "encoder", "options"),
    [
        (AVX2, "auto", "vanilla", {}),  # float32: the plain Transformer
        (NATIVE, "auto", "cnn@0-1", {"cnn": {"conv_layers": 2}}),  # bf16: the convolutions
        (NATIVE, False, "vanilla", {}),  # float32 asked for on a native-bf16 CPU
    ],
)
def test_the_main_preset_trains_its_convolutions_only_under_bf16(
    machine: Machine, cpu_bf16: object, encoder: str, options: dict
) -> None:
    cfg = load_config("multi30k-small")
    settled, why = settle_float32(cfg, runtime(machine, cpu_bf16))
    assert settled.model.encoder_attention == encoder
    assert settled.model.attention_options == options
    assert settled.float32 == {}
    assert why is not None and ("model.encoder_attention=vanilla" in why) == (encoder == "vanilla")
    assert cfg.model.encoder_attention == "cnn@0-1"  # the caller's config is left as it was


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("float32.model.d_modle=64", "unknown config key 'float32.model.d_modle'"),
        ("float32.model.ffn_dim=wide", "float32.model.ffn_dim: expected int"),
        ("float32.train.cpu_bf16=true", "float32.train.cpu_bf16: it decides whether"),
        ("float32.train.device=cpu", "float32.train.device: it decides whether"),
        ("float32.float32.model.ffn_dim=64", "float32.float32: the float32 section cannot"),
    ],
)
def test_a_bad_float32_section_is_refused_when_read(override: str, message: str) -> None:
    with pytest.raises(CsanError, match=message):
        load_config("tiny", [override])


def test_a_float32_model_that_cannot_be_built_is_refused_before_any_work(tmp_path: Path) -> None:
    cfg = load_config("tiny", ["float32.model.heads=3"])  # d_model 64
    with pytest.raises(CsanError, match="divisible by heads"):
        train(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_the_users_own_settings_win_over_a_presets_section(tmp_path: Path) -> None:
    # --set of the same key: that value on every machine
    cfg = load_config("multi30k-small", ["model.encoder_attention=csan1d"])
    assert cfg.float32 == {}
    assert apply_float32(cfg).model.encoder_attention == "csan1d"
    # ... unless the user sets the float32 one as well
    cfg = load_config(
        "multi30k-small",
        ["model.encoder_attention=csan1d", "float32.model.encoder_attention=csan2d"],
    )
    assert apply_float32(cfg).model.encoder_attention == "csan2d"
    # a file of the user's own, on the preset: the same
    mine = tmp_path / "mine.yaml"
    mine.write_text("base: multi30k-small\nmodel:\n  encoder_attention: cnn@0-2\n")
    cfg = load_config(str(mine))
    assert cfg.float32 == {} and apply_float32(cfg).model.encoder_attention == "cnn@0-2"
    # other keys leave the section as it is; null turns it off
    assert load_config("multi30k-small", ["train.lr=0.002"]).float32 == {
        "model": {"encoder_attention": "vanilla"}
    }
    assert load_config("multi30k-small", ["float32=null"]).float32 == {}


@pytest.mark.parametrize("preset", ["compare-multi30k", "converged-multi30k", "convs2s-multi30k"])
def test_the_experiment_presets_train_one_model_on_every_machine(preset: str) -> None:
    assert load_config(preset).float32 == {}


def test_a_float32_run_saves_its_settings_and_a_resumed_run_keeps_them_anywhere(
    tmp_path: Path, resumable_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = [*resumable_overrides, "float32.model.ffn_dim=64"]
    run = tmp_path / "run"
    # the tiny preset computes in float32 (train.cpu_bf16=false) on any CPU
    train(load_config("tiny", [*overrides, "train.max_steps=2"]), run, progress=False)
    out = capsys.readouterr().out
    assert "float32 settings: model.ffn_dim=64 (the products are float32)" in out
    saved = load_model(run).config
    assert saved.model.ffn_dim == 64 and saved.float32 == {}
    assert "float32: {}" in (run / "config.yaml").read_text()
    # resumed where the run would compute in bf16, it keeps the layers it was trained with
    cfg = load_config("tiny", [*overrides, "train.max_steps=4"])
    settled, why = settle_float32(cfg, runtime(NATIVE), run)
    assert settled.model.ffn_dim == 64 and "the run's checkpoints' own (model.ffn_dim=64)" in why
    assert settle_float32(cfg, runtime(NATIVE), tmp_path / "new")[0].model.ffn_dim == 128
    train(cfg, run, progress=False)  # resumes: the section is not a changed setting
    assert "step_00000004" in load_model(run).meta["made_from"]
    # an experiment grid reuses the finished run for the same config, not for another one
    assert config_difference(run, cfg) is None
    other = load_config("tiny", [*overrides, "train.max_steps=4", "float32.model.ffn_dim=32"])
    assert config_difference(run, other) == "model.ffn_dim: 64 != 128"


def test_a_saved_config_reads_back_with_its_section() -> None:
    cfg = load_config("multi30k-small")
    text = dump_config(cfg)
    assert "float32:\n  model:\n    encoder_attention: vanilla" in text
    assert config_from_dict(yaml.safe_load(text)) == cfg
