"""Fast paths for dense attention, chapter 7: the same output as ``attention.scaled_dot_product_attention``,
computed faster on a CPU for models that run without autograd (chapter 9's Transformer calls it through
``attention.fast_attention``). Every path is tested against the readable function.

- ``_decode_step``: one new query per head and no mask (a cached decoding step, chapter 11); the query heads
  of a K/V group become rows of one product, so the cache is never copied for GQA.
- ``_attention_by_slices``: one (batch, head) slice and one tile of query rows at a time, reusing one buffer
  and skipping the keys a causal tile cannot see.

Left out: autograd (with gradients the readable path runs), fused kernels, GPUs' tiled kernels (chapter 8).
"""

from __future__ import annotations

import itertools
import math

import torch

from .attention import _check_attention, repeat_kv, scaled_dot_product_attention

__all__ = ["fast_attention"]


def fast_attention(q, k, v, mask=None, is_causal=False, scale=None) -> torch.Tensor:
    """The output of scaled_dot_product_attention (same arguments and shapes, no weights), by the fastest path:
    without autograd, one query per head and no mask (a cached decoding step, chapter 11) goes to _decode_step
    and a large call to _attention_by_slices, both tested against the readable one, which does the rest. Ch. 7"""
    n_rep = _check_attention(q, k, v, mask, is_causal, scale, False)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return scaled_dot_product_attention(q, k, v, mask, is_causal, scale)
    if q.shape[-2] == 1 and mask is None:  # the one query may see every key, causal or not
        return _decode_step(q, k, v, scale, n_rep)
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    if not _use_fast_path(q, k):
        return scaled_dot_product_attention(q, k, v, mask, is_causal, scale)
    allowed = mask if mask is not None and mask.dtype == torch.bool else None  # True = attend
    bias = mask.to(q.dtype) if mask is not None and allowed is None else None  # added to the scores
    return _attention_by_slices(q, k, v, allowed, bias, scale, is_causal)


def _decode_step(q, k, v, scale, n_rep):
    """One query per head, no mask, no autograd (a cached decoding step): the n_rep query heads of a K/V head
    become n_rep rows of one product with it, so the cache is read in place, never copied n_rep times."""
    if n_rep == 1:
        return torch.softmax((q * scale) @ k.transpose(-2, -1), dim=-1) @ v
    *lead, H, _, d = q.shape
    grouped = q.reshape(*lead, H // n_rep, n_rep, d)  # (..., H_kv, n_rep, d): head h reads K/V head h // n_rep
    weights = torch.softmax((grouped * scale) @ k.transpose(-2, -1), dim=-1)  # (..., H_kv, n_rep, T_k)
    return (weights @ v).reshape(*lead, H, 1, v.shape[-1])  # (..., H, 1, d_v)


def _use_fast_path(q, k) -> bool:
    """Calls with several (batch, head) slices and at least 2^16 scores each go slice by slice."""
    n_slices = math.prod(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]))
    return n_slices > 1 and q.shape[-2] * k.shape[-2] >= 2**16


def _attention_by_slices(q, k, v, allowed, bias, scale, is_causal):
    """The same computation, one (batch, head) slice and one tile of query rows at a time, for CPU speed: each
    tile of at most 2^20 scores reuses one buffer (on CPU fresh T x T temporaries cost more than the arithmetic),
    causal tiles skip the keys after their last query, and torch's fused softmax replaces our four-pass one."""
    q_len, k_len = q.shape[-2], k.shape[-2]
    offset = k_len - q_len  # lower-right causal alignment: query i sits at key position i + offset
    lead = torch.broadcast_shapes(*[t.shape[:-2] for t in (q, k, allowed, bias) if t is not None])
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
            if stop > 0:
                s = buffer[:(r_end - r) * stop].view(r_end - r, stop)
                torch.matmul(q[idx][r:r_end], k[idx][:stop].transpose(-2, -1), out=s)  # (rows, stop)
                _mask_tile(s, r, offset, is_causal, None if blocked is None else blocked[idx][r:r_end, :stop],
                           None if bias is None else bias[idx][r:r_end, :stop])
                torch.matmul(s, v[idx][:stop], out=out[idx][r:r_end])
    return out


def _mask_tile(s, r, offset, is_causal, blocked, bias) -> None:
    """Mask, bias and normalise one tile of scores s (rows r.., keys 0..) in place."""
    stop = s.shape[-1]
    if is_causal and stop > r + offset + 1:  # hide the keys after each row's own position
        lo = max(r + offset + 1, 0)
        i = torch.arange(r, r + s.shape[0], device=s.device)[:, None] + offset
        j = torch.arange(lo, stop, device=s.device)[None, :]
        s[:, lo:].masked_fill_(j > i, float("-inf"))
    if blocked is not None:
        s.masked_fill_(blocked, float("-inf"))
    if bias is not None:
        s.add_(bias)
    may_die = blocked is not None or bias is not None or r + offset < 0
    dead = s.amax(dim=-1, keepdim=True) == float("-inf") if may_die else None
    torch.softmax(s, dim=-1, out=s)
    if dead is not None:
        s.masked_fill_(dead, 0.0)  # a query with nothing to attend to: zeros, not NaN
