"""Typed configuration: one dataclass per component, presets, YAML files and dotted overrides.

A run's configuration is a :class:`Config` holding :class:`ModelConfig`, :class:`DataConfig`,
:class:`TrainConfig` and :class:`DecodeConfig`. It is built from a preset name or a YAML file, then
``key=value`` overrides with dotted keys (``train.lr=5e-4``, ``model.attention_options.csan2d.window=7``).
An unknown key or a value of the wrong type is a :class:`~csan.errors.CsanError` that names it.

Example:
    >>> cfg = load_config("tiny", ["train.lr=0.002", "model.encoder_attention=csan1d"])
    >>> cfg.train.lr, cfg.model.encoder_attention
    (0.002, 'csan1d')
"""

from __future__ import annotations

import difflib
import math
import types
import typing
import warnings
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from csan.errors import CsanError

__all__ = [
    "RESUMABLE_KEYS",
    "Config",
    "ConvS2SConfig",
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "TrainConfig",
    "apply_overrides",
    "check_data_config",
    "check_model_config",
    "check_train_config",
    "config_from_dict",
    "flat_keys",
    "load_config",
    "presets",
    "resume_difference",
]


@dataclass
class ConvS2SConfig:
    """ConvS2S (Gehring et al. 2017) sizes; used when ``model.arch`` is ``convs2s``."""

    embed_dim: int = 256  # token and position embedding size
    channels: int = 256  # convolution channels (hidden size of the blocks)
    encoder_layers: int = 6  # encoder convolution blocks
    decoder_layers: int = 6  # decoder convolution blocks
    kernel: int = 3  # convolution width (odd in the encoder; causal in the decoder)


@dataclass
class ModelConfig:
    """The translation model. Attention variants are registry names (``csan attention list``)."""

    arch: str = "transformer"  # "transformer" or "convs2s"
    d_model: int = 256  # hidden size
    heads: int = 4  # attention heads
    ffn_dim: int = 1024  # feed-forward inner size
    encoder_layers: int = 3  # Transformer encoder layers
    decoder_layers: int = 3  # Transformer decoder layers
    dropout: float = 0.3  # dropout on embeddings, sublayer outputs
    attention_dropout: float = 0.0  # dropout on attention weights
    activation_dropout: float = 0.0  # dropout inside the feed-forward block
    pre_norm: bool = True  # layer norm before each sublayer (False: after, as in the paper)
    share_embeddings: bool = True  # tie source, target and output embeddings (joint vocabulary)
    max_positions: int = 256  # longest sequence (subword tokens + EOS) the model accepts
    # Per-layer self-attention: one name for every layer, a comma list (one per layer), or
    # "name@0-2" (those layers, the others vanilla). See csan.attention.available().
    encoder_attention: str = "vanilla"
    decoder_attention: str = "vanilla"
    cross_attention: str = "vanilla"  # encoder-decoder attention variant
    attention_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # per variant name
    convs2s: ConvS2SConfig = field(default_factory=ConvS2SConfig)


@dataclass
class DataConfig:
    """Where the parallel text comes from and how it is cut into subwords."""

    dataset: str = "multi30k"  # registry name (csan.data.datasets)
    data_dir: str | None = None  # folder with <split>.<lang> files; default $CSAN_DATA/<dataset>
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_split: str = "train"
    valid_split: str = "valid"
    test_split: str = "test2016"
    vocab_size: int = 8000  # joint SentencePiece BPE vocabulary
    max_len: int = 128  # training pairs with a side longer than this (subwords + EOS) are dropped
    train_subset: int | None = None  # use only the first N training pairs (None: all)
    valid_subset: int | None = None  # use only the first N validation pairs (None: all)
    same_language: bool = False  # allow src_lang == tgt_lang (paraphrase, denoising); else refused


