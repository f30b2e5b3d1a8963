"""Attention: softmax, scaled dot-product attention with masks, multi-head (MHA/GQA/MQA) attention,
and three ways around the T x T matrix: sparse masks, linear attention and tiled "flash" attention.

Chapter 7. Conventions match torch.nn.functional.scaled_dot_product_attention:
tensors are (..., T, d) with the head dimension at -3, and a boolean mask means True = attend.

Two deliberate differences from torch:
- ``is_causal`` is aligned to the lower-right corner (query i is the last of the queries and sees
  keys up to i + k_len - q_len), which is what decoding with a KV cache needs. torch's ``is_causal``
  is aligned top-left; torch's ``causal_lower_right`` mask is the one that matches ours.
- Grouped-query inputs (fewer K/V heads than query heads) are expanded automatically, as torch
  does with ``enable_gqa=True``: query head h reads K/V head h // (H_q / H_kv).

Large calls without autograd take a faster path (tiles of query rows, one head at a time) that is
tested against the readable one. ``peak_memory`` counts the bytes of tensors alive at once, for the
chapter's memory measurements.

Left out: dropout on the weights, rotary/ALiBi positions (chapter 12), KV caching (chapter 11), and
fused kernels; ``flash_attention`` shows the algorithm of FlashAttention, not its speed.
"""

from __future__ import annotations

import itertools
import math
import weakref
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "softmax", "scaled_dot_product_attention", "causal_mask", "sliding_window_mask", "strided_mask",
    "repeat_kv", "split_heads", "merge_heads", "MultiHeadAttention", "linear_attention",
    "flash_attention", "peak_memory",
]


