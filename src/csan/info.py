"""Parameter counts per component (the paper's "Param." column)."""

from __future__ import annotations

from collections import OrderedDict

from torch import nn

from csan.config import Config

__all__ = ["count_parameters", "parameter_table"]


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Parameters per top-level component and per attention sublayer kind (tied weights once).

    Example:
        >>> from csan.config import ModelConfig
        >>> from csan.models import build_model
        >>> counts = count_parameters(build_model(ModelConfig(d_model=16, heads=2, ffn_dim=32), 50))
        >>> counts["total"] == sum(v for k, v in counts.items() if "." not in k and k != "total")
        True
    """
    seen: set[int] = set()
    counts: OrderedDict[str, int] = OrderedDict()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        top = name.split(".")[0]
        counts[top] = counts.get(top, 0) + p.numel()
        parts = name.split(".")
        for sub in ("self_attn", "cross_attn"):
            if sub in parts:
                key = f"{top}.{sub}"
                counts[key] = counts.get(key, 0) + p.numel()
    counts["total"] = sum(v for k, v in counts.items() if "." not in k)
    return dict(counts)


def parameter_table(model: nn.Module, cfg: Config) -> str:
    """A printable table of :func:`count_parameters` with the attention layout.

    Example:
        >>> from csan.config import ModelConfig
        >>> from csan.models import build_model
        >>> cfg = Config(model=ModelConfig(d_model=16, heads=2, ffn_dim=32))
        >>> lines = parameter_table(build_model(cfg.model, 50), cfg).splitlines()
        >>> lines[0], lines[-1].split()
        ("arch transformer; encoder attention 'vanilla', decoder 'vanilla', cross 'vanilla'", ['total', '17,568'])
    """
    counts = count_parameters(model)
    m = cfg.model
    lines = [
        f"arch {m.arch}; encoder attention {m.encoder_attention!r}, decoder {m.decoder_attention!r}, "
        f"cross {m.cross_attention!r}",
        f"{'component':<32}{'parameters':>14}",
    ]
    for key, value in counts.items():
        if key != "total":
            lines.append(f"{key:<32}{value:>14,}")
    lines.append(f"{'total':<32}{counts['total']:>14,}")
    return "\n".join(lines)
