"""Attention, chapter 7: softmax, scaled dot-product attention with causal and padding masks, the split of
the features into heads, and the multi-head attention layer (with fewer K/V heads for GQA and MQA, chapter 8).

Conventions match torch.nn.functional.scaled_dot_product_attention: tensors are (..., T, d) with the head
axis at -3; a boolean mask means True = attend; the scores are scaled first and the mask or bias is added
after. Two deliberate differences from torch: ``is_causal`` is aligned to the lower-right corner (query i
sees keys up to i + k_len - q_len, as decoding with a KV cache needs; torch's ``causal_lower_right``), and
fewer K/V heads than query heads are expanded automatically, as torch's ``enable_gqa=True`` does.
``scaled_dot_product_attention`` is the readable algorithm; ``fast_attention`` gives the same output by
faster paths, tested against it. Additive (Bahdanau) scores: ``lmbook.additive_attention``.

Left out: dropout on the weights, positions (chapter 12), KV caching (chapter 11), fused kernels, and the
efficient variants (sparse masks, linear and flash attention): ``lmbook.efficient_attention``, chapter 8.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import validate

__all__ = ["softmax", "causal_mask", "padding_mask", "repeat_kv", "scaled_dot_product_attention", "fast_attention",
           "split_heads", "merge_heads", "MultiHeadAttention"]


def softmax(x: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """softmax(x / tau)_i = exp((x_i - m) / tau) / sum_j exp((x_j - m) / tau), with m = max_j x_j.

    x: a float tensor of any shape, normalised along ``dim``; an entry of -inf gets probability 0.
    Subtracting the maximum changes nothing mathematically and keeps exp from overflowing. A larger
    temperature tau gives a *flatter* distribution (tau -> inf: uniform); a smaller one a sharper one
    (tau -> 0: one-hot on the maximum). A slice that is all -inf (every position masked) gives zeros,
    not NaN. Chapter 7.
    """
    _check_softmax(x, dim, temperature)
    z = x if temperature == 1 else x / temperature
    m = z.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # an all -inf slice: exp(-inf) = 0, no NaN
    e = torch.exp(z - m)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def causal_mask(q_len: int, k_len: int, device=None) -> torch.Tensor:
    """Boolean (q_len, k_len) mask, True = attend: query i sees key j iff j <= i + (k_len - q_len).

    Lower-right aligned: the last query sees every key. With q_len == k_len this is the usual lower
    triangle; with q_len < k_len (new tokens after a cache) the queries are the *last* positions. Chapter 7.
    """
    _check_lengths(device, q_len=q_len, k_len=k_len)
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=k_len - q_len)


def padding_mask(lengths: torch.Tensor, k_len: int) -> torch.Tensor:
    """Key-padding mask for right-padded sequences, True = a real token: (B,) lengths -> (B, 1, 1, k_len).

    Sequence b occupies positions 0..lengths[b]-1 and padding fills the rest; the mask broadcasts over
    the heads and the queries, so no query attends to a padded key. Combine it with ``is_causal``. Chapter 7.
    """
    _check_padding(lengths, k_len)
    real = torch.arange(k_len, device=lengths.device) < lengths[:, None]  # (B, k_len)
    return real[:, None, None, :]  # (B, 1, 1, k_len): one row for every head and query


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Grouped-query sharing: (..., H_kv, T, d) -> (..., H_kv * n_rep, T, d), each K/V head repeated
    n_rep times in a row, so query head h uses K/V head h // n_rep (torch's enable_gqa convention). Chapter 8."""
    _check_repeat_kv(x, n_rep)
    if n_rep == 1:
        return x
    *lead, h_kv, T, d = x.shape
    return x.unsqueeze(-3).expand(*lead, h_kv, n_rep, T, d).reshape(*lead, h_kv * n_rep, T, d)  # one copy


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False, scale=None, return_weights=False):
    """Attention(Q, K, V) = softmax(Q K^T * scale + M) V, with scale = 1/sqrt(d) by default. Chapter 7.

    q (..., H, T_q, d), k (..., H_kv, T_k, d), v (..., H_kv, T_k, d_v) -> (..., H, T_q, d_v). If H_kv < H
    (GQA, MQA), query head h reads K/V head h // (H / H_kv), as torch's ``enable_gqa=True``.
    mask: bool (True = attend) or float (added to the scores), broadcastable to (..., H, T_q, T_k);
    is_causal also hides the keys after each query (``causal_mask``, lower-right aligned). A query
    that may attend to nothing gets zeros, as F.scaled_dot_product_attention does on the CPU
    (nn.MultiheadAttention and some GPU kernels give NaN). return_weights: also return the weights.
    """
    n_rep = _check_attention(q, k, v, mask, is_causal, scale, return_weights)  # query heads per K/V head
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (..., H, T_k, d) and (..., H, T_k, d_v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., H, T_q, T_k); scaling q first is cheaper
    if is_causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask.to(q.dtype)
    weights = softmax(scores, dim=-1)  # (..., H, T_q, T_k), each row sums to 1 (or is all 0)
    out = weights @ v  # (..., H, T_q, d_v)
    return (out, weights) if return_weights else out