def softmax(x: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """softmax(x / tau)_i = exp((x_i - m) / tau) / sum_j exp((x_j - m) / tau), with m = max_j x_j.

    Subtracting the maximum changes nothing mathematically and keeps exp from overflowing.
    A larger temperature tau gives a *flatter* distribution (tau -> inf: uniform); a smaller one a
    sharper one (tau -> 0: one-hot on the maximum). A slice that is all -inf (every position masked)
    gives zeros, not NaN. Chapter 7.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = f"{type(x).__name__} {getattr(x, 'dtype', '')}"
        raise TypeError(f"x must be a floating-point tensor, got {got}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
    z = x if temperature == 1 else x / temperature
    m = z.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # an all -inf slice: exp(-inf) = 0, no NaN
    e = torch.exp(z - m)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def causal_mask(q_len: int, k_len: int, device=None) -> torch.Tensor:
    """Boolean (q_len, k_len) mask, True = attend: query i sees key j iff j <= i + (k_len - q_len).

    Lower-right aligned: the last query sees every key. With q_len == k_len this is the usual lower
    triangle; with q_len < k_len (new tokens after a cache) the queries are the *last* positions.
    """
    _check_lengths(q_len=q_len, k_len=k_len)
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=k_len - q_len)


def sliding_window_mask(q_len: int, k_len: int, window: int, device=None) -> torch.Tensor:
    """Causal mask that also forgets the distant past: query i sees the last `window` keys up to and
    including its own position, i.e. i' - window < j <= i' with i' = i + k_len - q_len. (q_len, k_len).
    """
    _check_lengths(q_len=q_len, k_len=k_len, window=window)
    band = torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(diagonal=k_len - q_len - window + 1)
    return causal_mask(q_len, k_len, device) & band


def strided_mask(q_len: int, k_len: int, stride: int, device=None) -> torch.Tensor:
    """The strided pattern of the Sparse Transformer (Child et al., 2019), causal and lower-right aligned:
    query i sees key j <= i' if it is among the last `stride` keys (i' - j < stride) or if
    (i' - j) is a multiple of `stride`. Two such layers connect every pair of positions.
    """
    _check_lengths(q_len=q_len, k_len=k_len, stride=stride)
    i = torch.arange(q_len, device=device)[:, None] + (k_len - q_len)
    j = torch.arange(k_len, device=device)[None, :]
    dist = i - j
    return (dist >= 0) & ((dist < stride) | (dist % stride == 0))


def _check_lengths(**lengths) -> None:
    for name, value in lengths.items():
        least = 0 if name.endswith("len") else 1  # lengths may be 0, window and stride not
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Grouped-query sharing: (..., H_kv, T, d) -> (..., H_kv * n_rep, T, d), each K/V head repeated
    n_rep times in a row, so query head h uses K/V head h // n_rep (torch's enable_gqa convention)."""
    if n_rep == 1:
        return x
    *lead, h_kv, T, d = x.shape
    return x.unsqueeze(-3).expand(*lead, h_kv, n_rep, T, d).reshape(*lead, h_kv * n_rep, T, d)  # one copy


def _gqa_groups(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> int:
    """Check the shapes of q (..., Hq, Tq, d), k (..., Hkv, Tk, d), v (..., Hkv, Tk, dv); return how many
    query heads share each K/V head (1 when nothing needs expanding)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            got = f"{type(t).__name__} {getattr(t, 'dtype', '')}"
            raise TypeError(f"{name} must be a floating-point tensor, got {got}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, d), got {tuple(t.shape)}")
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
            raise ValueError(f"the number of K/V heads (axis -3) must divide the query heads: {shapes}")
        n_rep = q.shape[-3] // k.shape[-3]
    expanded_k = k.shape[:-3] + (k.shape[-3] * n_rep,) if n_rep > 1 else k.shape[:-2]
    try:
        torch.broadcast_shapes(q.shape[:-2], expanded_k)
    except RuntimeError:
        raise ValueError(f"the leading (batch, head) axes of q and k do not broadcast: {shapes}") from None
    return n_rep


def _expand_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Check the shapes (see _gqa_groups) and repeat each K/V head for the query heads that share it."""
    n_rep = _gqa_groups(q, k, v)
    return repeat_kv(k, n_rep), repeat_kv(v, n_rep)


def _check_mask(mask: torch.Tensor, q_len: int, k_len: int) -> None:
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a tensor (bool: True = attend, or float), got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"mask must be bool (True = attend) or float (added), got dtype {mask.dtype}")
    ok = mask.dim() >= 1 and mask.shape[-1] in (1, k_len) and (mask.dim() < 2 or mask.shape[-2] in (1, q_len))
    if not ok:
        want = f"(..., q_len={q_len}, k_len={k_len})"
        raise ValueError(f"mask must broadcast to {want}, got shape {tuple(mask.shape)}")


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False, scale=None, return_weights=False):
    """Attention(Q, K, V) = softmax(Q K^T * scale + M) V, with scale = 1/sqrt(d) by default.

    Shapes: q (..., H, T_q, d), k (..., H_kv, T_k, d), v (..., H_kv, T_k, d_v) -> (..., H, T_q, d_v).
    If H_kv < H (grouped-query or multi-query attention), K and V are expanded with ``repeat_kv``:
    query head h reads K/V head h // (H / H_kv), as torch's ``enable_gqa=True``. Callers need not expand.

    mask: bool (True = attend, like torch) or float (added to the scores, e.g. 0 / -inf), broadcastable
    to (..., T_q, T_k). is_causal adds ``causal_mask(T_q, T_k)`` (lower-right aligned); it may be
    combined with ``mask``. A query that may attend to nothing gets an all-zero output row (and weights),
    not NaN, as torch does. return_weights=True returns (output, weights (..., H, T_q, T_k)). Chapter 7.
    """
    n_rep = _gqa_groups(q, k, v)  # query heads per K/V head
    q_len, k_len = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if q_len == 1 and mask is None and not return_weights and not _needs_grad(q, k, v):
        return _decode_step(q, k, v, scale, n_rep)  # a cached decoding step (chapter 11)
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    allowed, bias = None, None  # boolean mask (True = attend) and additive mask
    if mask is not None:
        _check_mask(mask, q_len, k_len)
        allowed, bias = (mask, None) if mask.dtype == torch.bool else (None, mask.to(q.dtype))
    if _use_fast_path(q, k, v, return_weights):
        return _attention_by_slices(q, k, v, allowed, bias, scale, is_causal)
    if is_causal:
        causal = causal_mask(q_len, k_len, device=q.device)
        allowed = causal if allowed is None else allowed & causal

    scores = (q * scale) @ k.transpose(-2, -1)  # (..., T_q, T_k); scaling q first is cheaper
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    if bias is not None:
        scores = scores + bias
    weights = softmax(scores, dim=-1)  # (..., T_q, T_k), each row sums to 1 (or is all 0)
    out = weights @ v  # (..., T_q, d_v)
    return (out, weights) if return_weights else out


