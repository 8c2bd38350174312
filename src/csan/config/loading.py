"""Presets, YAML files (with ``base:``), dotted overrides, and the checked build of a :class:`Config`."""

from __future__ import annotations

import difflib
import types
import typing
import warnings
from dataclasses import fields, is_dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from csan.config.schema import Config
from csan.errors import CsanError

__all__ = [
    "LEGACY_ZERO",
    "apply_float32",
    "apply_overrides",
    "config_from_dict",
    "dump_config",
    "flat_keys",
    "load_config",
    "nested_keys",
    "presets",
]


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


def _load_source(
    name_or_path: str,
    seen: tuple[str, ...] = (),
    users_options: set[str] | None = None,
    users_keys: set[str] | None = None,
) -> dict[str, Any]:
    """The nested dict of a preset or YAML file, following ``base:`` (single inheritance).

    ``users_options`` receives the variants that the chain's files other than csan's presets give
    ``model.attention_options`` for, and ``users_keys`` the dotted keys those files set (see
    :func:`load_config`).
    """
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
    if users_options is not None and origin != f"preset {name_or_path}":
        users_options |= _option_variants(data)
        if users_keys is not None:
            users_keys |= set(flat_keys({k: v for k, v in data.items() if k != "base"}))
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
    return _merge(_load_source(base, (*seen, name_or_path), users_options, users_keys), data)


def _option_variants(data: dict[str, Any]) -> set[str]:
    """The variant names a config file gives ``model.attention_options`` for."""
    model = data.get("model")
    options = model.get("attention_options") if isinstance(model, dict) else None
    return set(options) if isinstance(options, dict) else set()


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``b`` over ``a``, recursively for nested mappings; a null where ``a`` has a mapping drops it
    (``attention_options: {cnn: null}``: the base's options for cnn, back to its defaults)."""
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)  # sections, and attention_options per variant
        else:
            _assign(out, key, value)
    return out


def _assign(node: dict[str, Any], key: str, value: Any) -> None:
    """``node[key] = value``, except that a null where ``node`` has a mapping drops the mapping."""
    if value is None and isinstance(node.get(key), dict):
        del node[key]
    else:
        node[key] = value


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
    cfg = _build(Config, data, "", warn_legacy)
    if cfg.float32:
        _check_float32(cfg.float32, warn_legacy)
    return cfg


# what decides a run's precision cannot depend on it
_NOT_IN_FLOAT32 = ("train.cpu_bf16", "train.bf16", "train.device")


def _check_float32(section: dict[str, Any], warn: bool) -> None:
    """Refuse a ``float32`` section with an unknown key, a wrong type, or a key that decides the
    precision; the error names the key as ``float32.<section>.<key>``."""
    if "float32" in section:
        raise CsanError("float32.float32: the float32 section cannot hold another one")
    for key in _NOT_IN_FLOAT32:
        part, name = key.split(".")
        if isinstance(section.get(part), dict) and name in section[part]:
            raise CsanError(
                f"float32.{key}: it decides whether a run is float32, so it cannot be a float32 "
                "setting; set it in the train section"
            )
    _build(Config, section, "float32.", warn)


def apply_float32(cfg: Config) -> Config:
    """``cfg`` with its ``float32`` section merged over the rest (as a YAML file over its ``base``)
    and the section emptied. ``attention_options`` for a variant that no layer uses any more are
    dropped, as :func:`load_config` drops a preset's.

    Example:
        >>> cfg = load_config("multi30k-small")
        >>> cfg.model.encoder_attention, cfg.float32
        ('cnn@0-1', {'model': {'encoder_attention': 'vanilla'}})
        >>> fp32 = apply_float32(cfg)
        >>> fp32.model.encoder_attention, fp32.model.attention_options, fp32.float32
        ('vanilla', {}, {})
    """
    data = cfg.to_dict()
    section = data.pop("float32")
    return _without_unused_options(config_from_dict(_merge(data, section)), keep=set())


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
    return _apply_parsed(data, [_parse_override(item) for item in overrides])