def fast_attention(q, k, v, mask=None, is_causal=False, scale=None) -> torch.Tensor:
    """The output of scaled_dot_product_attention (same arguments and shapes, no weights) by faster paths for
    models that run without autograd: ``lmbook.attention_fast``, tested against the readable one. Chapter 7."""
    from .attention_fast import fast_attention as by_fast_paths  # imported here: that module imports this one

    return by_fast_paths(q, k, v, mask, is_causal, scale)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, n_heads * d_k) -> (B, n_heads, T, d_k): head h owns features h*d_k:(h+1)*d_k. Chapter 7."""
    _check_split_heads(x, n_heads)
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_k)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_k) -> (B, T, H * d_k): the inverse of split_heads (concatenate the heads). Chapter 7."""
    _check_merge_heads(x)
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)  # (B, T, H * d_k)


class MultiHeadAttention(nn.Module):
    """MultiHead(X, Z) = Concat(head_1..head_H) W_O, head_h = Attention(X W_Q^h, Z W_K^g(h), Z W_V^g(h)).

    n_kv_heads = n_heads is standard multi-head attention, 1 is multi-query (MQA), anything in between
    that divides n_heads is grouped-query attention (GQA): heads g*r..(g+1)*r-1 share K/V head g.
    Weights follow nn.Linear (y = x W^T + b) and Llama's names q_proj, k_proj, v_proj, o_proj. Chapter 7.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        _check_layer(d_model, n_heads, n_kv_heads, bias)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        self.q_proj = nn.Linear(d_model, n_heads * self.d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # smaller for GQA/MQA
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.o_proj = nn.Linear(n_heads * self.d_k, d_model, bias=bias)

    def forward(self, x, kv=None, mask=None, is_causal=False, return_weights=False):
        """x (B, T_q, d_model), kv (B, T_k, d_model) for cross-attention (default: x) -> (B, T_q, d_model),
        and the weights (B, H, T_q, T_k) if return_weights. mask, is_causal: as scaled_dot_product_attention."""
        kv = x if kv is None else kv  # self-attention unless a second sequence is given
        _check_forward(self, x, kv, mask, is_causal, return_weights)
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T_q, d_k)
        k = split_heads(self.k_proj(kv), self.n_kv_heads)  # (B, H_kv, T_k, d_k)
        v = split_heads(self.v_proj(kv), self.n_kv_heads)  # (B, H_kv, T_k, d_k)
        out = scaled_dot_product_attention(q, k, v, mask, is_causal, return_weights=return_weights)
        if return_weights:
            out, weights = out  # weights (B, H, T_q, T_k)
        out = self.o_proj(merge_heads(out))  # (B, T_q, d_model)
        return (out, weights) if return_weights else out


# ----- checks: each raises a TypeError or ValueError naming the argument ----------------------------------

def _check_softmax(x, dim, temperature) -> None:
    _check_finite("x", x, neg_inf=True)  # an entry of -inf is masked: probability 0
    validate.integer("dim", dim, low=-max(x.dim(), 1), high=max(x.dim(), 1) - 1)
    if x.dim() and x.shape[dim] == 0:
        raise ValueError(f"x must have at least one entry along dim={dim}, got shape {tuple(x.shape)}")
    validate.number("temperature", temperature, low=0, low_open=True)


def _check_finite(name, t, neg_inf=False, ndim=None) -> None:
    """A float tensor with no NaN or inf (-inf allowed if neg_inf), by one reduction with no temporary as large as t."""
    validate.tensor(name, t, ndim=ndim, finite=False)
    lo, hi = torch.aminmax(t) if t.numel() else (t.new_zeros(()),) * 2  # a NaN makes both NaN
    if (hi.isnan() | (hi == float("inf"))) if neg_inf else ~(lo.isfinite() & hi.isfinite()):
        raise ValueError(f"{name} must hold no NaN or {'+inf' if neg_inf else 'inf'}, but it does")


def _check_lengths(device, **lengths) -> None:
    """Lengths, a window or a stride: each an int >= 1; device: None, a torch.device or its name."""
    for name, value in lengths.items():
        validate.integer(name, value)
    try:
        torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be a torch.device or its name, such as 'cpu', got {device!r}") from None


def _check_padding(lengths, k_len) -> None:
    validate.integer("k_len", k_len)
    validate.tensor("lengths", lengths, ndim=1, kind="int")
    if lengths.numel() and (lengths.min() < 0 or lengths.max() > k_len):
        raise ValueError(f"lengths must lie in [0, k_len={k_len}], got {lengths.tolist()}")


def _check_repeat_kv(x, n_rep) -> None:
    validate.integer("n_rep", n_rep)
    _check_finite("x", x)
    if x.dim() < (3 if n_rep > 1 else 2) or x.shape[-1] == 0:  # nothing to repeat needs no head axis
        raise ValueError(f"x must have shape (..., H_kv, T, d) with d >= 1, got {tuple(x.shape)}")


def _check_qkv(q, k, v) -> int:
    """Check the shapes of q (..., Hq, Tq, d), k (..., Hkv, Tk, d), v (..., Hkv, Tk, dv); return how many
    query heads share each K/V head (1 when nothing needs expanding). Also used by efficient_attention."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_finite(name, t)
        if t.dim() < 2 or t.shape[-1] == 0:
            raise ValueError(f"{name} must have shape (..., T, d) with d >= 1, got {tuple(t.shape)}")
        if t.dtype != q.dtype:
            raise TypeError(f"{name} must have the dtype of q ({q.dtype}), got {t.dtype}")
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same head dim (last axis): {shapes}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k and v must agree in every axis but the last (same length and heads): {shapes}")
    if q.dim() != k.dim():
        raise ValueError(f"q, k and v must have the same number of axes: {shapes}")
    n_rep = 1
    if q.dim() >= 3 and q.shape[-3] != k.shape[-3] and k.shape[-3] != 1:
        if q.shape[-3] % k.shape[-3]:
            raise ValueError(f"the number of K/V heads (axis -3) of k and v must divide the query heads: {shapes}")
        n_rep = q.shape[-3] // k.shape[-3]
    expanded_k = k.shape[:-3] + (k.shape[-3] * n_rep,) if n_rep > 1 else k.shape[:-2]
    try:
        torch.broadcast_shapes(q.shape[:-2], expanded_k)
    except RuntimeError:
        raise ValueError(f"the leading (batch, head) axes of q and k do not broadcast: {shapes}") from None
    return n_rep


