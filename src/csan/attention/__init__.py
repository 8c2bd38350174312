"""Attention variants as drop-in modules, picked by name per layer.

Example:
    >>> import torch, csan.attention
    >>> attn = csan.attention.build("vanilla", d_model=16, heads=4)
    >>> attn(torch.randn(2, 7, 16)).shape
    torch.Size([2, 7, 16])
"""

from csan.attention import vanilla  # noqa: F401  (registers "vanilla")
from csan.attention.base import SelfAttention
from csan.attention.registry import available, available_cross, build, build_cross

__all__ = ["SelfAttention", "available", "available_cross", "build", "build_cross"]