@dataclass
class TrainConfig:
    """The training recipe (label-smoothed cross-entropy, Adam, inverse-sqrt warmup)."""

    seed: int = 1
    max_tokens: int = 4096  # target tokens per batch and process
    update_freq: int = 1  # gradient accumulation: batches per optimizer step
    lr: float = 1e-3  # peak learning rate ("inverse_sqrt", "budget")
    # "inverse_sqrt" (peak lr after `warmup` steps), "noam" (d_model^-0.5 ...), or "budget": warmup,
    # decay and cooldown as fractions of the run's budget (max_minutes, max_steps or max_epochs), so a
    # slow machine gets the whole schedule too (csan.training.schedule.budget_schedule)
    schedule: str = "inverse_sqrt"
    warmup: int = 1000  # warmup steps ("inverse_sqrt", "noam")
    warmup_fraction: float = 0.25  # "budget": warmup over this fraction of the budget
    cooldown_fraction: float = (
        0.2  # "budget": lr to 0 over the last fraction; averaged (average_last)
    )
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float | None = None  # gradient clipping by global norm (None: off)
    label_smoothing: float = 0.1
    max_epochs: int | None = None  # stop after this many epochs (None: no limit)
    max_steps: int | None = None  # stop after this many optimizer steps (None: no limit)
    max_minutes: float | None = None  # stop after this much wall time (None: no limit)
    validate_every: int | None = None  # validate every N steps (None: at the end of each epoch)
    valid_bleu: bool = True  # greedy-decode the validation set for BLEU at each validation
    checkpoint_every: int | None = None  # steps between checkpoints (None: at each validation)
    checkpoint_minutes: float | None = 10.0  # also checkpoint after this many minutes (None: off)
    keep_last: int = 5  # step checkpoints kept (the best is kept as well)
    # at the end, average the last N checkpoints into the final model (1: the last alone); with
    # schedule "budget", N checkpoints evenly spaced over the cooldown, and the validations' between
    average_last: int = 1
    log_every: int = 50  # steps between metric lines in metrics.jsonl
    threads: int | None = None  # torch intra-op threads (None: torch's default)
    bf16: bool = True  # bf16 autocast on CUDA (ignored on CPU: see cpu_bf16)
    # bf16 autocast on CPU: "auto" where the CPU computes bf16 natively (AVX512-BF16, AMX), float32
    # elsewhere (emulated bf16 is 40-60x slower); true/false to force (csan.machine.choose_runtime)
    cpu_bf16: bool | Literal["auto"] = "auto"
    compile: bool | Literal["auto"] = "auto"  # torch.compile: "auto" where it pays (see cpu_bf16)
    max_bad_steps: int = 5  # consecutive NaN/inf losses before training stops
    evaluate_test: bool = True  # translate and score the test split when training ends
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:1", ...


@dataclass
class DecodeConfig:
    """Decoding defaults (beam search with the GNMT length penalty)."""

    beam: int = 4
    lenpen: float = 0.6  # alpha in ((5 + |y|) / 6) ** alpha
    max_len_a: float = 1.2  # output length limit: a * source length + b
    max_len_b: int = 10
    max_tokens: int = 6000  # source tokens per decoding batch


@dataclass
class Config:
    """A whole run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (YAML/JSON friendly)."""
        d = asdict(self)
        d["train"]["adam_betas"] = list(d["train"]["adam_betas"])
        return d


