"""``csan plot attention``: one sentence's self-attention weights, one heat map per head.

The weights come from the layer's own :meth:`attention_weights` (``csan.attention``), fed with exactly
the input its ``forward`` receives in the model (captured by a forward pre-hook), so a CSAN layer shows
its window: zero outside ``|i - j| <= (M-1)/2``. A 2D-CSAN layer (head window N > 1) is drawn with the
key axis split by key head (``H`` blocks of the sentence side by side), so the head window is visible
too; ``sum_key_heads=True`` folds it back to one block.

Layers are numbered from 0, as in placements (``csan2d@0-2``). On the decoder side the target is the
given ``target`` text or, by default, the model's own greedy translation, read with teacher forcing.

Example:
    >>> amap = AttentionMap(torch.eye(2)[None], ["a", "</s>"], ["a", "</s>"], "encoder", 0, "vanilla")
    >>> amap.weights.shape
    torch.Size([1, 2, 2])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from csan.data import SubwordModel
from csan.decoding.translate import translate_lines
from csan.errors import CsanError
from csan.experiments.plots import pyplot, save_figure
from csan.textio import normalize

__all__ = ["AttentionMap", "plot_attention", "sentence_attention"]


@dataclass
class AttentionMap:
    """One layer's weights for one sentence.

    ``weights``: (heads, queries, keys), or (heads, queries, heads, keys) split by key head.
    ``queries`` / ``keys``: the subword pieces on each axis. ``variant``: e.g. ``"csan1d (M=11)"``.

    Example (a 2D-CSAN layer's weights, split by key head: 2 heads, 3 pieces):
        >>> pieces = ["▁a", "▁dog", "</s>"]
        >>> amap = AttentionMap(torch.full((2, 3, 2, 3), 1 / 6), pieces, pieces, "encoder", 1,
        ...                     "csan2d (M=3, N=2)")
        >>> amap.weights.shape, amap.weights[0, 0].sum().item(), amap.queries[-1]
        (torch.Size([2, 3, 2, 3]), 1.0, '</s>')
    """

    weights: Tensor
    queries: list[str]
    keys: list[str]
    side: str
    layer: int
    variant: str


def _layers(model: Any, side: str) -> Any:
    name = {"encoder": "encoder_layers", "decoder": "decoder_layers"}.get(side)
    if name is None:
        raise CsanError(f"--side must be encoder or decoder, got {side!r}")
    layers = getattr(model, name, None)
    if layers is None:
        raise CsanError(f"this model ({type(model).__name__}) has no {side} self-attention layers")
    return layers


def _describe(module: Any) -> str:
    name = getattr(module, "name", type(module).__name__)
    parts = []
    if hasattr(module, "window"):
        parts.append(f"M={module.window}")
    if getattr(module, "head_window", 1) > 1:
        parts.append(f"N={module.head_window}")
    if isinstance(getattr(module, "context", None), str):
        parts.append(f"{module.context} context")
    return name + (f" ({', '.join(parts)})" if parts else "")


@torch.no_grad()
def sentence_attention(
    loaded: Any,
    sentence: str,
    *,
    layer: int = 0,
    side: str = "encoder",
    target: str | None = None,
    sum_key_heads: bool = False,
) -> AttentionMap:
    """The self-attention weights of ``layer`` on ``side`` for one sentence (a loaded model folder).

    Example (an untrained tiny model with 1D-CSAN in the encoder; each query's weights sum to 1):
        >>> import tempfile
        >>> from csan.toy import toy_model
        >>> from csan.decoding import load_model
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = toy_model(folder, ["model.encoder_attention=csan1d"])
        >>> amap = sentence_attention(load_model(folder), "a dog runs .", layer=1)
        >>> amap.queries  # the toy model's subword pieces
        ['▁a', '▁', 'do', 'g', '▁r', 'un', 's', '▁.', '</s>']
        >>> amap.side, amap.layer, amap.variant
        ('encoder', 1, 'csan1d (M=11)')
        >>> amap.weights.shape, torch.allclose(amap.weights.sum(-1), torch.ones(4, 9))
        (torch.Size([4, 9, 9]), True)
    """
    model, spm = loaded.model.eval(), SubwordModel.from_bytes(loaded.spm_bytes)
    layers = _layers(model, side)
    if not 0 <= layer < len(layers):
        raise CsanError(f"--layer {layer}: the {side} has layers 0-{len(layers) - 1}")
    module = layers[layer].self_attn
    device = next(model.parameters()).device
    limit = getattr(model, "max_positions", 10**9) - 1
    src_ids = spm.encode([normalize(sentence)])[0][:limit]
    if not src_ids:
        raise CsanError("--sentence is empty")
    src = torch.tensor([[*src_ids, model.eos_id]], device=device)
    captured: dict[str, Any] = {}

    def grab(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        captured["x"], captured["pad"] = args[0], args[1] if len(args) > 1 else None
        history = kwargs.get("history")  # the model appends to this list after the layer: copy it
        captured["history"] = None if history is None else list(history)

    handle = module.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        if side == "encoder":
            model.encode(src)
            pieces = [spm.id_to_piece(i) for i in src[0].tolist()]
            queries = keys = pieces
        else:
            if target is None:
                target = translate_lines(model, spm, [sentence], beam=1, device=device)[0]
            tgt_ids = spm.encode([normalize(target)])[0][:limit]
            tgt_in = torch.tensor([[model.bos_id, *tgt_ids]], device=device)
            model(src, tgt_in)
            queries = keys = [spm.id_to_piece(i) for i in tgt_in[0].tolist()]
    finally:
        handle.remove()
    kwargs: dict[str, Any] = {}
    if getattr(module, "head_window", 1) > 1 and not sum_key_heads:
        kwargs["per_key_head"] = True
    if module.uses_history:
        kwargs["history"] = captured["history"]
    try:
        weights = module.attention_weights(captured["x"], captured["pad"], **kwargs)
    except NotImplementedError as e:
        raise CsanError(f"{side} layer {layer}: {e}") from None
    return AttentionMap(weights[0].float().cpu(), queries, keys, side, layer, _describe(module))


def plot_attention(amap: AttentionMap, path: str | Path, *, max_cols: int = 4) -> Path:
    """Write a grid of heat maps (one per query head) with the pieces as tick labels.

    Example (5 heads, at most 3 panels a row: a 3 x 2 grid, the last panel left blank):
        >>> import struct, tempfile
        >>> pieces = ["▁a", "▁dog", "</s>"]
        >>> weights = torch.full((5, 3, 3), 1 / 3)
        >>> amap = AttentionMap(weights, pieces, pieces, "encoder", 0, "vanilla")
        >>> png = plot_attention(amap, Path(tempfile.mkdtemp()) / "attention.png", max_cols=3)
        >>> png.name, png.read_bytes()[1:4], struct.unpack(">II", png.read_bytes()[16:24])
        ('attention.png', b'PNG', (777, 446))
    """
    plt = pyplot()
    w = amap.weights
    heads, t_q = w.shape[0], w.shape[1]
    split = w.dim() == 4
    t_k = w.shape[-1]
    panel = w.reshape(heads, t_q, -1) if split else w  # split: key heads side by side
    cols = min(2 if split else max_cols, heads)  # split panels are H times wider
    rows = -(-heads // cols)
    # inches per cell: 0.22 (room for a tick label) unless the figure would exceed ~20 x 14 inches
    cell_x = min(0.22, 20.0 / (cols * panel.shape[-1]))
    cell_y = min(0.22, 14.0 / (rows * t_q))
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(cols * (cell_x * panel.shape[-1] + 1.5), rows * (cell_y * t_q + 1.2)),
        squeeze=False,
    )
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        ax.imshow(panel[h].numpy(), cmap="Blues", vmin=0.0, aspect="auto")
        ax.set_yticks(range(t_q), amap.queries, fontsize=6)
        if split:
            for g in range(1, heads):
                ax.axvline(g * t_k - 0.5, color="0.4", linewidth=0.6)
            ax.set_xticks([g * t_k + (t_k - 1) / 2 for g in range(heads)])
            ax.set_xticklabels([f"key head {g}" for g in range(heads)], fontsize=6)
        else:
            ax.set_xticks(range(t_k), amap.keys, rotation=90, fontsize=6)
        ax.set_title(f"head {h}", fontsize=8)
    fig.suptitle(f"{amap.side} layer {amap.layer}: {amap.variant}", fontsize=9)
    return save_figure(fig, Path(path))
