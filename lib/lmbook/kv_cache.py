"""The KV cache: generating one token at a time without recomputing the past.

At decode step t a causal Transformer needs, in every layer, the keys and values of all earlier tokens.
They do not change once computed, so the cache keeps them:

    per layer l:  K_l <- [K_l; k_t],  V_l <- [V_l; v_t],   out_t = softmax(q_t K_l^T / sqrt(d)) V_l

and each step feeds only the newest token. Three caches plug into ``lmbook.model.Transformer`` through
``forward(ids, cache=...)`` (any object with ``seq_len`` and ``update(layer, k, v)``):

- :class:`KVCache`: preallocated buffers (L, B, H_kv, max_len, d) and one length per layer; it stores the
  n_kv_heads heads of K and V (GQA/MQA: fewer than the query heads) *after* RoPE, so the positions of
  new tokens simply continue after the cached ones; appending past ``max_len`` is an error;
- :class:`RollingKVCache`: a fixed-size ring buffer that keeps the first ``n_sinks`` tokens (StreamingLLM's
  attention sinks) and the last ``window`` tokens, overwriting the oldest token of the window;
- :class:`Int8KVCache`: the same as KVCache with each cached vector stored as int8 plus one scale.

And the arithmetic of the chapter: :func:`kv_cache_bytes` (memory), :func:`forward_flops` (compute of a
forward pass with or without cached tokens), :func:`cached_nll` (per-token loss read through a cache) and
:func:`fit_exponent` (the growth exponent of measured times).
Chapter 11.

Left out on purpose: paged caches and prefix sharing (vLLM), re-positioning tokens inside a rolling
cache (StreamingLLM does it to go beyond the trained context; here positions stay those of the text),
multi-head latent attention, speculative decoding, and batches of prompts of different lengths.
"""

from __future__ import annotations

import math

import torch

__all__ = ["KVCache", "RollingKVCache", "Int8KVCache", "kv_cache_bytes", "forward_flops", "cached_nll",
           "quantize_int8", "fit_exponent"]


