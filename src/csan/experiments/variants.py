"""Named variants of the papers' tables: a name -> the config overrides that build that model.

A *variant* is one row of a results table: a name and the dotted ``--set`` overrides that turn the base
config into that model. Three families:

- **Table 1** (Yang et al., NAACL 2019): ``vanilla`` (the Transformer baseline), ``rel_pos``, ``neighbor``,
  ``local_hard``, ``local_soft``, ``block``, ``cnn``, ``bi_direct``, ``csan1d``, ``csan2d``. Each sits in the
  paper's placement: the lowest three of six encoder layers, i.e. the **lower half of the encoder, rounded
  up** (``ceil(L / 2)`` layers: 6 -> layers 0-2, 3 -> 0-1, 2 -> 0); decoder layers stay vanilla.
- **Context-aware SAN** (Yang et al., AAAI 2019): ``context-<vector>-<side>`` for the vectors ``global``,
  ``deep``, ``deep_global``, ``deep_global+deep`` and the sides ``enc`` (every encoder layer), ``dec``
  (every decoder self-attention layer) and ``both``.
- **Convolutional Q/K/V projections**: ``conv_qkv`` (widths ``1,3,5,7``) and ``conv_qkv_dilated``
  (``1,3,5,7,3d2,5d2,7d2``), in every attention layer (encoder, decoder and encoder-decoder attention).
- **Other architectures**: ``convs2s`` (Gehring et al. 2017) in the shape of the ``convs2s-multi30k``
  preset (embeddings and 256 channels, 4 encoder / 3 decoder blocks of width 3, dropout 0.2, gradients
  clipped at norm 1), trained with the same data, recipe and budget as the other rows.

Any other string is a raw placement, ``NAME@LAYERS`` (``csan2d@0-1``) or a per-layer list
(``csan1d,vanilla,vanilla``), used as ``model.encoder_attention``. Groups name several rows at once:
``table1``, ``context``, ``conv``.

Example:
    >>> from csan.config import load_config
    >>> cfg = load_config("tiny")  # 2 encoder layers
    >>> resolve_variants(["vanilla", "csan2d", "csan1d@1"], cfg)[1].overrides
    ('model.encoder_attention=csan2d@0',)
    >>> [v.name for v in resolve_variants(["conv"], cfg)]
    ['vanilla', 'conv_qkv', 'conv_qkv_dilated']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from csan.config import Config
from csan.errors import CsanError

__all__ = [
    "ARCHS",
    "CONTEXT_SIDES",
    "CONTEXT_VECTORS",
    "GROUPS",
    "TABLE1",
    "Variant",
    "lower_half",
    "resolve_variants",
    "variant_names",
]


@dataclass(frozen=True)
class Variant:
    """One table row: ``name`` (also the run folder prefix), its overrides and a one-line description.

    Example:
        >>> from csan.config import load_config
        >>> v = Variant("csan2d", ("model.encoder_attention=csan2d@0-2",), "2D-CSAN, layers 0-2")
        >>> load_config("tiny", list(v.overrides)).model.encoder_attention
        'csan2d@0-2'
    """

    name: str
    overrides: tuple[str, ...]
    description: str = ""


def lower_half(cfg: Config) -> str:
    """The encoder layers of the paper's placement, as a layer spec: the lower ``ceil(L / 2)``.

    Example:
        >>> from csan.config import load_config
        >>> lower_half(load_config("tiny", ["model.encoder_layers=6"]))
        '0-2'
    """
    n = max(1, -(-cfg.model.encoder_layers // 2))
    return "0" if n == 1 else f"0-{n - 1}"


# Table 1 rows: name -> (registry variant, description). The order is the paper's.
TABLE1: dict[str, tuple[str, str]] = {
    "vanilla": ("vanilla", "Transformer baseline"),
    "rel_pos": ("rel_pos", "relative positions (Shaw et al. 2018)"),
    "neighbor": ("neighbor", "Gaussian bias, centre i, window predicted"),
    "local_hard": ("local_hard", "Gaussian bias, centre predicted, window D=10"),
    "local_soft": ("local_soft", "Gaussian bias, centre and window predicted (Yang et al. 2018)"),
    "block": ("block", "block self-attention (Bi-BloSAN)"),
    "cnn": ("cnn", "convolutions before self-attention (QANet)"),
    "bi_direct": ("bi_direct", "forward/backward heads (DiSAN)"),
    "csan1d": ("csan1d", "1D-CSAN, window 11"),
    "csan2d": ("csan2d", "2D-CSAN, window 11, head window 3"),
}

CONTEXT_VECTORS = ("global", "deep", "deep_global", "deep_global+deep")
CONTEXT_SIDES = {"enc": "encoder", "dec": "decoder", "both": "encoder and decoder"}

CONV_KERNELS = {"conv_qkv": "1,3,5,7", "conv_qkv_dilated": "1,3,5,7,3d2,5d2,7d2"}

# Other architectures: name -> (overrides, description).
ARCHS: dict[str, tuple[tuple[str, ...], str]] = {
    "convs2s": (
        (
            "model.arch=convs2s",
            "model.dropout=0.2",
            "model.convs2s.embed_dim=256",
            "model.convs2s.channels=256",
            "model.convs2s.encoder_layers=4",
            "model.convs2s.decoder_layers=3",
            "model.convs2s.kernel=3",
            "train.clip_norm=1.0",
        ),
        "ConvS2S (Gehring et al. 2017), 4+3 GLU blocks of 256 channels",
    ),
}


def _table1(name: str, cfg: Config) -> Variant:
    registry_name, description = TABLE1[name]
    if name == "vanilla":
        return Variant(name, ("model.encoder_attention=vanilla",), description)
    where = lower_half(cfg)
    return Variant(
        name,
        (f"model.encoder_attention={registry_name}@{where}",),
        f"{description}; encoder layers {where}",
    )


def _context(name: str, cfg: Config) -> Variant:
    _, vector, side = name.split("-")
    overrides = [f"model.attention_options.context.context={vector}"]
    if side in ("enc", "both"):
        overrides.append("model.encoder_attention=context")
    if side in ("dec", "both"):
        overrides.append("model.decoder_attention=context")
    return Variant(name, tuple(overrides), f"{vector} context, every {CONTEXT_SIDES[side]} layer")


def _conv(name: str, cfg: Config) -> Variant:
    kernels = CONV_KERNELS[name]
    overrides = (
        "model.encoder_attention=conv_qkv",
        "model.decoder_attention=conv_qkv",
        "model.cross_attention=conv_qkv",
        f"model.attention_options.conv_qkv.kernels={kernels!r}",
    )
    return Variant(name, overrides, f"convolutional Q/K/V projections {kernels}, every layer")


def _arch(name: str, cfg: Config) -> Variant:
    overrides, description = ARCHS[name]
    return Variant(name, overrides, description)


_BUILDERS: dict[str, Callable[[str, Config], Variant]] = {name: _table1 for name in TABLE1}
_BUILDERS.update({f"context-{v}-{s}": _context for v in CONTEXT_VECTORS for s in CONTEXT_SIDES})
_BUILDERS.update({name: _conv for name in CONV_KERNELS})
_BUILDERS.update({name: _arch for name in ARCHS})

GROUPS: dict[str, tuple[str, ...]] = {
    "table1": tuple(TABLE1),
    "context": ("vanilla", *(f"context-{v}-{s}" for s in CONTEXT_SIDES for v in CONTEXT_VECTORS)),
    "conv": ("vanilla", *CONV_KERNELS),
}


def variant_names() -> list[str]:
    """Every named variant, in table order (Table 1, context-aware, convolutional projections).

    Example:
        >>> names = variant_names()
        >>> names[:3], len(names), names[-1]
        (['vanilla', 'rel_pos', 'neighbor'], 25, 'convs2s')
    """
    return list(_BUILDERS)


_RAW = re.compile(r"^[A-Za-z0-9_+]+(@[0-9,\-]+)?(;[A-Za-z0-9_+]+@[0-9,\-]+)*$|^[A-Za-z0-9_+,]+$")


def _raw(spec: str) -> Variant:
    if not _RAW.match(spec):
        known = ", ".join([*GROUPS, *_BUILDERS])
        raise CsanError(
            f"variant {spec!r}: not a named variant ({known}) nor a placement like 'csan2d@0-1'"
        )
    return Variant(spec, (f"model.encoder_attention={spec}",), f"encoder attention {spec}")


def resolve_variants(specs: Sequence[str], cfg: Config) -> list[Variant]:
    """Turn names, groups and raw placements into :class:`Variant` rows (first one = the baseline).

    ``cfg`` is the base config (it decides the lower-half placement). Duplicates are dropped, keeping the
    first. Raw placements are not checked here: a bad one fails its own run, not the whole table.

    Example:
        >>> from csan.config import load_config
        >>> specs = ["vanilla", "csan1d", "vanilla", "csan2d@0-1"]  # a duplicate, a raw placement
        >>> variants = resolve_variants(specs, load_config("tiny"))
        >>> [v.name for v in variants], variants[-1].overrides
        (['vanilla', 'csan1d', 'csan2d@0-1'], ('model.encoder_attention=csan2d@0-1',))
    """
    out: list[Variant] = []
    for spec in specs:
        spec = spec.strip()
        if not spec:
            continue
        for name in GROUPS.get(spec, (spec,)):
            variant = _BUILDERS[name](name, cfg) if name in _BUILDERS else _raw(name)
            if variant.name not in {v.name for v in out}:
                out.append(variant)
    if not out:
        raise CsanError("no variants given (e.g. --variants vanilla,csan1d,csan2d or table1)")
    return out
