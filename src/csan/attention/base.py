"""The shared parts of attention modules: projections and the head split.

Notation (everywhere in csan):
    x:    (batch, time, d_model)
    q/k/v (batch, heads, time, d_h) with d_h = d_model // heads
    key_padding_mask: (batch, time) bool, True at padding

Every self-attention module has the signature::

    forward(x, key_padding_mask=None, *, state=None, history=None) -> (batch, time, d_model)

``state`` is the incremental-decoding cache (a dict the module fills; every tensor in it has batch first,
see :func:`csan.models.base.reorder_state`); when given, ``x`` holds only the newest positions.
``history`` is the list of lower layers' outputs ``[H^0, ..., H^(l-1)]`` (deep context); modules that do
not need it ignore it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from csan.functional import attention_mask, masked_softmax

__all__ = ["SelfAttention", "merge_heads", "split_heads"]


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(batch, time, d_model) -> (batch, heads, time, d_h).

    Example:
        >>> import torch
        >>> split_heads(torch.zeros(2, 5, 8), heads=4).shape
        torch.Size([2, 4, 5, 2])
    """
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(batch, heads, time, d_h) -> (batch, time, d_model); the inverse of :func:`split_heads`.

    Example:
        >>> import torch
        >>> x = torch.randn(2, 5, 8)
        >>> torch.equal(merge_heads(split_heads(x, 4)), x)
        True
    """
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


class SelfAttention(nn.Module):
    """Base class: validates sizes and owns the Q/K/V and output projections.

    Subclasses implement :meth:`forward` with the common signature. ``supports_causal`` says whether the
    variant may sit in a decoder (with ``causal=True``); ``uses_history`` whether it reads lower layers.

    Example (a new variant: plain attention, registered so that configs can name it):
        >>> import torch
        >>> from csan.functional import masked_attention
        >>> class Plain(SelfAttention):
        ...     name = "plain"
        ...     def forward(self, x, key_padding_mask=None, *, state=None, history=None):
        ...         q, k, v = self.project(x)
        ...         out = masked_attention(q, k, v, self.allowed_keys(q, k, key_padding_mask))
        ...         return self.out_proj(merge_heads(out))
        >>> Plain(d_model=8, heads=2)(torch.randn(1, 3, 8)).shape
        torch.Size([1, 3, 8])
    """

    name: ClassVar[str] = "base"
    supports_causal: ClassVar[bool] = True
    uses_history: ClassVar[bool] = False

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if heads < 1 or d_model % heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by heads ({heads})")
        if causal and not self.supports_causal:
            raise ValueError(f"attention {self.name!r} cannot run causally (in a decoder)")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"attention dropout must be in [0, 1), got {dropout}")
        self.d_model = d_model
        self.heads = heads
        self.head_dim = d_model // heads
        self.causal = causal
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        nn.init.xavier_uniform_(self.qkv.weight, gain=1 / 2**0.5)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if bias:
            nn.init.zeros_(self.qkv.bias)
            nn.init.zeros_(self.out_proj.bias)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (batch, time, d_model) -> q, k, v each (batch, heads, time, d_h)."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    @property
    def attn_dropout(self) -> float:
        return self.dropout if self.training else 0.0

    def check_state(self, state: dict[str, Any] | None) -> None:
        """Raise ``ValueError`` if ``state`` (incremental decoding) is given to a non-causal module."""
        if state is not None and not self.causal:
            raise ValueError(
                f"attention {self.name!r} decodes incrementally (state=...) only when built with causal=True"
            )

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, heads={self.heads}, causal={self.causal}"

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """The softmax weights of every query over the keys, (batch, heads, time, time), no dropout.

        For inspection and plots (``csan plot attention``); variants that do not expose their weights
        raise ``NotImplementedError`` naming themselves.
        """
        raise NotImplementedError(f"attention {self.name!r} does not expose its attention weights")

    def dot_product_weights(
        self, q: Tensor, k: Tensor, key_padding_mask: Tensor | None, bias: Tensor | None = None
    ) -> Tensor:
        """``softmax(q k^T / sqrt(d_h) + bias)`` over the allowed keys (padding, causal), no dropout.

        q (batch, heads, t_q, d_h), k (batch, heads, t_k, d_h) -> (batch, heads, t_q, t_k); causal
        queries are the last ``t_q`` positions. The common body of :meth:`attention_weights`.
        """
        scores = q @ k.transpose(-1, -2) / self.head_dim**0.5
        if bias is not None:
            scores = scores + bias
        return masked_softmax(scores, self.allowed_keys(q, k, key_padding_mask))

    def allowed_keys(self, q: Tensor, k: Tensor, key_padding_mask: Tensor | None) -> Tensor | None:
        """Bool (batch or 1, 1, t_q, t_k): the keys each query may read (padding, causal); None: all.

        Causal queries are the last ``t_q`` positions (incremental decoding).
        """
        return attention_mask(
            q.size(2),
            k.size(2),
            key_padding_mask=key_padding_mask,
            causal=self.causal,
            device=q.device,
        )

    def forward(  # pragma: no cover - abstract
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        *,
        state: dict[str, Any] | None = None,
        history: list[Tensor] | None = None,
    ) -> Tensor:
        raise NotImplementedError