def _check_int(name: str, value, least: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an int >= {least}, got {value!r}")


class KVCache:
    """Keys and values of every layer, in preallocated buffers of shape (n_layers, batch, n_kv_heads,
    max_len, head_dim), with ``lengths[l]`` = tokens stored for layer l (the position offset of the next one).

    ``append(layer, k, v)`` writes k, v (batch, n_kv_heads, T, head_dim) at positions lengths[l] ..
    lengths[l] + T - 1; ``get(layer)`` returns views of everything stored; ``update`` does both (the hook
    ``Transformer.forward`` calls); ``reset()`` empties the cache without freeing memory. Chapter 11.
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, max_len: int, batch: int = 1,
                 dtype: torch.dtype = torch.float32, device=None):
        for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),
                            ("max_len", max_len), ("batch", batch)):
            _check_int(name, value)
        self.n_layers, self.n_kv_heads, self.head_dim = n_layers, n_kv_heads, head_dim
        self.max_len, self.batch, self.dtype = max_len, batch, dtype
        self._allocate((n_layers, batch, n_kv_heads, max_len, head_dim), dtype, device)
        self.lengths = [0] * n_layers

    def _allocate(self, shape, dtype, device):
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, H_kv, max_len, d)
        self.values = torch.zeros(shape, dtype=dtype, device=device)

    @classmethod
    def for_model(cls, model, max_len: int, batch: int = 1, **kwargs):
        """A cache shaped for ``model`` (a Transformer): its layers, K/V heads, head size, dtype and device."""
        c, weight = model.config, next(model.parameters())
        kwargs.setdefault("dtype", weight.dtype)
        kwargs.setdefault("device", weight.device)
        return cls(c.n_layers, c.n_kv_heads, c.head_dim, max_len, batch=batch, **kwargs)

    @property
    def seq_len(self) -> int:
        """Tokens every layer has seen: the position of the next token (the last layer is written last)."""
        return self.lengths[-1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache's tensors (allocated for max_len tokens, whatever is filled)."""
        return sum(t.nbytes for t in vars(self).values() if isinstance(t, torch.Tensor))

    def _check(self, layer, k, v) -> int:
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be an int in [0, {self.n_layers - 1}], got {layer!r}")
        want = (self.batch, self.n_kv_heads, "T", self.head_dim)
        for name, t in (("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                raise TypeError(f"{name} must be a floating-point tensor, got {type(t).__name__}")
            shape = tuple(t.shape)
            if t.dim() != 4 or shape[:2] != want[:2] or shape[3] != self.head_dim or shape[2] < 1:
                raise ValueError(f"{name} must have shape (batch={self.batch}, n_kv_heads={self.n_kv_heads}, "
                                 f"T >= 1, head_dim={self.head_dim}), got {shape}")
        if k.shape != v.shape:
            raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
        return k.shape[2]

    def _slots(self, layer: int, T: int) -> slice:
        """Where the next T tokens of ``layer`` go: positions lengths[layer] .. + T - 1, or an error."""
        start = self.lengths[layer]
        if start + T > self.max_len:
            raise ValueError(f"the cache is full: layer {layer} holds {start} of max_len={self.max_len} tokens and "
                             f"cannot take {T} more. Make a cache with a larger max_len (or use RollingKVCache, "
                             f"which forgets the oldest tokens)")
        return slice(start, start + T)

    def _write(self, layer: int, slots, k, v) -> None:
        self.keys[layer, :, :, slots] = k  # (B, H_kv, T, d) into the preallocated buffer, no new memory
        self.values[layer, :, :, slots] = v

    def _read(self, layer: int, n: int):
        return self.keys[layer, :, :, :n], self.values[layer, :, :, :n]  # views (B, H_kv, n, d)

    def _stored(self, layer: int) -> int:
        return self.lengths[layer]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the keys and values (batch, n_kv_heads, T, head_dim) of T new tokens of ``layer``."""
        T = self._check(layer, k, v)
        self._write(layer, self._slots(layer, T), k, v)
        self.lengths[layer] += T

    def get(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Every stored key and value of ``layer``: two tensors (batch, n_kv_heads, stored, head_dim)."""
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be an int in [0, {self.n_layers - 1}], got {layer!r}")
        return self._read(layer, self._stored(layer))

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """append, then get: the hook ``Transformer.forward(..., cache=)`` calls in every attention layer."""
        self.append(layer, k, v)
        return self.get(layer)

    def reset(self) -> None:
        """Forget every token (the buffers stay allocated and are overwritten by the next appends)."""
        self.lengths = [0] * self.n_layers

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(layers={self.n_layers}, kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, "
                f"max_len={self.max_len}, batch={self.batch}, seq_len={self.seq_len}, {self.nbytes:,} bytes)")


class RollingKVCache(KVCache):
    """A fixed-size cache for endless generation: the first ``n_sinks`` tokens stay forever (attention
    sinks, Xiao et al. 2024) and the last ``window`` tokens roll through a ring buffer.

    Token at position p goes to slot p while the buffer fills, then to slot n_sinks + (p - n_sinks) mod
    window, overwriting the oldest windowed token. ``n_sinks=0`` is a plain sliding window. Once full, the
    slots are not in time order; attention does not care, because RoPE has already put each token's
    position into its key and a single new query may see every cached key. So once the buffer is full,
    tokens must come one at a time (several new queries would need a per-query window). Chapter 11.
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, window: int, n_sinks: int = 0,
                 batch: int = 1, dtype: torch.dtype = torch.float32, device=None):
        _check_int("window", window)
        _check_int("n_sinks", n_sinks, least=0)
        self.window, self.n_sinks = window, n_sinks
        super().__init__(n_layers, n_kv_heads, head_dim, n_sinks + window, batch=batch, dtype=dtype, device=device)

    @classmethod
    def for_model(cls, model, window: int, n_sinks: int = 0, batch: int = 1, **kwargs):
        """A rolling cache shaped for ``model`` (a Transformer)."""
        c, weight = model.config, next(model.parameters())
        if getattr(c, "positional", None) == "alibi":  # ALiBi's bias assumes the keys are in time order
            raise ValueError("RollingKVCache needs positions inside the keys (rope, learned, sinusoidal or none); "
                             "ALiBi biases the scores by slot order, which a ring buffer does not keep")
        kwargs.setdefault("dtype", weight.dtype)
        kwargs.setdefault("device", weight.device)
        return cls(c.n_layers, c.n_kv_heads, c.head_dim, window, n_sinks, batch=batch, **kwargs)

    def slot(self, position: int) -> int:
        """The buffer slot of the token at ``position``: sinks stay put, the window wraps around."""
        if position < self.n_sinks + self.window:
            return position
        return self.n_sinks + (position - self.n_sinks) % self.window

    def _slots(self, layer: int, T: int):
        start = self.lengths[layer]
        if T == 1:
            slot = self.slot(start)
            return slice(slot, slot + 1)
        if start + T > self.max_len:
            raise ValueError(f"a rolling cache takes several tokens at once only while it fills: layer {layer} "
                             f"holds {start} of {self.max_len} slots and got T={T}. Feed the rest one token at a time")
        return slice(start, start + T)

    def _stored(self, layer: int) -> int:
        return min(self.lengths[layer], self.max_len)  # lengths counts every token seen


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax quantization of each vector (last axis): scale = max|x| / 127, q = round(x / scale).

    Returns (q int8, same shape as x; scale float32, shape (..., 1)); x ~ q * scale, with an error of at
    most scale / 2 per entry. An all-zero vector gets scale 1 (and q = 0). Chapter 11.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {type(x).__name__}")
    scale = x.abs().amax(dim=-1, keepdim=True).float() / 127  # (..., 1)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8)
    return q, scale


class Int8KVCache(KVCache):
    """A KVCache that stores each key and value vector (one token, one head) as int8 plus a float32 scale
    (:func:`quantize_int8`), and returns them dequantized in ``dtype``. Memory per vector: head_dim + 4
    bytes instead of 2 * head_dim (16-bit) or 4 * head_dim (32-bit). Chapter 11."""

    def _allocate(self, shape, dtype, device):
        self.keys = torch.zeros(shape, dtype=torch.int8, device=device)  # (L, B, H_kv, max_len, d)
        self.values = torch.zeros(shape, dtype=torch.int8, device=device)
        self.key_scales = torch.ones(*shape[:-1], 1, device=device)  # (L, B, H_kv, max_len, 1), float32
        self.value_scales = torch.ones(*shape[:-1], 1, device=device)

    def _write(self, layer, slots, k, v):
        (qk, sk), (qv, sv) = quantize_int8(k), quantize_int8(v)
        self.keys[layer, :, :, slots], self.key_scales[layer, :, :, slots] = qk, sk
        self.values[layer, :, :, slots], self.value_scales[layer, :, :, slots] = qv, sv

    def _read(self, layer, n):
        k = self.keys[layer, :, :, :n].to(self.dtype) * self.key_scales[layer, :, :, :n].to(self.dtype)
        v = self.values[layer, :, :, :n].to(self.dtype) * self.value_scales[layer, :, :, :n].to(self.dtype)
        return k, v  # (B, H_kv, n, d), dequantized


def _config_value(config, name):
    value = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
    if value is None and name == "head_dim":  # a TransformerConfig-like object without head_dim
        d, h = _config_value(config, "d_model"), _config_value(config, "n_heads")
        value = d // h
    if value is None:
        raise ValueError(f"config must give {name} (a TransformerConfig, or a dict / object with n_layers, "
                         f"n_kv_heads and head_dim), got {config!r}")
    return value


def kv_cache_bytes(config, seq_len: int, batch: int = 1, dtype_bytes: int = 2) -> int:
    """Memory of a full KV cache: 2 (K and V) * n_layers * n_kv_heads * head_dim * seq_len * batch * bytes.

    ``config``: a TransformerConfig, or any dict / object giving n_layers, n_kv_heads and head_dim (or
    d_model and n_heads), e.g. a published model's numbers. dtype_bytes: 2 for fp16/bf16, 4 for fp32,
    1 for int8 (without its scales). Chapter 11.
    """
    _check_int("seq_len", seq_len, least=0)
    _check_int("batch", batch)
    _check_int("dtype_bytes", dtype_bytes)
    L, H_kv, d = (_config_value(config, n) for n in ("n_layers", "n_kv_heads", "head_dim"))
    return 2 * L * H_kv * d * seq_len * batch * dtype_bytes


def forward_flops(config, n_new: int, n_past: int = 0) -> int:
    """Floating-point operations of one forward pass over ``n_new`` tokens after ``n_past`` cached ones
    (a multiply-add counts 2; only matrix products, which dominate).

    Per token: 2 * (L * (d (H + 2 H_kv) d_h + H d_h d + k d d_ff) + d V)   (projections, FFN with k = 3
    matrices for SwiGLU or 2 for GELU, output layer), plus attention: query i (position n_past + i) scores
    n_past + i keys and mixes as many values, 4 L H d_h (n_past + i) for i = 1 .. n_new (causal keys only).

    Decoding with a cache at position t: forward_flops(c, 1, t - 1); without: forward_flops(c, t). Chapter 11.
    """
    _check_int("n_new", n_new, least=0)
    _check_int("n_past", n_past, least=0)
    L, H, H_kv, d, d_ff, V = (getattr(config, n) for n in ("n_layers", "n_heads", "n_kv_heads", "d_model", "d_ff",
                                                           "vocab_size"))
    d_h = d // H
    n_ffn = 3 if getattr(config, "ffn", "swiglu") == "swiglu" else 2
    per_token = 2 * (L * (d * (H + 2 * H_kv) * d_h + H * d_h * d + n_ffn * d * d_ff) + d * V)
    keys_seen = n_new * n_past + n_new * (n_new + 1) // 2  # sum over the new queries of the keys each sees
    return n_new * per_token + 4 * L * H * d_h * keys_seen


@torch.no_grad()
def cached_nll(model, ids, cache, prefill: int | None = None) -> torch.Tensor:
    """Negative log-likelihood (nats) of each token ids[1:] given what ``cache`` keeps of its past.

    ids: (T,) token ids. The first ``prefill`` tokens (default: as many as the cache holds, cache.max_len)
    go in one forward pass; the rest one token at a time, as in generation. With a KVCache this equals
    the full forward pass; with a RollingKVCache each token sees only the sinks and the window. (T - 1,).
    """
    ids = torch.as_tensor(ids)
    if ids.dim() != 1 or ids.numel() < 2 or ids.is_floating_point():
        raise ValueError(f"ids must be a 1-d tensor of at least 2 token ids, got {ids.dtype} {tuple(ids.shape)}")
    ids = ids.to(next(model.parameters()).device)
    prefill = min(cache.max_len if prefill is None else prefill, len(ids) - 1)
    _check_int("prefill", prefill)
    cache.reset()
    logits = [model(ids[None, :prefill], cache=cache)[0]]  # (prefill, V)
    for t in range(prefill, len(ids) - 1):
        logits.append(model(ids[None, t:t + 1], cache=cache)[0])  # (1, V)
    logits = torch.cat(logits)  # (T - 1, V): row t predicts ids[t + 1]
    logp = (logits if logits.dtype == torch.float64 else logits.float()).log_softmax(dim=-1)
    return -logp.gather(-1, ids[1:, None]).squeeze(-1)


def fit_exponent(x, y) -> float:
    """Slope of log y against log x (least squares): y ~ c x^slope. Used on measured times. Chapter 11."""
    lx, ly = torch.tensor([math.log(v) for v in x]), torch.tensor([math.log(v) for v in y])
    lx, ly = lx - lx.mean(), ly - ly.mean()
    return float((lx * ly).sum() / (lx * lx).sum())