def _apply_parsed(data: dict[str, Any], parsed: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """``data`` with the parsed overrides ``(keys, value)`` applied, in order (a new dict)."""
    data = _merge({}, data)
    for keys, value in parsed:
        node = data
        for k in keys[:-1]:
            child = node.get(k)
            if not isinstance(child, dict):
                child = {}
                node[k] = child
            node = child
        _assign(node, keys[-1], value)  # as in a file: a null drops a mapping
    return data


def load_config(source: str | None = None, overrides: list[str] | None = None) -> Config:
    """Load a preset or YAML file (default preset ``multi30k-small``) and apply overrides.

    ``model.attention_options`` that only csan's presets give, for a variant that no layer uses
    once the user's file and overrides are applied, are dropped: the main preset's options for its
    ``cnn`` layers do not stand in the way of ``--set model.encoder_attention=csan1d``. Options the
    user gives for a variant no layer uses stay, and :func:`csan.models.check_model` refuses them.

    Example:
        >>> load_config("tiny").model.d_model > 0
        True
        >>> load_config("multi30k-small").model.attention_options
        {'cnn': {'conv_layers': 2}}
        >>> load_config("multi30k-small", ["model.encoder_attention=csan1d"]).model.attention_options
        {}
    """
    users: set[str] = set()
    users_keys: set[str] = set()
    data = _load_source(source or "multi30k-small", users_options=users, users_keys=users_keys)
    parsed = [_parse_override(item) for item in overrides or []]
    data = _apply_parsed(data, parsed)
    users_keys |= {".".join(keys) for keys, _ in parsed}
    data = _users_keys_over_float32(data, users_keys)
    cfg = config_from_dict(data, warn_legacy=True)
    for keys, _ in parsed:
        if keys[:2] == ["model", "attention_options"]:
            if len(keys) == 2:
                return cfg  # the whole mapping set by the user: nothing dropped
            users.add(keys[2])
    return _without_unused_options(cfg, keep=users)


def _users_keys_over_float32(data: dict[str, Any], users_keys: set[str]) -> dict[str, Any]:
    """``data`` without the ``float32`` settings for keys that the user's own files or overrides
    set outside that section: ``--set model.encoder_attention=csan1d`` means csan1d in float32 too
    (unless the user also sets ``float32.model.encoder_attention``)."""
    section = flat_keys(data.get("float32") or {})
    kept = {
        key: value
        for key, value in section.items()
        if key not in users_keys or f"float32.{key}" in users_keys
    }
    return data if kept == section else {**data, "float32": nested_keys(kept)}


def _without_unused_options(cfg: Config, keep: set[str]) -> Config:
    """``cfg`` without the ``attention_options`` that no layer uses, except those of ``keep``."""
    m = cfg.model
    if set(m.attention_options) <= keep:
        return cfg
    used: set[str] = set()
    if m.arch == "transformer":
        from csan.models.layout import attention_variants

        try:
            used = {name for side in attention_variants(m).values() for name in side}
        except ValueError:
            return cfg  # csan.models.check_model says what is wrong with the placement
    kept = {k: v for k, v in m.attention_options.items() if k in used or k in keep}
    return replace(cfg, model=replace(m, attention_options=kept))


def dump_config(cfg: Config) -> str:
    """The config as YAML text (what ``load_config(file)`` reads back).

    Example:
        >>> cfg = load_config("tiny", ["train.lr=0.002"])
        >>> text = dump_config(cfg)
        >>> text.splitlines()[:2], config_from_dict(yaml.safe_load(text)) == cfg
        (['model:', '  arch: transformer'], True)
    """
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


def nested_keys(flat: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys back into nested dicts (the inverse of :func:`flat_keys`).

    Example:
        >>> nested_keys({"train.lr": 0.001, "model.d_model": 64, "train.seed": 2})
        {'train': {'lr': 0.001, 'seed': 2}, 'model': {'d_model': 64}}
    """
    return _apply_parsed({}, [(key.split("."), value) for key, value in flat.items()])


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
