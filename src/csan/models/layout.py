"""Per-layer attention placement: ``"vanilla"``, ``"a,b,c"`` or ``"csan2d@0-2"``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from csan.config import ModelConfig

__all__ = ["attention_variants", "layer_variants"]


def _parse_layers(spec: str, n_layers: int, where: str) -> set[int]:
    chosen: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                raise ValueError(f"{where}: bad layer range {part!r}")
            chosen.update(range(int(lo), int(hi) + 1))
        elif part.isdigit():
            chosen.add(int(part))
        else:
            raise ValueError(f"{where}: bad layer index {part!r}")
    bad = sorted(i for i in chosen if i >= n_layers)
    if bad:
        raise ValueError(f"{where}: layer {bad[0]} does not exist (layers 0-{n_layers - 1})")
    return chosen


def layer_variants(spec: str, n_layers: int, where: str = "attention") -> list[str]:
    """Expand a placement spec into one variant name per layer.

    Example:
        >>> layer_variants("csan2d@0-2", 6)
        ['csan2d', 'csan2d', 'csan2d', 'vanilla', 'vanilla', 'vanilla']
        >>> layer_variants("csan1d", 2)
        ['csan1d', 'csan1d']
    """
    spec = spec.strip()
    if "@" in spec:
        parts = [p.strip() for p in spec.split(";")]
        names = ["vanilla"] * n_layers
        for part in parts:
            if "@" not in part:
                raise ValueError(f"{where}: {part!r} lacks '@layers' (write name@0-2;name@3)")
            name, layers = part.split("@", 1)
            for i in _parse_layers(layers, n_layers, where):
                names[i] = name.strip()
        return names
    names = [s.strip() for s in spec.split(",")]
    if len(names) == 1:
        return names * n_layers
    if len(names) != n_layers:
        raise ValueError(f"{where}: {len(names)} names given for {n_layers} layers ({spec!r})")
    return names


def attention_variants(cfg: ModelConfig) -> dict[str, list[str]]:
    """The variant of every encoder, decoder and cross-attention layer of a Transformer
    :class:`~csan.config.ModelConfig`; a bad placement spec is a ``ValueError`` naming its side.

    Example:
        >>> from csan.config import ModelConfig
        >>> attention_variants(ModelConfig(encoder_layers=2, decoder_layers=1, encoder_attention="cnn@0"))
        {'encoder': ['cnn', 'vanilla'], 'decoder': ['vanilla'], 'cross': ['vanilla']}
    """
    return {
        "encoder": layer_variants(cfg.encoder_attention, cfg.encoder_layers, "encoder"),
        "decoder": layer_variants(cfg.decoder_attention, cfg.decoder_layers, "decoder"),
        "cross": layer_variants(cfg.cross_attention, cfg.decoder_layers, "cross"),
    }
