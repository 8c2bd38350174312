"""Slow, direct implementations of every attention variant, written from SPEC.md with Python loops.

They share no code with ``csan.attention`` or ``csan.kernels``: masks are decided per (query, key) pair by
the SPEC's conditions, softmaxes run over explicit lists of keys. Each ``slow_<variant>(module, x, ...)``
reads the module's parameters and returns (batch, time, d_model); rows of padding queries are unspecified
by SPEC, so callers compare real positions only.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def linear(x: Tensor, layer: torch.nn.Linear) -> Tensor:
    """x W^T + b from a module's Linear parameters."""
    out = x @ layer.weight.T
    return out if layer.bias is None else out + layer.bias


def attend(q: Tensor, keys: list[Tensor], values: list[Tensor], biases: list[Tensor] | None = None):
    """One query row: softmax over the listed keys only; zeros when there is none."""
    if not keys:
        return torch.zeros_like(q)
    logits = torch.stack([q @ k for k in keys]) / math.sqrt(q.numel())
    if biases is not None:
        logits = logits + torch.stack(biases)
    weights = torch.softmax(logits, dim=0)
    return sum(w * v for w, v in zip(weights, values))


def is_pad(mask: Tensor | None, b: int, j: int) -> bool:
    return mask is not None and bool(mask[b, j])


def slow_mha(q, k, v, heads, allowed, *, bias=None, extra_value=None):
    """Multi-head attention on full-width q, k, v (batch, time, d_model) by loops.

    ``allowed(b, h, i, j)``: may query i of head h read key j; ``bias(b, h, i, j)`` a logit bias;
    ``extra_value(h, i, j)`` a vector added to v_j. Returns (batch, time_q, d_model), heads concatenated.
    """
    batch, t_q, d = q.shape
    t_k = k.size(1)
    dh = d // heads
    rows = []
    for b in range(batch):
        for i in range(t_q):
            parts = []
            for h in range(heads):
                sl = slice(h * dh, (h + 1) * dh)
                js = [j for j in range(t_k) if allowed(b, h, i, j)]
                vals = [
                    v[b, j, sl] + (0 if extra_value is None else extra_value(h, i, j)) for j in js
                ]
                biases = None if bias is None else [bias(b, h, i, j) for j in js]
                parts.append(attend(q[b, i, sl], [k[b, j, sl] for j in js], vals, biases))
            rows.append(torch.cat(parts))
    return torch.stack(rows).view(batch, t_q, d)


def split_qkv(module, x):
    w = module.qkv
    return linear(x, w).chunk(3, dim=-1)


# ----------------------------------------------------------------------------- local (CSAN)


def direct_local_attention(
    q, k, v, *, window, head_window=1, key_padding_mask=None, causal=False, head_boundary="wrap"
):
    """SPEC 1D/2D-CSAN on (batch, heads, time, d_h), one explicit slot list per (batch, head, query)."""
    batch, heads, t_q, d_h = q.shape
    t_k = k.size(2)
    m, n = (window - 1) // 2, (head_window - 1) // 2
    rows = []
    for b in range(batch):
        for h in range(heads):
            for r in range(t_q):
                i = t_k - t_q + r  # queries are the last t_q positions
                slots = []
                for offset in range(-n, n + 1):
                    g = h + offset
                    if head_boundary == "wrap":
                        g %= heads
                    elif not 0 <= g < heads:
                        continue
                    for j in range(t_k):
                        inside = (i - window < j <= i) if causal else abs(i - j) <= m
                        if inside and not is_pad(key_padding_mask, b, j):
                            slots.append((g, j))
                gs = torch.tensor([g for g, _ in slots], dtype=torch.long)
                js = torch.tensor([j for _, j in slots], dtype=torch.long)
                keys, vals = list(k[b, gs, js]), list(v[b, gs, js])
                rows.append(attend(q[b, h, r], keys, vals))
    return torch.stack(rows).view(batch, heads, t_q, d_h)


def slow_csan(module, x, mask=None, history=None):
    q, k, v = split_qkv(module, x)
    heads = module.heads

    def to_heads(z):
        return z.view(z.size(0), z.size(1), heads, -1).transpose(1, 2)

    out = direct_local_attention(
        to_heads(q),
        to_heads(k),
        to_heads(v),
        window=module.window,
        head_window=module.head_window,
        key_padding_mask=mask,
        causal=module.causal,
        head_boundary=module.head_boundary,
    )
    return linear(out.transpose(1, 2).reshape(x.shape), module.out_proj)


def causal_or_padding(module, mask):
    def allowed(b, h, i, j):
        return not is_pad(mask, b, j) and (j <= i or not module.causal)

    return allowed


