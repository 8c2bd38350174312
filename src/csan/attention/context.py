"""Context-aware self-attention (Yang et al., AAAI 2019).

Notation: x (batch, time, d_model) the layer's input; Q, K, V (batch, time, d_model) its projections before
the head split; layer ``l`` (1-based) with ``history = [H^0, ..., H^(l-1)]`` (H^0 the embeddings, H^i the
output of layer i); ``C`` the context. Queries and keys are mixed with the projected context, values are not:

    Q^ = (1 - lQ) Q + lQ (C U_Q),   lQ = sigmoid(Q vQ_h + (C U_Q) vQ_c)      (one scalar per token,
    K^ = (1 - lK) K + lK (C U_K),   lK = sigmoid(K vK_h + (C U_K) vK_c)       shared by the heads)

Contexts (option ``context``):

- ``"global"``: ``c`` = mean of ``x`` over the non-padding positions (one vector per sentence).
- ``"deep"``: ``C = [H^0; ...; H^(l-1)]`` per position (width ``l * d_model``).
- ``"deep_global"``: ``c = [mean H^0; ...; mean H^(l-1)]``, the global contexts of layers 1..l
  (the global context of layer k is the mean of its input H^(k-1)).
- ``"deep_global+deep"``: both, their projections summed (separate ``U`` for each).

Causal (decoder): every mean runs over positions ``<= i`` only (prefix means), so position ``i`` never
reads the future; with ``state`` the running sums and the count of decoded positions are kept, and each
history tensor holds the same newest positions as ``x``.

Choices where the paper is silent: ``U``, ``v`` have no biases (as in the formulas); deep contexts need the
option ``layer`` (the U matrices are ``l * d_model`` wide), and the history length is checked against it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from csan.attention.base import SelfAttention, merge_heads, split_heads
from csan.attention.registry import register
from csan.attention.vanilla import append_state
from csan.functional import masked_attention

__all__ = ["CONTEXTS", "ContextAwareSelfAttention"]

CONTEXTS = ("global", "deep", "deep_global", "deep_global+deep")
_PARTS = {
    "global": ("global",),
    "deep": ("deep",),
    "deep_global": ("deep_global",),
    "deep_global+deep": ("deep", "deep_global"),
}


@register("context")
class ContextAwareSelfAttention(SelfAttention):
    """Self-attention whose queries and keys are gated with a global and/or deep context.

    Options:
        context: ``"global"`` (default), ``"deep"``, ``"deep_global"`` or ``"deep_global+deep"``.
        layer: this layer's 1-based index ``l`` (= the number of history tensors it receives);
            required by the deep contexts, unused by ``"global"``.

    Example:
        >>> import torch
        >>> attn = ContextAwareSelfAttention(d_model=8, heads=2, context="deep_global+deep", layer=2)
        >>> x, h0 = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
        >>> attn(x, history=[h0, x]).shape
        torch.Size([2, 5, 8])
    """

    uses_history: ClassVar[bool] = True

    def __init__(
        self,
        *,
        d_model: int,
        heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        context: str = "global",
        layer: int | None = None,
        bias: bool = True,
    ) -> None:
        super().__init__(d_model=d_model, heads=heads, causal=causal, dropout=dropout, bias=bias)
        if context not in CONTEXTS:
            raise ValueError(f"context must be one of {', '.join(CONTEXTS)}; got {context!r}")
        parts = _PARTS[context]
        needs_layer = layer is not None or parts != ("global",)
        if needs_layer and (isinstance(layer, bool) or not isinstance(layer, int) or layer < 1):
            raise ValueError(
                f"context {context!r} needs option layer (this layer's 1-based index, "
                f"an integer >= 1), got {layer!r}"
            )
        self.context, self.layer, self.parts = context, layer, parts
        width = {
            "global": d_model,
            "deep": (layer or 0) * d_model,
            "deep_global": (layer or 0) * d_model,
        }
        self.u_q = nn.ModuleDict({p: nn.Linear(width[p], d_model, bias=False) for p in parts})
        self.u_k = nn.ModuleDict({p: nn.Linear(width[p], d_model, bias=False) for p in parts})
        self.gate_q_h = nn.Linear(d_model, 1, bias=False)  # vQ_h
        self.gate_q_c = nn.Linear(d_model, 1, bias=False)  # vQ_c
        self.gate_k_h = nn.Linear(d_model, 1, bias=False)  # vK_h
        self.gate_k_c = nn.Linear(d_model, 1, bias=False)  # vK_c

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, context={self.context}, layer={self.layer}"

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        *,
        state: dict[str, Any] | None = None,
        history: list[Tensor] | None = None,
    ) -> Tensor:
        self.check_state(state)
        if state is not None:
            key_padding_mask = None  # decoded positions are never padding
        q, k, v = self.project_with_context(x, key_padding_mask, history, state)
        if state is not None:
            k, v = append_state(state, k, v)
        allowed = self.allowed_keys(q, k, key_padding_mask)
        out = masked_attention(q, k, v, allowed, dropout_p=self.attn_dropout)
        return self.out_proj(merge_heads(out))

    def attention_weights(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        *,
        history: list[Tensor] | None = None,
    ) -> Tensor:
        """Softmax weights (batch, heads, time, time) of the context-gated queries and keys, no dropout.

        The deep contexts need the layer's ``history`` as :meth:`forward` does.
        """
        q, k, _ = self.project_with_context(x, key_padding_mask, history, None)
        return self.dot_product_weights(q, k, key_padding_mask)

    def project_with_context(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None,
        history: list[Tensor] | None,
        state: dict[str, Any] | None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Q^, K^ (gated with the context) and V, each (batch, heads, time, d_h)."""
        # part -> (batch, time or 1, width)
        contexts = self._contexts(x, key_padding_mask, history, state)
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # (batch, time, d_model) each
        cq = sum(self.u_q[p](c) for p, c in contexts.items())  # C U_Q, (batch, time|1, d_model)
        ck = sum(self.u_k[p](c) for p, c in contexts.items())
        lq = torch.sigmoid(self.gate_q_h(q) + self.gate_q_c(cq))  # (batch, time, 1)
        lk = torch.sigmoid(self.gate_k_h(k) + self.gate_k_c(ck))
        q = (1 - lq) * q + lq * cq
        k = (1 - lk) * k + lk * ck
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    def _contexts(
        self,
        x: Tensor,
        padding: Tensor | None,
        history: list[Tensor] | None,
        state: dict[str, Any] | None,
    ) -> dict[str, Tensor]:
        seen = 0 if state is None else state.get("count", 0)
        contexts = {}
        if "global" in self.parts:
            contexts["global"] = self._mean("sum_x", x, padding, state, seen)
        if self.parts != ("global",):
            if history is None or len(history) != self.layer:
                got = "no history" if history is None else f"{len(history)} tensors"
                raise ValueError(
                    f"context {self.context!r} at layer {self.layer} needs history "
                    f"[H^0, ..., H^{self.layer - 1}] ({self.layer} tensors), got {got}"
                )
            deep = torch.cat(history, dim=-1)  # (batch, time, layer * d_model)
            if "deep" in self.parts:
                contexts["deep"] = deep
            if "deep_global" in self.parts:
                contexts["deep_global"] = self._mean("sum_history", deep, padding, state, seen)
        if state is not None:
            state["count"] = seen + x.size(1)
        return contexts

    def _mean(
        self, key: str, h: Tensor, padding: Tensor | None, state: dict[str, Any] | None, seen: int
    ) -> Tensor:
        """Mean over non-padding positions: (batch, 1, width), or prefix means (batch, time, width)."""
        real = torch.ones_like(h[..., :1]) if padding is None else (~padding)[..., None].to(h.dtype)
        h = h * real
        if not self.causal:
            return h.sum(1, keepdim=True) / real.sum(1, keepdim=True).clamp_min(1.0)
        sums = h.cumsum(1)  # (batch, time, width)
        counts = real.cumsum(1)  # (batch, time, 1)
        if state is not None:
            if key in state:
                sums = sums + state[key][:, None, :]
            counts = counts + seen
            state[key] = sums[:, -1]  # (batch, width), batch first for reorder_state
        return sums / counts.clamp_min(1.0)
