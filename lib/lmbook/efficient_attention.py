"""Efficient attention, chapter 8: three ways around
the T x T matrix of scores, and a way to measure the memory they save.

- Sparse masks: ``sliding_window_mask`` (each query sees the last ``window`` keys, as Mistral) and
  ``strided_mask`` (the Sparse Transformer's strided pattern). They are masks for
  ``attention.scaled_dot_product_attention``; ``flash_attention(window=...)`` also skips the hidden tiles.
- ``linear_attention``: a feature map phi replaces exp(q . k), so the sum over the keys is done once,
  in O(T d^2) instead of O(T^2 d).
- ``flash_attention``: exact attention computed tile by tile with an online softmax, so that only
  block_size x block_size scores exist at any time (FlashAttention's algorithm, not its speed).
- ``peak_memory``: the bytes of tensors alive at once while a function runs, counted deterministically.
- ``mla_decode``: one decoding step of multi-head latent attention over a cache of latents, with the keys and
  values rebuilt or with the up-projections absorbed into the query and the output (chapter 11).

Conventions (shapes, lower-right causal alignment, grouped-query K/V heads) are those of
``lmbook.attention``, where grouped- and multi-query attention live (``MultiHeadAttention(n_kv_heads=...)``).
Left out: fused kernels, MLA's training-time form and its decoupled RoPE key, learned or content-based
sparsity, and backward passes.
"""

from __future__ import annotations

import math
import weakref
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from . import validate
from .attention import _check_lengths, _check_qkv, causal_mask, repeat_kv

__all__ = ["sliding_window_mask", "strided_mask", "FEATURE_MAPS", "linear_attention", "flash_attention",
           "peak_memory"]


def sliding_window_mask(q_len: int, k_len: int, window: int, device=None) -> torch.Tensor:
    """Causal mask that also forgets the distant past: query i sees the last `window` keys up to and
    including its own position, i.e. i' - window < j <= i' with i' = i + k_len - q_len. (q_len, k_len). Chapter 8.
    """
    _check_lengths(device, q_len=q_len, k_len=k_len, window=window)
    band = torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(diagonal=k_len - q_len - window + 1)
    return causal_mask(q_len, k_len, device) & band


def strided_mask(q_len: int, k_len: int, stride: int, device=None) -> torch.Tensor:
    """The strided pattern of the Sparse Transformer (Child et al., 2019), causal and lower-right aligned:
    query i sees key j <= i' if it is among the last `stride` keys (i' - j < stride) or if
    (i' - j) is a multiple of `stride`. Two such layers connect every pair of positions. (q_len, k_len). Chapter 8.
    """
    _check_lengths(device, q_len=q_len, k_len=k_len, stride=stride)
    i = torch.arange(q_len, device=device)[:, None] + (k_len - q_len)
    j = torch.arange(k_len, device=device)[None, :]
    dist = i - j
    return (dist >= 0) & ((dist < stride) | (dist % stride == 0))


FEATURE_MAPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "elu": lambda x: F.elu(x) + 1,  # Katharopoulos et al. (2020): positive, smooth, ~ x + 1 for x > 0
    "relu": F.relu,
}


def linear_attention(q, k, v, feature_map="elu", is_causal=False, eps=1e-6, chunk=64):
    """Linear attention: out_i = phi(q_i)^T S / phi(q_i)^T z, S = sum_j phi(k_j) v_j^T, z = sum_j phi(k_j).

    Replacing exp(q.k) by phi(q).phi(k) lets the sum over keys be done once: (phi(Q) phi(K)^T) V =
    phi(Q) (phi(K)^T V) costs O(T d^2) instead of O(T^2 d) and never forms the T x T matrix. It is a
    different model, not an approximation with a guarantee. Causal: only keys j <= i.
    Shapes as scaled_dot_product_attention (GQA expanded); feature_map "elu" (elu+1), "relu" or a callable. Ch. 8
    """
    k, v = _check_linear(q, k, v, feature_map, is_causal, eps, chunk)  # K/V heads repeated for GQA
    phi = feature_map if callable(feature_map) else FEATURE_MAPS[feature_map]
    fq, fk = phi(q), phi(k)  # (..., T, d)
    if is_causal:
        return _causal_linear_attention(fq, fk, v, eps, chunk)
    S = fk.transpose(-2, -1) @ v  # (..., d, d_v): computed once for all queries
    z = fk.sum(dim=-2, keepdim=True)  # (..., 1, d)
    return (fq @ S) / (fq @ z.transpose(-2, -1) + eps)  # (..., T_q, d_v) / (..., T_q, 1)