def slow_vanilla(module, x, mask=None, history=None):
    q, k, v = split_qkv(module, x)
    out = slow_mha(q, k, v, module.heads, causal_or_padding(module, mask))
    return linear(out, module.out_proj)


# ----------------------------------------------------------------------------- baselines


def slow_rel_pos(module, x, mask=None, history=None):
    q, k, v = split_qkv(module, x)
    big_k = module.max_relative
    dh = module.head_dim

    def rel(i, j):
        return max(-big_k, min(big_k, j - i)) + big_k

    def bias(b, h, i, j):  # q_i . aK_ij / sqrt(d_h)
        return q[b, i, h * dh : (h + 1) * dh] @ module.rel_k[rel(i, j)] / math.sqrt(dh)

    out = slow_mha(
        q,
        k,
        v,
        module.heads,
        causal_or_padding(module, mask),
        bias=bias,
        extra_value=lambda h, i, j: module.rel_v[rel(i, j)],
    )
    return linear(out, module.out_proj)


def slow_localness(module, x, mask=None, history=None):
    q, k, v = split_qkv(module, x)
    batch, t, _ = x.shape
    centre, sigma = {}, {}
    for b in range(batch):
        length = t - (0 if mask is None else int(mask[b].sum()))
        for i in range(t):
            hidden = torch.tanh(module.w_p.weight @ q[b, i])
            for h in range(module.heads):
                if module.u_p is None:
                    centre[b, h, i] = torch.tensor(float(i), dtype=x.dtype)
                else:
                    centre[b, h, i] = (length - 1) * torch.sigmoid(module.u_p.weight[h] @ hidden)
                if module.u_d is None:
                    width = torch.tensor(module.fixed_window, dtype=x.dtype)
                else:
                    width = length * torch.sigmoid(module.u_d.weight[h] @ hidden)
                sigma[b, h, i] = width / 2

    def bias(b, h, i, j):
        return -((j - centre[b, h, i]) ** 2) / (2 * sigma[b, h, i] ** 2)

    out = slow_mha(q, k, v, module.heads, causal_or_padding(module, mask), bias=bias)
    return linear(out, module.out_proj)


def slow_bi_direct(module, x, mask=None, history=None):
    q, k, v = split_qkv(module, x)
    half = module.heads // 2

    def allowed(b, h, i, j):
        ordered = j <= i if h < half else j >= i
        return ordered and not is_pad(mask, b, j)

    return linear(slow_mha(q, k, v, module.heads, allowed), module.out_proj)


