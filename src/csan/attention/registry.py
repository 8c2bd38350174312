"""Name -> module registries for self-attention and encoder-decoder (cross) attention.

Every self-attention module has one signature (see :class:`csan.attention.base.SelfAttention`), so a
layer's variant is a name in the config, never a flag.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from torch import nn

__all__ = [
    "available",
    "available_cross",
    "build",
    "build_cross",
    "options",
    "register",
    "register_cross",
]

_SELF: dict[str, type[nn.Module]] = {}
_CROSS: dict[str, type[nn.Module]] = {}
T = TypeVar("T", bound=type[nn.Module])


def register(name: str) -> Callable[[T], T]:
    """Class decorator: make a self-attention module buildable by ``name``.

    Example:
        >>> from csan.attention.vanilla import VanillaSelfAttention
        >>> @register("my_vanilla")
        ... class MyVanilla(VanillaSelfAttention):
        ...     pass
        >>> type(build("my_vanilla", d_model=8, heads=2)).__name__
        'MyVanilla'
        >>> _ = _SELF.pop("my_vanilla")  # (keep the registry as it was)
    """

    def wrap(cls: T) -> T:
        if name in _SELF:
            raise ValueError(f"self-attention {name!r} is registered twice")
        cls.name = name  # type: ignore[attr-defined]
        _SELF[name] = cls
        return cls

    return wrap


def register_cross(name: str) -> Callable[[T], T]:
    """Class decorator: make an encoder-decoder attention module buildable by ``name``.

    Example:
        >>> from csan.attention.vanilla import CrossAttention
        >>> @register_cross("my_cross")
        ... class MyCross(CrossAttention):
        ...     pass
        >>> "my_cross" in available_cross()
        True
        >>> _ = _CROSS.pop("my_cross")  # (keep the registry as it was)
    """

    def wrap(cls: T) -> T:
        if name in _CROSS:
            raise ValueError(f"cross-attention {name!r} is registered twice")
        cls.name = name  # type: ignore[attr-defined]
        _CROSS[name] = cls
        return cls

    return wrap


def available() -> list[str]:
    """Names of the registered self-attention variants.

    Example:
        >>> import csan.attention
        >>> "vanilla" in csan.attention.available()
        True
    """
    return sorted(_SELF)


def options(name: str) -> set[str]:
    """The keyword options the self-attention variant ``name`` accepts.

    Example:
        >>> "window" in options("csan1d")
        True
    """
    if name not in _SELF:
        raise ValueError(f"unknown self-attention {name!r}; available: {', '.join(sorted(_SELF))}")
    params = inspect.signature(_SELF[name].__init__).parameters
    return {p for p in params if p != "self"}


def available_cross() -> list[str]:
    """Names of the registered encoder-decoder attention variants.

    Example:
        >>> available_cross()
        ['conv_qkv', 'vanilla']
    """
    return sorted(_CROSS)


def _construct(table: dict[str, type[nn.Module]], kind: str, name: str, kwargs: dict[str, Any]):
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; available: {', '.join(sorted(table))}")
    cls = table[name]
    params = inspect.signature(cls.__init__).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            allowed = sorted(p for p in params if p != "self")
            raise ValueError(
                f"{kind} {name!r} has no option {unknown[0]!r}; its options: {', '.join(allowed)}"
            )
    return cls(**kwargs)


def build(name: str, *, d_model: int, heads: int, **options: Any) -> nn.Module:
    """Build the self-attention variant ``name``.

    ``options`` are the variant's keyword options (``causal``, ``dropout``, ``window``, ...); an option the
    variant does not have is a ``ValueError`` that names it.

    Example:
        >>> import torch, csan.attention
        >>> attn = csan.attention.build("vanilla", d_model=16, heads=4)
        >>> attn(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """
    return _construct(
        _SELF, "self-attention", name, {"d_model": d_model, "heads": heads, **options}
    )


def build_cross(name: str, *, d_model: int, heads: int, **options: Any) -> nn.Module:
    """Build the encoder-decoder attention variant ``name`` (see :func:`build`).

    Example:
        >>> import torch
        >>> attn = build_cross("conv_qkv", d_model=8, heads=2, kernels="1,3")
        >>> attn(torch.randn(1, 3, 8), torch.randn(1, 4, 8), None).shape
        torch.Size([1, 3, 8])
    """
    return _construct(
        _CROSS, "cross-attention", name, {"d_model": d_model, "heads": heads, **options}
    )
