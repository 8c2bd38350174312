"""The attention variants under test, with small options, and how to call them."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

import csan.attention

D_MODEL, HEADS = 8, 4

# case id -> (registry name, options)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "vanilla": ("vanilla", {}),
    "csan1d": ("csan1d", {"window": 3}),
    "csan2d-wrap": ("csan2d", {"window": 3, "head_window": 3}),
    "csan2d-clip": ("csan2d", {"window": 5, "head_window": 3, "head_boundary": "clip"}),
    "rel_pos": ("rel_pos", {"max_relative": 2}),
    "neighbor": ("neighbor", {}),
    "local_hard": ("local_hard", {"window": 3.0}),
    "local_soft": ("local_soft", {}),
    "block": ("block", {"block_size": 3}),
    "cnn": ("cnn", {"conv_layers": 2, "kernel": 3}),
    "cnn-separable": ("cnn", {"conv_layers": 2, "kernel": 5, "separable": True}),
    "bi_direct": ("bi_direct", {}),
    "context-global": ("context", {"context": "global"}),
    "context-deep": ("context", {"context": "deep", "layer": 2}),
    "context-deep_global": ("context", {"context": "deep_global", "layer": 2}),
    "context-both": ("context", {"context": "deep_global+deep", "layer": 2}),
    "conv_qkv": ("conv_qkv", {"kernels": "1,3,5,7"}),
    "conv_qkv-dilated": ("conv_qkv", {"kernels": "1,3,5,7,3d2,5d2,7d2"}),
}
CAUSAL_CASES = [
    c for c, (name, _) in CASES.items() if csan.attention.registry._SELF[name].supports_causal
]
NON_CAUSAL_NAMES = ["block", "cnn", "bi_direct", "neighbor", "local_hard", "local_soft"]


def make(case: str, *, causal: bool = False, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    name, options = CASES[case]
    module = csan.attention.build(name, d_model=D_MODEL, heads=HEADS, causal=causal, **options)
    return module.to(dtype).eval()


def history_for(
    module: torch.nn.Module, batch: int, time: int, dtype=torch.float64
) -> list[Tensor] | None:
    """Random [H^0, ..., H^(l-1)] for modules that read lower layers."""
    if not getattr(module, "uses_history", False):
        return None
    layers = getattr(module, "layer", None) or 2
    return [torch.randn(batch, time, D_MODEL, dtype=dtype) for _ in range(layers)]


def padding_mask(lengths: list[int], time: int) -> Tensor:
    """(batch, time) bool, True at padding (right padding)."""
    return torch.arange(time)[None, :] >= torch.tensor(lengths)[:, None]


def real_positions(lengths: list[int]) -> list[tuple[int, int]]:
    return [(b, i) for b, n in enumerate(lengths) for i in range(n)]
