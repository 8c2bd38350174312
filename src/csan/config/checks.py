"""What training can work with: every setting's range, and what may change on resume."""

from __future__ import annotations

import math

from csan.config.loading import LEGACY_ZERO, flat_keys
from csan.config.schema import Config, DataConfig, ModelConfig, TrainConfig
from csan.errors import CsanError

__all__ = [
    "RESUMABLE_KEYS",
    "TRAIN_MINIMA",
    "check_data_config",
    "check_model_config",
    "check_train_config",
    "resume_difference",
]


# the least value of each training setting the loop can work with (None: the setting is off)
TRAIN_MINIMA = {
    "max_tokens": 1,
    "update_freq": 1,
    "log_every": 1,
    "max_bad_steps": 1,
    "keep_last": 1,
    "average_last": 1,
    "max_steps": 1,
    "max_epochs": 1,
    "max_minutes": 1e-9,
    "validate_every": 1,
    "checkpoint_every": 1,
    "checkpoint_minutes": 1e-9,
    "threads": 1,
    "warmup": 0,
    "clip_norm": 1e-9,
}


def check_train_config(tc: TrainConfig) -> None:
    """A CsanError naming the first ``train.*`` setting the loop cannot work with.

    Example:
        >>> check_train_config(TrainConfig(max_steps=1000))  # fine: no error
        >>> check_train_config(TrainConfig(label_smoothing=1.0))
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: train.label_smoothing=1.0: must be in [0, 1)
    """
    for key, least in TRAIN_MINIMA.items():
        value = getattr(tc, key)
        if value is not None and not value >= least:  # also catches NaN
            limit = f"at least {least}" if least >= 1 or least == 0 else "more than 0"
            nullable = " (or null)" if f"train.{key}" in LEGACY_ZERO else ""
            raise CsanError(f"train.{key}={value}: must be {limit}{nullable}")
    if not (tc.lr > 0 and math.isfinite(tc.lr)):
        raise CsanError(f"train.lr={tc.lr}: must be a positive number")
    b1, b2 = tc.adam_betas
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise CsanError(f"train.adam_betas={[b1, b2]}: each must be in [0, 1)")
    for key, value in (("adam_eps", tc.adam_eps), ("weight_decay", tc.weight_decay)):
        if not (value >= 0 and math.isfinite(value)) or (key == "adam_eps" and value == 0):
            raise CsanError(
                f"train.{key}={value}: must be a {'positive' if key == 'adam_eps' else 'non-negative'} number"
            )
    for key in ("label_smoothing", "warmup_fraction", "cooldown_fraction"):
        value = getattr(tc, key)
        if not 0 <= value < 1:
            raise CsanError(f"train.{key}={value}: must be in [0, 1)")
    if tc.warmup_fraction + tc.cooldown_fraction > 1:
        raise CsanError(
            f"train.warmup_fraction + train.cooldown_fraction = "
            f"{tc.warmup_fraction + tc.cooldown_fraction}: must be at most 1"
        )
    budgets = (tc.max_minutes, tc.max_steps, tc.max_epochs)
    if tc.schedule == "budget" and all(b is None for b in budgets):
        raise CsanError(
            "train.schedule=budget: needs a budget to spread over "
            "(train.max_minutes, train.max_steps or train.max_epochs)"
        )


def check_data_config(dc: DataConfig) -> None:
    """A CsanError naming the first ``data.*`` setting training cannot work with.

    Example:
        >>> check_data_config(DataConfig(src_lang="de", tgt_lang="en"))  # fine: no error
        >>> check_data_config(DataConfig(train_subset=0))
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: data.train_subset=0: must be at least 1 (or null: all pairs)
    """
    if dc.src_lang == dc.tgt_lang and not dc.same_language:
        raise CsanError(
            f"data.src_lang = data.tgt_lang = {dc.src_lang!r}: a translation needs two languages "
            "(set data.same_language=true to train on one)"
        )
    for name in ("train_subset", "valid_subset"):
        value = getattr(dc, name)
        if value is not None and value < 1:
            raise CsanError(f"data.{name}={value}: must be at least 1 (or null: all pairs)")
    if not 0 <= dc.bpe_dropout < 1:
        raise CsanError(f"data.bpe_dropout={dc.bpe_dropout}: must be in [0, 1)")


# What may change when a run is resumed: limits, intervals, bookkeeping, the precision and the
# device, the optimizer's settings (applied to the restored optimizer), and decoding. Everything
# else (the model, the data and its vocabulary, the seed, the batch size) makes another run.
RESUMABLE_KEYS = frozenset(
    {
        *(
            f"train.{key}"
            for key in (
                "max_steps", "max_epochs", "max_minutes", "validate_every", "valid_bleu",
                "checkpoint_every", "checkpoint_minutes", "keep_last", "average_last", "log_every",
                "threads", "bf16", "cpu_bf16", "compile", "max_bad_steps", "evaluate_test",
                "device", "lr", "schedule", "warmup", "warmup_fraction", "cooldown_fraction",
                "adam_betas", "adam_eps", "weight_decay", "clip_norm", "label_smoothing",
            )
        ),
        "data.data_dir",
    }
)  # fmt: skip


def resume_difference(saved: Config, cfg: Config) -> str | None:
    """The first key, outside :data:`RESUMABLE_KEYS` and ``decode.*``, where ``cfg`` differs from
    the config a run was trained with, as ``key: saved -> new``; None when the run may resume.

    Example:
        >>> from csan.config import load_config
        >>> base = load_config("tiny")
        >>> resume_difference(base, load_config("tiny", ["train.max_steps=500"])) is None
        True
        >>> resume_difference(base, load_config("tiny", ["data.src_lang=de", "data.tgt_lang=en"]))
        "data.src_lang: 'en' -> 'de'"
    """
    old, new = flat_keys(saved.to_dict()), flat_keys(cfg.to_dict())
    for key in sorted(set(old) | set(new)):
        if key in RESUMABLE_KEYS or key.startswith("decode."):
            continue
        if old.get(key) != new.get(key):
            return f"{key}: {old.get(key)!r} -> {new.get(key)!r}"
    return None


def check_model_config(mc: ModelConfig) -> None:
    """A CsanError naming the first ``model.*`` setting no model can be built with (the variants'
    own options are checked when the model is built).

    Example:
        >>> check_model_config(ModelConfig(d_model=64, heads=4))  # fine: no error
        >>> check_model_config(ModelConfig(dropout=1.0))
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: model.dropout=1.0: must be in [0, 1)
    """
    for key in ("d_model", "heads", "ffn_dim", "encoder_layers", "decoder_layers"):
        value = getattr(mc, key)
        if value < 1:
            raise CsanError(f"model.{key}={value}: must be at least 1")
    if mc.max_positions < 2:
        raise CsanError(f"model.max_positions={mc.max_positions}: must be at least 2")
    for key in ("dropout", "attention_dropout", "activation_dropout"):
        value = getattr(mc, key)
        if not 0 <= value < 1:
            raise CsanError(f"model.{key}={value}: must be in [0, 1)")
    if mc.output_vocab not in ("full", "target", "auto"):
        raise CsanError(
            f"model.output_vocab={mc.output_vocab!r}: choose 'full', 'target' or 'auto'"
        )
    if mc.output_vocab == "target" and mc.arch != "transformer":
        raise CsanError(
            f"model.output_vocab='target': only the transformer has it (model.arch={mc.arch!r})"
        )