def presets() -> list[str]:
    """Names of the built-in presets (YAML files shipped in ``csan/configs``).

    Example:
        >>> {"tiny", "multi30k-small", "compare-multi30k"} <= set(presets())
        True
    """
    root = resources.files("csan") / "configs"
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def _read_yaml(text: str, origin: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise CsanError(f"{origin}: not valid YAML: {str(e).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CsanError(f"{origin}: expected a mapping of sections, got {type(data).__name__}")
    return data


def _load_source(name_or_path: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The nested dict of a preset or YAML file, following ``base:`` (single inheritance)."""
    if name_or_path in seen:
        raise CsanError(f"config {name_or_path}: 'base' chain loops: {' -> '.join(seen)}")
    path = Path(name_or_path)
    if name_or_path in presets():
        text = (resources.files("csan") / "configs" / f"{name_or_path}.yaml").read_text("utf-8")
        origin = f"preset {name_or_path}"
    elif path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise CsanError(f"{path}: no such config file")
        text = path.read_text("utf-8")
        origin = str(path)
    else:
        raise CsanError(
            f"unknown preset {name_or_path!r}; presets: {', '.join(presets())} (or give a .yaml file)"
        )
    data = _read_yaml(text, origin)
    base = data.pop("base", None)
    if base is None:
        return data
    base = str(base)
    if (
        origin != f"preset {name_or_path}"
        and base not in presets()
        and not Path(base).is_absolute()
    ):
        base = str(path.parent / base)  # a file's base is next to that file, wherever csan runs
    return _merge(_load_source(base, (*seen, name_or_path)), data)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``b`` over ``a``, recursively for nested mappings."""
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)  # sections, and attention_options per variant
        else:
            out[key] = value
    return out


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check (and gently convert) ``value`` to the annotated type ``tp``; error names the key."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except CsanError:
                pass
        names = " or ".join(_type_name(a) for a in args if a is not type(None))
        raise CsanError(f"{key}: expected {names}, got {value!r} ({type(value).__name__})")
    if tp is Any:
        return value
    if origin is Literal:
        if isinstance(value, str) and value in typing.get_args(tp):
            return value
        choices = " or ".join(repr(a) for a in typing.get_args(tp))
        raise CsanError(f"{key}: expected {choices}, got {value!r}")
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            # YAML 1.1 reads "5e-4" (no dot) as a string; accept what Python reads as a float
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # e.g. conv kernel spec "3" written without quotes
    elif origin is tuple:
        args = typing.get_args(tp)
        if isinstance(value, (list, tuple)) and len(value) == len(args):
            return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    elif origin is dict and isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    raise CsanError(f"{key}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__})")


# Settings where 0 used to mean "none" ("no limit", "off", "each epoch", "torch's default"): they
# are None now; a 0 from an older config still means that, with a warning (1 for average_last).
LEGACY_ZERO = {
    "data.train_subset": None,
    "data.valid_subset": None,
    "train.clip_norm": None,
    "train.max_epochs": None,
    "train.max_steps": None,
    "train.max_minutes": None,
    "train.validate_every": None,
    "train.checkpoint_every": None,
    "train.checkpoint_minutes": None,
    "train.threads": None,
    "train.average_last": 1,
}


def _legacy_zero(key: str, value: Any, warn: bool) -> Any:
    if key in LEGACY_ZERO and value == 0 and not isinstance(value, bool):
        now = LEGACY_ZERO[key]
        if not warn:  # a config saved by an older csan: read it as it was meant, quietly
            return now
        warnings.warn(
            f"{key}=0 is read as {'null' if now is None else now} (its meaning before csan 0.2); "
            f"write {'null' if now is None else now}",
            FutureWarning,
            stacklevel=2,
        )
        return now
    return value


def _build(cls: type, data: dict[str, Any], prefix: str, warn: bool) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            raise CsanError(f"unknown config key {full!r}{hint}")
        tp = hints[key]
        if is_dataclass(tp):
            if not isinstance(value, dict):
                raise CsanError(f"{full}: expected a mapping, got {value!r}")
            kwargs[key] = _build(tp, value, f"{full}.", warn)
        else:
            kwargs[key] = _coerce(_legacy_zero(full, value, warn), tp, full)
    return cls(**kwargs)


def config_from_dict(data: dict[str, Any], *, warn_legacy: bool = False) -> Config:
    """Build a :class:`Config` from a nested dict, checking every key and type.

    A 0 where older versions meant "none" (:data:`LEGACY_ZERO`) is read as None; with
    ``warn_legacy`` (a config the user wrote) a FutureWarning says so.

    Example:
        >>> config_from_dict({"model": {"d_model": 64, "heads": 4}}).model.d_model
        64
        >>> config_from_dict({"model": {"d_modle": 64}})
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: unknown config key 'model.d_modle' (did you mean model.d_model?)
    """
    return _build(Config, data, "", warn_legacy)


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise CsanError(f"--set {item!r}: expected key=value, e.g. train.lr=5e-4")
    key, raw = item.split("=", 1)
    keys = key.strip().split(".")
    if not all(keys):
        raise CsanError(f"--set {item!r}: empty key part")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str) is False and raw.strip().lower() in ("none", "null"):
        value = None
    return keys, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested dict (values parsed as YAML scalars).

    Example:
        >>> apply_overrides({"train": {"lr": 1.0}}, ["train.lr=0.0005", "model.heads=4"])
        {'train': {'lr': 0.0005}, 'model': {'heads': 4}}
    """
    data = _merge({}, data)
    for item in overrides:
        keys, value = _parse_override(item)
        node = data
        for k in keys[:-1]:
            child = node.get(k)
            if not isinstance(child, dict):
                child = {}
                node[k] = child
            node = child
        node[keys[-1]] = value
    return data


def load_config(source: str | None = None, overrides: list[str] | None = None) -> Config:
    """Load a preset or YAML file (default preset ``multi30k-small``) and apply overrides.

    Example:
        >>> load_config("tiny").model.d_model > 0
        True
    """
    data = _load_source(source or "multi30k-small")
    data = apply_overrides(data, overrides or [])
    return config_from_dict(data, warn_legacy=True)


def dump_config(cfg: Config) -> str:
    """The config as YAML text (what ``load_config(file)`` reads back)."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


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
    """A CsanError naming the first ``train.*`` setting the loop cannot work with."""
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
    """A CsanError naming the first ``data.*`` setting training cannot work with."""
    if dc.src_lang == dc.tgt_lang and not dc.same_language:
        raise CsanError(
            f"data.src_lang = data.tgt_lang = {dc.src_lang!r}: a translation needs two languages "
            "(set data.same_language=true to train on one)"
        )
    for name in ("train_subset", "valid_subset"):
        value = getattr(dc, name)
        if value is not None and value < 1:
            raise CsanError(f"data.{name}={value}: must be at least 1 (or null: all pairs)")


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


def flat_keys(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config dict as dotted keys.

    Example:
        >>> flat_keys({"train": {"lr": 0.001, "adam_betas": [0.9, 0.98]}, "model": {}})
        {'train.lr': 0.001, 'train.adam_betas': [0.9, 0.98], 'model': {}}
    """
    if not isinstance(data, dict) or (prefix and not data):
        return {prefix[:-1]: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flat_keys(value, f"{prefix}{key}."))
    return out


def resume_difference(saved: Config, cfg: Config) -> str | None:
    """The first key, outside :data:`RESUMABLE_KEYS` and ``decode.*``, where ``cfg`` differs from
    the config a run was trained with, as ``key: saved -> new``; None when the run may resume.

    Example:
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
    own options are checked when the model is built)."""
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