def _decode_step(q, k, v, scale, n_rep):
    """One query per head, no mask (causal or not, the one query may see every key), no autograd: a
    decoding step with a KV cache. The n_rep query heads that share a K/V head become n_rep rows of one
    product with it, so the cache is read in place instead of copied n_rep times, and torch's fused softmax
    replaces the readable steps. Tested against them."""
    if n_rep == 1:
        return torch.softmax((q * scale) @ k.transpose(-2, -1), dim=-1) @ v
    *lead, H, _, d = q.shape
    grouped = q.reshape(*lead, H // n_rep, n_rep, d)  # (..., H_kv, n_rep, d): head h reads K/V head h // n_rep
    weights = torch.softmax((grouped * scale) @ k.transpose(-2, -1), dim=-1)  # (..., H_kv, n_rep, T_k)
    return (weights @ v).reshape(*lead, H, 1, v.shape[-1])  # (..., H, 1, d_v)


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _use_fast_path(q, k, v, return_weights) -> bool:
    """Large inference-only calls go slice by slice (_attention_by_slices); the rest reads as above."""
    n_slices = math.prod(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]))
    return not return_weights and not _needs_grad(q, k, v) and n_slices > 1 and q.shape[-2] * k.shape[-2] >= 2**16


def _attention_by_slices(q, k, v, allowed, bias, scale, is_causal):
    """The same computation, one (batch, head) slice and one tile of query rows at a time, for CPU speed.

    Each tile holds at most 2^20 scores (4 MB in float32) in one buffer that every tile reuses, computed
    and normalised in place; the readable path allocates several H x T_q x T_k temporaries, and on CPU
    fresh allocations cost more than the arithmetic. With is_causal, keys after a tile's last query are
    not scored at all. torch's fused softmax kernel replaces our four-pass one. Tested against the
    readable path; used only without autograd and when the weights are not returned.
    """
    q_len, k_len = q.shape[-2], k.shape[-2]
    offset = k_len - q_len  # lower-right causal alignment: query i sits at key position i + offset
    shapes = [q.shape[:-2], k.shape[:-2]] + [m.shape[:-2] for m in (allowed, bias) if m is not None]
    lead = torch.broadcast_shapes(*shapes)
    blocked = None if allowed is None else (~allowed).expand(*lead, q_len, k_len)  # views, no copies
    bias = None if bias is None else bias.expand(*lead, q_len, k_len)
    q, k, v = (t.expand(*lead, *t.shape[-2:]) for t in (q * scale, k, v))
    out = q.new_zeros(*lead, q_len, v.shape[-1])  # (..., T_q, d_v); rows that see no key stay 0
    rows = max(1, 2**20 // max(k_len, 1))  # query rows per tile
    rows = min(rows, 128) if is_causal else rows  # smaller causal tiles skip more of the masked keys
    buffer = q.new_empty(min(rows, q_len) * k_len)  # one tile of scores, reused for every tile
    for idx in itertools.product(*(range(n) for n in lead)):
        for r in range(0, q_len, rows):
            r_end = min(r + rows, q_len)
            stop = min(k_len, r_end + offset) if is_causal else k_len  # keys any row of the tile may see
            if stop <= 0:
                continue
            s = buffer[:(r_end - r) * stop].view(r_end - r, stop)
            torch.matmul(q[idx][r:r_end], k[idx][:stop].transpose(-2, -1), out=s)  # (rows, stop)
            if is_causal and stop > r + offset + 1:  # hide the keys after each row's own position
                lo = max(r + offset + 1, 0)
                i = torch.arange(r, r_end, device=s.device)[:, None] + offset
                j = torch.arange(lo, stop, device=s.device)[None, :]
                s[:, lo:].masked_fill_(j > i, float("-inf"))
            if blocked is not None:
                s.masked_fill_(blocked[idx][r:r_end, :stop], float("-inf"))
            if bias is not None:
                s.add_(bias[idx][r:r_end, :stop])
            may_die = blocked is not None or bias is not None or r + offset < 0
            dead = s.amax(dim=-1, keepdim=True) == float("-inf") if may_die else None
            torch.softmax(s, dim=-1, out=s)
            if dead is not None:
                s.masked_fill_(dead, 0.0)  # a query with nothing to attend to: zeros, not NaN
            torch.matmul(s, v[idx][:stop], out=out[idx][r:r_end])
    return out


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, n_heads * d_head) -> (B, n_heads, T, d_head): head h owns features h*d_head:(h+1)*d_head."""
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError(f"the feature size {D} of x {tuple(x.shape)} is not divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, H * d_head): the inverse of split_heads (concatenate the heads)."""
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)  # (B, T, H * d_head)


