"""Typed configuration: one dataclass per component, presets, YAML files and dotted overrides.

A run's configuration is a :class:`Config` holding :class:`ModelConfig`, :class:`DataConfig`,
:class:`TrainConfig` and :class:`DecodeConfig`. It is built from a preset name or a YAML file, then
``key=value`` overrides with dotted keys (``train.lr=5e-4``, ``model.attention_options.csan2d.window=7``).
An unknown key or a value of the wrong type is a :class:`~csan.errors.CsanError` that names it.

Example:
    >>> cfg = load_config("tiny", ["train.lr=0.002", "model.encoder_attention=csan1d"])
    >>> cfg.train.lr, cfg.model.encoder_attention
    (0.002, 'csan1d')

- :mod:`csan.config.schema`: the dataclasses;
- :mod:`csan.config.loading`: presets, YAML, overrides, the checked build;
- :mod:`csan.config.checks`: ranges, and what may change on resume.
"""

from csan.config.checks import (
    RESUMABLE_KEYS,
    TRAIN_MINIMA,
    check_data_config,
    check_model_config,
    check_train_config,
    resume_difference,
)
from csan.config.loading import (
    LEGACY_ZERO,
    apply_float32,
    apply_overrides,
    config_from_dict,
    dump_config,
    flat_keys,
    load_config,
    nested_keys,
    presets,
)
from csan.config.schema import (
    Config,
    ConvS2SConfig,
    DataConfig,
    DecodeConfig,
    ModelConfig,
    TrainConfig,
)

__all__ = [
    "LEGACY_ZERO",
    "RESUMABLE_KEYS",
    "TRAIN_MINIMA",
    "Config",
    "ConvS2SConfig",
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "TrainConfig",
    "apply_float32",
    "apply_overrides",
    "check_data_config",
    "check_model_config",
    "check_train_config",
    "config_from_dict",
    "dump_config",
    "flat_keys",
    "load_config",
    "nested_keys",
    "presets",
    "resume_difference",
]