def _check_attention(q, k, v, mask, is_causal, scale, return_weights) -> int:
    n_rep = _check_qkv(q, k, v)
    if mask is not None:
        k_lead = k.shape[:-3] + (k.shape[-3] * n_rep,) if n_rep > 1 else k.shape[:-2]  # K/V heads expanded
        scores = (*torch.broadcast_shapes(q.shape[:-2], k_lead), q.shape[-2], k.shape[-2])
        _check_mask(mask, scores)
    validate.boolean("is_causal", is_causal)
    if scale is not None:
        validate.number("scale", scale, low=0, low_open=True)
    validate.boolean("return_weights", return_weights)
    return n_rep


def _check_mask(mask, scores: tuple, grow: bool = True) -> None:
    """A bool (True = attend) or float (added) mask that broadcasts against the scores' shape (..., T_q, T_k),
    adding leading axes only if ``grow``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a tensor (bool: True = attend, or float: added), got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"mask must be bool (True = attend) or float (added), got dtype {mask.dtype}")
    try:
        both = torch.broadcast_shapes(mask.shape, scores)
        fits = both[-2:] == scores[-2:] and (grow or both == scores)
    except RuntimeError:
        fits = False
    if not fits:
        want = f"(..., q_len={scores[-2]}, k_len={scores[-1]}) with (...) = {tuple(scores[:-2])}"
        raise ValueError(f"mask must broadcast to {want}, got shape {tuple(mask.shape)}")
    if mask.is_floating_point():
        _check_finite("mask", mask, neg_inf=True)  # a float mask is added to the scores; -inf hides a key


def _check_split_heads(x, n_heads) -> None:
    _check_finite("x", x, ndim=3)
    validate.integer("n_heads", n_heads)
    if x.shape[-1] == 0 or x.shape[-1] % n_heads:
        raise ValueError(f"the feature size of x {tuple(x.shape)} must be a positive multiple of "
                         f"n_heads={n_heads}")


def _check_merge_heads(x) -> None:
    _check_finite("x", x, ndim=4)
    if x.shape[-1] == 0:
        raise ValueError(f"x must have shape (B, H, T, d_k) with d_k >= 1, got {tuple(x.shape)}")


def _check_layer(d_model, n_heads, n_kv_heads, bias) -> None:
    for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
        validate.integer(name, value)
    if d_model % n_heads:
        raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
    validate.boolean("bias", bias)


def _check_forward(layer, x, kv, mask, is_causal, return_weights) -> None:
    for name, t in (("x", x), ("kv", kv)):
        _check_finite(name, t)
        if t.dim() != 3 or t.shape[-1] != layer.d_model or t.shape[0] != x.shape[0]:
            raise ValueError(f"{name} must have shape (B, T, d_model={layer.d_model}) with the batch size of x, "
                             f"got {tuple(t.shape)}")
    validate.boolean("is_causal", is_causal)
    validate.boolean("return_weights", return_weights)
    if mask is not None:
        _check_mask(mask, (x.shape[0], layer.n_heads, x.shape[1], kv.shape[1]), grow=False)