def _causal_linear_attention(fq, fk, v, eps, chunk):
    """Causal linear attention as an RNN whose state (S, z) sums phi(k_j) v_j^T and phi(k_j) over the past,
    run `chunk` steps at a time (inside a chunk the few pairs are summed directly, with a triangular mask)."""
    S = fk.new_zeros(*fk.shape[:-2], fk.shape[-1], v.shape[-1])  # (..., d, d_v)
    z = fk.new_zeros(*fk.shape[:-2], 1, fk.shape[-1])  # (..., 1, d)
    nums, dens = [], []
    for c in range(0, fq.shape[-2], chunk):
        fq_c, fk_c, v_c = fq[..., c:c + chunk, :], fk[..., c:c + chunk, :], v[..., c:c + chunk, :]
        local = (fq_c @ fk_c.transpose(-2, -1)).tril()  # (..., C, C): pairs inside the chunk, j <= i
        nums.append(fq_c @ S + local @ v_c)  # (..., C, d_v)
        dens.append(fq_c @ z.transpose(-2, -1) + local.sum(dim=-1, keepdim=True))  # (..., C, 1)
        S = S + fk_c.transpose(-2, -1) @ v_c
        z = z + fk_c.sum(dim=-2, keepdim=True)
    return torch.cat(nums, dim=-2) / (torch.cat(dens, dim=-2) + eps)


def flash_attention(q, k, v, block_size=64, is_causal=False, window=None):
    """Exact softmax(Q K^T / sqrt(d)) V, one tile of block_size x block_size scores at a time (Dao et al. 2022).

    Online softmax: per query block, a running row max m, sum l and unnormalised output acc are updated per
    key block S: m' = max(m, rowmax(S)), acc <- acc exp(m - m') + exp(S - m') V, l <- l exp(m - m') +
    rowsum(exp(S - m')); at the end out = acc / l. Shapes, GQA and causal alignment as scaled_dot_product_attention.
    window (implies causal): only the last `window` keys, as sliding_window_mask; time O(T window). Chapter 8.
    """
    k, v = _check_flash(q, k, v, block_size, is_causal, window)  # K/V heads repeated for GQA
    is_causal, scale = is_causal or window is not None, 1.0 / math.sqrt(q.shape[-1])
    offset = k.shape[-2] - q.shape[-2]  # lower-right alignment: query i sits at key position i + offset
    out = q.new_zeros(*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], v.shape[-1])  # (..., T_q, d_v)
    for qs in range(0, q.shape[-2], block_size):
        qb = q[..., qs:qs + block_size, :] * scale  # (..., Bq, d): one block of queries
        first, last = qs + offset, qs + qb.shape[-2] - 1 + offset  # key positions of its first and last query
        acc = torch.zeros_like(out[..., qs:qs + block_size, :])  # (..., Bq, d_v): running unnormalised output
        l = torch.zeros_like(acc[..., :1])  # (..., Bq, 1): running sum of exp  # noqa: E741
        m = torch.full_like(l, float("-inf"))  # (..., Bq, 1): running row max
        for ks in _key_blocks(first, last, k.shape[-2], block_size, is_causal, window):
            s = _hide(qb @ k[..., ks:ks + block_size, :].transpose(-2, -1), first, last, ks, is_causal, window)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # s: (..., Bq, Bk), one tile of scores
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # a row masked so far
            p = torch.exp(s - m_safe)  # (..., Bq, Bk)
            correction = torch.exp(m - m_safe)  # rescales what was accumulated under the old maximum
            l = l * correction + p.sum(dim=-1, keepdim=True)  # noqa: E741
            acc = acc * correction + p @ v[..., ks:ks + block_size, :]
            m = m_new
        out[..., qs:qs + qb.shape[-2], :] = acc / torch.where(l > 0, l, torch.ones_like(l))
    return out


def _key_blocks(first, last, k_len, block_size, is_causal, window) -> range:
    """Starts of the key blocks that queries at key positions first..last may see: with a window, none
    before first - window + 1; when causal, none after last (those tiles would be all masked)."""
    start = max(0, first - window + 1) // block_size * block_size if window else 0
    stop = min(k_len, last + 1) if is_causal else k_len
    return range(start, max(stop, 0), block_size)


def _hide(s, first, last, ks, is_causal, window):
    """Set to -inf the scores of tile s (queries at key positions first..last, keys from ks) that are masked."""
    ke = ks + s.shape[-1] - 1  # last key of the tile
    if (is_causal and ke > first) or (window and ks <= last - window):  # the tile crosses an edge of the mask
        rows = torch.arange(first, last + 1, device=s.device)[:, None]
        cols = torch.arange(ks, ke + 1, device=s.device)[None, :]
        hidden = (cols > rows) | (cols <= rows - window) if window else cols > rows
        s = s.masked_fill(hidden, float("-inf"))
    return s


def peak_memory(fn: Callable, *args, **kwargs) -> tuple[object, int]:
    """Run fn(*args, **kwargs) and return (result, peak bytes of tensor storage it created and held at once).

    Counts every tensor that torch operations create while fn runs, from creation until it is freed
    (storages shared by views are counted once; the inputs are not counted). Deterministic and
    device-independent, unlike the allocator's statistics; it does not see scratch memory inside a
    single kernel. Chapter 8.
    """
    _check_peak_memory(fn)
    given = list(args) + list(kwargs.values())
    tracker = _Tracker({a.untyped_storage().data_ptr() for a in given if isinstance(a, torch.Tensor)})
    with tracker:
        result = fn(*args, **kwargs)
    return result, tracker.peak