def slow_block(module, x, mask=None, history=None):
    q, k, v = split_qkv(module, x)
    batch, t, d = x.shape
    size = module.block_size

    def same_block(b, h, i, j):
        return i // size == j // size and not is_pad(mask, b, j)

    intra = slow_mha(q, k, v, module.heads, same_block)  # (batch, t, d)
    n_blocks = -(-t // size)
    outputs = torch.zeros_like(x)
    for b in range(batch):
        members = [
            [i for i in range(c * size, min(t, (c + 1) * size)) if not is_pad(mask, b, i)]
            for c in range(n_blocks)
        ]
        real_blocks = [c for c in range(n_blocks) if members[c]]
        summary = torch.stack(
            [
                torch.stack([intra[b, i] for i in members[c]]).mean(0)
                if members[c]
                else torch.zeros(d, dtype=x.dtype)
                for c in range(n_blocks)
            ]
        )
        qs, ks, vs = linear(summary, module.inter_qkv).chunk(3, dim=-1)

        def among_blocks(_b, _h, _i, c, real_blocks=real_blocks):
            return c in real_blocks

        inter = slow_mha(qs[None], ks[None], vs[None], module.heads, among_blocks)[0]
        for i in range(t):
            o = inter[i // size]
            gate = torch.sigmoid(linear(torch.cat([intra[b, i], o]), module.gate))
            outputs[b, i] = gate * intra[b, i] + (1 - gate) * o
    return linear(outputs, module.out_proj)


def layer_norm(x, norm):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def conv_at(x, weight, bias, i, dilation, left):
    """One output position of a 1-D convolution: sum_t W[:, :, t] x[i - left + dilation * t] (zeros outside)."""
    out = bias.clone() if bias is not None else torch.zeros(weight.size(0), dtype=x.dtype)
    for tap in range(weight.size(2)):
        src = i - left + dilation * tap
        if 0 <= src < x.size(0):
            out = out + weight[:, :, tap] @ x[src]
    return out


def slow_cnn(module, x, mask=None, history=None):
    batch, t, _ = x.shape
    c = x
    for norm, conv in zip(module.norms, module.convs):
        rows = []
        for b in range(batch):
            h = torch.stack(
                [
                    torch.zeros_like(c[b, i]) if is_pad(mask, b, i) else layer_norm(c[b, i], norm)
                    for i in range(t)
                ]
            )
            if module.separable:  # depthwise: each channel its own filter, then a pointwise product
                depth = conv.depthwise[:, 0, :]  # (channels, width)
                width = depth.size(1)
                for i in range(t):
                    u = torch.zeros_like(c[b, i])
                    for tap in range(width):
                        src = i - width // 2 + tap
                        if 0 <= src < t:
                            u = u + depth[:, tap] * h[src]
                    rows.append(c[b, i] + torch.relu(linear(u, conv.pointwise)))
                continue
            width = conv.weight.size(2)
            for i in range(t):
                delta = conv_at(h, conv.weight, conv.bias, i, 1, width // 2)
                rows.append(c[b, i] + torch.relu(delta))
        c = torch.stack(rows).view_as(x)
    q, k, v = split_qkv(module, c)
    y = linear(slow_mha(q, k, v, module.heads, causal_or_padding(module, mask)), module.out_proj)
    return y + c - x


def slow_context(module, x, mask=None, history=None):
    batch, t, _ = x.shape

    def mean_at(h, b, i):  # mean over real positions (<= i when causal)
        js = [j for j in range(t) if not is_pad(mask, b, j) and (j <= i or not module.causal)]
        return torch.stack([h[b, j] for j in js]).mean(0) if js else torch.zeros_like(h[b, 0])

    def context_at(part, b, i):
        if part == "global":
            return mean_at(x, b, i)
        if part == "deep":
            return torch.cat([h[b, i] for h in history])
        return torch.cat([mean_at(h, b, i) for h in history])  # deep_global

    q, k, v = split_qkv(module, x)
    q_hat, k_hat = torch.zeros_like(q), torch.zeros_like(k)
    for b in range(batch):
        for i in range(t):
            cq = sum(module.u_q[p].weight @ context_at(p, b, i) for p in module.parts)
            ck = sum(module.u_k[p].weight @ context_at(p, b, i) for p in module.parts)
            lq = torch.sigmoid(module.gate_q_h.weight[0] @ q[b, i] + module.gate_q_c.weight[0] @ cq)
            lk = torch.sigmoid(module.gate_k_h.weight[0] @ k[b, i] + module.gate_k_c.weight[0] @ ck)
            q_hat[b, i] = (1 - lq) * q[b, i] + lq * cq
            k_hat[b, i] = (1 - lk) * k[b, i] + lk * ck
    out = slow_mha(q_hat, k_hat, v, module.heads, causal_or_padding(module, mask))
    return linear(out, module.out_proj)


def slow_inception(conv_module, x, mask, *, causal):
    """Inception convolution (batch, time, d) by loops: per spec, per position, per tap."""
    batch, t, _ = x.shape
    rows = []
    for b in range(batch):
        xb = torch.stack(
            [torch.zeros_like(x[b, i]) if is_pad(mask, b, i) else x[b, i] for i in range(t)]
        )
        for i in range(t):
            parts = []
            for conv in conv_module.convs:
                width, dilation = conv.weight.size(2), conv.dilation[0]
                span = dilation * (width - 1)
                left = span if causal else span // 2
                parts.append(conv_at(xb, conv.weight, conv.bias, i, dilation, left))
            rows.append(torch.cat(parts))
    return torch.stack(rows).view(batch, t, -1)


def slow_conv_qkv(module, x, mask=None, history=None):
    causal = module.causal
    q, k, v = (
        slow_inception(c, x, mask, causal=causal)
        for c in (module.q_conv, module.k_conv, module.v_conv)
    )
    return linear(slow_mha(q, k, v, module.heads, causal_or_padding(module, mask)), module.out_proj)


def slow_conv_qkv_cross(module, x, memory, memory_mask):
    q = slow_inception(module.q_conv, x, None, causal=True)
    k = slow_inception(module.k_conv, memory, memory_mask, causal=False)
    v = slow_inception(module.v_conv, memory, memory_mask, causal=False)

    def allowed(b, h, i, j):
        return not is_pad(memory_mask, b, j)

    return linear(slow_mha(q, k, v, module.heads, allowed), module.out_proj)


SLOW = {
    "vanilla": slow_vanilla,
    "csan1d": slow_csan,
    "csan2d": slow_csan,
    "rel_pos": slow_rel_pos,
    "neighbor": slow_localness,
    "local_hard": slow_localness,
    "local_soft": slow_localness,
    "block": slow_block,
    "cnn": slow_cnn,
    "bi_direct": slow_bi_direct,
    "context": slow_context,
    "conv_qkv": slow_conv_qkv,
}
