"""``scaled_dot_product_attention`` with a CPU precision rule.

Under CPU autocast (bf16), PyTorch runs attention in bf16, and its CPU flash-attention backward in bf16
is an order of magnitude slower than in float32 (measured on a 2-core AMD EPYC, torch 2.13). On CPU the
attention itself therefore runs in float32 (q, k, v upcast; projections around it stay in bf16). On
CUDA it is the plain PyTorch call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["sdpa"]


def sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """Scaled dot-product attention on (batch, heads, time, d_h); float32 inside on CPU autocast.

    Example:
        >>> q = torch.randn(1, 2, 3, 4)
        >>> sdpa(q, q, q).shape
        torch.Size([1, 2, 3, 4])
    """
    if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        with torch.autocast("cpu", enabled=False):
            return F.scaled_dot_product_attention(
                q.float(),
                k.float(),
                v.float(),
                attn_mask=attn_mask,
                dropout_p=dropout_p,
                is_causal=is_causal,
            )
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
    )
