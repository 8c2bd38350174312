"""Attention variants as drop-in modules, picked by name per layer.

Self-attention (``build``): ``vanilla``, ``csan1d``, ``csan2d`` (Yang et al. 2019), ``rel_pos`` (Shaw et al.),
``neighbor``, ``local_hard``, ``local_soft`` (Gaussian localness), ``block`` (Bi-BloSAN), ``cnn`` (QANet),
``bi_direct`` (DiSAN), ``context`` (context-aware SAN), ``conv_qkv`` (convolutional projections).
Cross-attention (``build_cross``): ``vanilla``, ``conv_qkv``. The semantics are those of SPEC.md.

Example:
    >>> import torch, csan.attention
    >>> attn = csan.attention.build("csan2d", d_model=16, heads=4, window=5)
    >>> attn(torch.randn(2, 7, 16)).shape
    torch.Size([2, 7, 16])
"""

from csan.attention import (  # noqa: F401  (each import registers its variants)
    bi_direct,
    block,
    cnn,
    context,
    conv_qkv,
    csan,
    localness,
    rel_pos,
    vanilla,
)
from csan.attention.base import SelfAttention
from csan.attention.registry import (
    available,
    available_cross,
    build,
    build_cross,
    options,
    register,
    register_cross,
)

__all__ = [
    "SelfAttention",
    "available",
    "available_cross",
    "build",
    "build_cross",
    "options",
    "register",
    "register_cross",
]