class MultiHeadAttention(nn.Module):
    """MultiHead(X, Z) = Concat(head_1..head_H) W_O, head_h = Attention(X W_Q^h, Z W_K^g(h), Z W_V^g(h)).

    n_kv_heads = n_heads is standard multi-head attention, 1 is multi-query (MQA), anything in between
    that divides n_heads is grouped-query attention (GQA): heads g*r..(g+1)*r-1 share K/V head g.
    Weights follow nn.Linear (y = x W^T + b) and Llama's names q_proj, k_proj, v_proj, o_proj.
    forward(x (B, T_q, d_model), kv=None or (B, T_k, d_model) for cross-attention, mask, is_causal)
    -> (B, T_q, d_model), plus the weights (B, H, T_q, T_k) if return_weights.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        self.q_proj = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)  # smaller for GQA/MQA
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.o_proj = nn.Linear(n_heads * self.d_head, d_model, bias=bias)

    def forward(self, x, kv=None, mask=None, is_causal=False, return_weights=False):
        kv = x if kv is None else kv  # self-attention unless a second sequence is given
        for name, t in (("x", x), ("kv", kv)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
                got = tuple(getattr(t, "shape", ()))
                raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}), got {got}")
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T_q, d_head)
        k = split_heads(self.k_proj(kv), self.n_kv_heads)  # (B, H_kv, T_k, d_head)
        v = split_heads(self.v_proj(kv), self.n_kv_heads)  # (B, H_kv, T_k, d_head)
        out = scaled_dot_product_attention(q, k, v, mask, is_causal, return_weights=return_weights)
        if return_weights:
            out, weights = out  # weights (B, H, T_q, T_k)
        out = self.o_proj(merge_heads(out))  # (B, T_q, d_model)
        return (out, weights) if return_weights else out


FEATURE_MAPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "elu": lambda x: F.elu(x) + 1,  # Katharopoulos et al. (2020): positive, smooth, ~ x + 1 for x > 0
    "relu": F.relu,
}


def linear_attention(q, k, v, feature_map="elu", is_causal=False, eps=1e-6, chunk=64):
    """Linear attention: out_i = phi(q_i)^T S / phi(q_i)^T z, S = sum_j phi(k_j) v_j^T, z = sum_j phi(k_j).

    Replacing exp(q.k) by phi(q).phi(k) lets the sum over keys be done once: (phi(Q) phi(K)^T) V =
    phi(Q) (phi(K)^T V) costs O(T d^2) instead of O(T^2 d) and never forms the T x T matrix. It is a
    different model, not an approximation with a guarantee. Causal: S and z become running sums.
    Shapes as scaled_dot_product_attention (GQA expanded); feature_map "elu" (elu+1), "relu" or a callable.
    """
    k, v = _expand_gqa(q, k, v)
    if callable(feature_map):
        phi = feature_map
    elif feature_map in FEATURE_MAPS:
        phi = FEATURE_MAPS[feature_map]
    else:
        raise ValueError(f"feature_map must be in {sorted(FEATURE_MAPS)} or callable; got {feature_map!r}")
    if is_causal and q.shape[-2] != k.shape[-2]:
        shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}"
        raise ValueError(f"causal linear attention needs q_len == k_len, got {shapes}")
    fq, fk = phi(q), phi(k)  # (..., T, d)
    if not is_causal:
        S = fk.transpose(-2, -1) @ v  # (..., d, d_v): computed once for all queries
        z = fk.sum(dim=-2, keepdim=True)  # (..., 1, d)
        return (fq @ S) / (fq @ z.transpose(-2, -1) + eps)  # (..., T_q, d_v) / (..., T_q, 1)
    # Causal: an RNN whose state (S, z) sums phi(k_j) v_j^T and phi(k_j) over the past, run `chunk`
    # steps at a time (inside a chunk the few pairs are summed directly, with a triangular mask).
    S = fk.new_zeros(*fk.shape[:-2], fk.shape[-1], v.shape[-1])  # (..., d, d_v)
    z = fk.new_zeros(*fk.shape[:-2], 1, fk.shape[-1])  # (..., 1, d)
    nums, dens = [], []
    for c in range(0, q.shape[-2], chunk):
        fq_c, fk_c, v_c = fq[..., c:c + chunk, :], fk[..., c:c + chunk, :], v[..., c:c + chunk, :]
        local = (fq_c @ fk_c.transpose(-2, -1)).tril()  # (..., C, C): pairs inside the chunk, j <= i
        nums.append(fq_c @ S + local @ v_c)  # (..., C, d_v)
        dens.append(fq_c @ z.transpose(-2, -1) + local.sum(dim=-1, keepdim=True))  # (..., C, 1)
        S = S + fk_c.transpose(-2, -1) @ v_c
        z = z + fk_c.sum(dim=-2, keepdim=True)
    return torch.cat(nums, dim=-2) / (torch.cat(dens, dim=-2) + eps)


def flash_attention(q, k, v, block_size=64, is_causal=False, window=None):
    """Exact softmax(Q K^T / sqrt(d)) V computed tile by tile with an online softmax (FlashAttention's
    algorithm, Dao et al. 2022), so only (block_size x block_size) scores exist at any time.

    For each query block, a running row maximum m, normaliser l and unnormalised output acc are
    updated per key block: m' = max(m, rowmax(S)), acc <- acc * exp(m - m') + exp(S - m') V,
    l <- l * exp(m - m') + rowsum(exp(S - m')); at the end out = acc / l. Same shapes and GQA rule
    as scaled_dot_product_attention; is_causal is lower-right aligned; fully masked rows give zeros.
    window (int, implies causal): attend only to the last `window` keys, as sliding_window_mask; key
    blocks outside the band are skipped, so time is O(T * window) instead of O(T^2).
    """
    k, v = _expand_gqa(q, k, v)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
    if window is not None:
        _check_lengths(window=window)
        is_causal = True
    q_len, k_len, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    offset = k_len - q_len  # lower-right alignment: query i sits at key position i + offset
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    out = q.new_zeros(*lead, q_len, v.shape[-1])
    for qs in range(0, q_len, block_size):
        qb = q[..., qs:qs + block_size, :] * scale  # (..., Bq, d)
        bq = qb.shape[-2]
        first, last = qs + offset, qs + bq - 1 + offset  # key positions of the block's first and last query
        m = q.new_full((*lead, bq, 1), float("-inf"))  # running max
        l = q.new_zeros(*lead, bq, 1)  # running sum of exp  # noqa: E741
        acc = q.new_zeros(*lead, bq, v.shape[-1])  # running unnormalised output
        k_start = max(0, first - window + 1) // block_size * block_size if window else 0
        k_stop = min(k_len, last + 1) if is_causal else k_len  # key blocks after the diagonal are all masked
        for ks in range(k_start, max(k_stop, 0), block_size):
            s = qb @ k[..., ks:ks + block_size, :].transpose(-2, -1)  # (..., Bq, Bk): one tile of scores
            ke = ks + s.shape[-1] - 1  # last key of the tile
            if (is_causal and ke > first) or (window and ks <= last - window):  # the tile crosses an edge
                rows = torch.arange(first, last + 1, device=q.device)[:, None]
                cols = torch.arange(ks, ke + 1, device=q.device)[None, :]
                hidden = (cols > rows) | (cols <= rows - window) if window else cols > rows
                s = s.masked_fill(hidden, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # row masked so far
            p = torch.exp(s - m_safe)  # (..., Bq, Bk)
            correction = torch.exp(m - m_safe)  # rescales what was accumulated under the old maximum
            l = l * correction + p.sum(dim=-1, keepdim=True)  # noqa: E741
            acc = acc * correction + p @ v[..., ks:ks + block_size, :]
            m = m_new
        out[..., qs:qs + bq, :] = acc / torch.where(l > 0, l, torch.ones_like(l))
    return out


def peak_memory(fn: Callable, *args, **kwargs) -> tuple[object, int]:
    """Run fn(*args, **kwargs) and return (result, peak bytes of tensor storage it created and held at once).

    Counts every tensor that torch operations create while fn runs, from creation until it is freed
    (storages shared by views are counted once; the inputs are not counted). Deterministic and
    device-independent, unlike the allocator's statistics; it does not see scratch memory inside a
    single kernel.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Tracker(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live: dict[int, int] = {}  # storage pointer -> bytes
            self.refs: dict[int, int] = {}  # storage pointer -> live tensors using it
            self.current = self.peak = 0

        def _release(self, ptr):
            self.refs[ptr] -= 1
            if self.refs[ptr] == 0:
                self.current -= self.live.pop(ptr)
                del self.refs[ptr]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            outs = result if isinstance(result, (tuple, list)) else [result]
            for t in outs:
                if isinstance(t, torch.Tensor):
                    ptr = t.untyped_storage().data_ptr()
                    if ptr in inputs or ptr == 0:
                        continue
                    if ptr not in self.live:
                        self.live[ptr] = t.untyped_storage().nbytes()
                        self.refs[ptr] = 0
                        self.current += self.live[ptr]
                        self.peak = max(self.peak, self.current)
                    self.refs[ptr] += 1
                    weakref.finalize(t, self._release, ptr)
            return result

    given = list(args) + list(kwargs.values())
    inputs = {a.untyped_storage().data_ptr() for a in given if isinstance(a, torch.Tensor)}
    tracker = _Tracker()
    with tracker:
        result = fn(*args, **kwargs)
    return result, tracker.peak