class _Tracker(TorchDispatchMode):
    """Sees every tensor a torch operation returns; adds its storage's bytes until the last tensor using it dies."""

    def __init__(self, inputs: set[int]):
        super().__init__()
        self.inputs = inputs  # storage pointers of the inputs, not counted
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
        for t in result if isinstance(result, (tuple, list)) else [result]:
            if not isinstance(t, torch.Tensor):
                continue
            ptr = t.untyped_storage().data_ptr()
            if ptr in self.inputs or ptr == 0:
                continue
            if ptr not in self.live:
                self.live[ptr] = t.untyped_storage().nbytes()
                self.refs[ptr] = 0
                self.current += self.live[ptr]
                self.peak = max(self.peak, self.current)
            self.refs[ptr] += 1
            weakref.finalize(t, self._release, ptr)
        return result


# ----- multi-head latent attention at decode time (chapter 11) ------------------------------------------------

def mla_decode(q, latent, W_uk, W_uv, W_o, absorbed: bool = False) -> torch.Tensor:
    """One decoding step of multi-head latent attention (DeepSeek-V2) over the T cached latents, without the
    decoupled RoPE part. q (H, d_h): the new token's queries; latent (T, d_c): the cache c^KV; W_uk, W_uv
    (H, d_c, d_h): the up-projections to each head's keys and values; W_o (H, d_h, d): the output projection.

    Rebuilt: K_h = C W_uk[h], V_h = C W_uv[h], out = sum_h softmax(q_h K_h^T / sqrt(d_h)) V_h W_o[h].
    Absorbed: q_h K_h^T = (q_h W_uk[h]^T) C^T and a V_h = (a C) W_uv[h], so the scores and the mix run on the
    latents themselves, and no key or value is ever built. The same output. Chapter 11."""
    _check_mla(q, latent, W_uk, W_uv, W_o, absorbed)
    scale = 1.0 / math.sqrt(q.shape[-1])
    if absorbed:
        q_latent = (q[:, None, :] @ W_uk.transpose(-2, -1))[:, 0]  # (H, d_c): q_h W_uk[h]^T (foldable into W^Q)
        weights = torch.softmax(q_latent @ latent.T * scale, dim=-1)  # (H, T): scores against the latents
        z = ((weights @ latent)[:, None, :] @ W_uv)[:, 0]  # (H, d_h): mix the latents, then up-project once
    else:
        K, V = latent @ W_uk, latent @ W_uv  # (H, T, d_h) each: every head's keys and values, rebuilt
        weights = torch.softmax((K @ q[:, :, None])[..., 0] * scale, dim=-1)  # (H, T)
        z = (weights[:, None, :] @ V)[:, 0]  # (H, d_h)
    return (z[:, None, :] @ W_o)[:, 0].sum(0)  # (d,): sum over heads of z_h W_o[h]


def _check_mla(q, latent, W_uk, W_uv, W_o, absorbed) -> None:
    for name, t, shape in (("q", q, (None, None)), ("latent", latent, (None, None)), ("W_uk", W_uk, None),
                           ("W_uv", W_uv, None), ("W_o", W_o, None)):
        validate.tensor(name, t, ndim=2 if shape else 3)
        if t.numel() == 0:
            raise ValueError(f"{name} must not be empty, got shape {tuple(t.shape)}")
    (H, d_h), d_c = q.shape, latent.shape[1]
    validate.tensor("W_uk", W_uk, shape=(H, d_c, d_h))
    validate.tensor("W_uv", W_uv, shape=(H, d_c, None))
    validate.tensor("W_o", W_o, shape=(H, W_uv.shape[2], None))
    validate.boolean("absorbed", absorbed)


__all__ += ["mla_decode"]


# ----- checks: each raises a TypeError or ValueError naming the argument ----------------------------------

def _check_linear(q, k, v, feature_map, is_causal, eps, chunk):
    """Check linear_attention's arguments; return k and v with their heads repeated for the query heads."""
    n_rep = _check_qkv(q, k, v)
    if not callable(feature_map) and not (isinstance(feature_map, str) and feature_map in FEATURE_MAPS):
        raise ValueError(f"feature_map must be one of {sorted(FEATURE_MAPS)} or a callable, got {feature_map!r}")
    validate.boolean("is_causal", is_causal)
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal linear attention needs q_len == k_len, got q {tuple(q.shape)}, k {tuple(k.shape)}")
    validate.number("eps", eps, low=0, low_open=True)
    validate.integer("chunk", chunk)
    return repeat_kv(k, n_rep), repeat_kv(v, n_rep)


def _check_flash(q, k, v, block_size, is_causal, window):
    """Check flash_attention's arguments; return k and v with their heads repeated for the query heads."""
    n_rep = _check_qkv(q, k, v)
    validate.integer("block_size", block_size)
    validate.boolean("is_causal", is_causal)
    if window is not None:
        validate.integer("window", window)
    return repeat_kv(k, n_rep), repeat_kv(v, n_rep)


def _check_peak_memory(fn) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be a callable (the function to measure), got {validate.describe(fn)}")
