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

And :func:`kv_cache_bytes` (the memory a cache takes), :func:`quantize_int8` (absmax int8 vectors) and
:func:`cached_nll` (the loss of each token of a text read through a cache). The compute side of the chapter,
FLOPs per forward pass and fitted growth exponents, is ``lmbook.inference_cost``. Chapter 11.

Left out on purpose: re-positioning tokens inside a rolling cache (StreamingLLM does it to go beyond the
trained context; here positions stay those of the text), multi-head latent attention, and batches of prompts
of different lengths. Paged caches with prefix sharing are ``lmbook.paged_cache``; speculative decoding, which
rolls the cache back with :meth:`KVCache.crop`, is ``lmbook.speculative``.
"""

from __future__ import annotations

import torch

from . import validate
from .inference_cost import config_sizes

__all__ = ["KVCache", "RollingKVCache", "Int8KVCache", "kv_cache_bytes", "cached_nll", "quantize_int8"]


class KVCache:
    """Keys and values of every layer, in preallocated buffers of shape (n_layers, batch, n_kv_heads,
    max_len, head_dim), with ``lengths[l]`` = tokens stored for layer l (the position offset of the next one).

    ``append(layer, k, v)`` writes k, v (batch, n_kv_heads, T, head_dim) at positions lengths[l] ..
    lengths[l] + T - 1; ``get(layer)`` returns views of everything stored; ``update`` does both (the hook
    ``Transformer.forward`` calls); ``reset()`` empties the cache without freeing memory. Chapter 11.
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, max_len: int, batch: int = 1,
                 dtype: torch.dtype = torch.float32, device=None):
        """Zeroed buffers (L, B, H_kv, max_len, d) for the keys and for the values, and no token stored yet."""
        _check_cache(n_layers, n_kv_heads, head_dim, max_len, batch, dtype, device)
        self.n_layers, self.n_kv_heads, self.head_dim = n_layers, n_kv_heads, head_dim
        self.max_len, self.batch, self.dtype = max_len, batch, dtype
        self._allocate((n_layers, batch, n_kv_heads, max_len, head_dim), dtype, device)
        self.lengths = [0] * n_layers  # tokens stored per layer

    def _allocate(self, shape, dtype, device):
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, H_kv, max_len, d)
        self.values = torch.zeros(shape, dtype=dtype, device=device)

    @classmethod
    def for_model(cls, model, max_len: int, batch: int = 1, **kwargs):
        """A cache shaped for ``model`` (a Transformer): its layers, K/V heads, head size, dtype and device."""
        _check_model(model)
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

    def _slots(self, layer: int, T: int) -> slice:
        """Where the next T tokens of ``layer`` go: positions lengths[layer] .. + T - 1 (append checked room)."""
        return slice(self.lengths[layer], self.lengths[layer] + T)

    def _write(self, layer: int, slots, k, v) -> None:
        self.keys[layer, :, :, slots] = k  # (B, H_kv, T, d) into the preallocated buffer, no new memory
        self.values[layer, :, :, slots] = v

    def _read(self, layer: int, n: int):
        return self.keys[layer, :, :, :n], self.values[layer, :, :, :n]  # views (B, H_kv, n, d)

    def _stored(self, layer: int) -> int:
        return self.lengths[layer]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the keys and values (batch, n_kv_heads, T, head_dim) of T new tokens of ``layer``."""
        _check_append(self, layer, k, v)
        T = k.shape[2]  # new tokens
        self._write(layer, self._slots(layer, T), k, v)
        self.lengths[layer] += T

    def get(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Every stored key and value of ``layer``: two tensors (batch, n_kv_heads, stored, head_dim)."""
        _check_layer(self, layer)
        return self._read(layer, self._stored(layer))

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """append, then get: the hook ``Transformer.forward(..., cache=)`` calls in every attention layer."""
        self.append(layer, k, v)
        return self.get(layer)

    def reset(self) -> None:
        """Forget every token (the buffers stay allocated and are overwritten by the next appends)."""
        self.lengths = [0] * self.n_layers

    def crop(self, n: int) -> None:
        """Keep the first ``n`` tokens of every layer and forget the rest (speculative decoding rolls rejected
        draft tokens back this way); the buffers stay allocated. A RollingKVCache cannot crop once it wraps."""
        _check_crop(self, n)
        self.lengths = [min(length, n) for length in self.lengths]

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
        _check_rolling(window, n_sinks)
        self.window, self.n_sinks = window, n_sinks
        super().__init__(n_layers, n_kv_heads, head_dim, n_sinks + window, batch=batch, dtype=dtype, device=device)

    @classmethod
    def for_model(cls, model, window: int, n_sinks: int = 0, batch: int = 1, **kwargs):
        """A rolling cache shaped for ``model`` (a Transformer), which must not use ALiBi."""
        _check_model(model, rolling=True)
        c, weight = model.config, next(model.parameters())
        kwargs.setdefault("dtype", weight.dtype)
        kwargs.setdefault("device", weight.device)
        return cls(c.n_layers, c.n_kv_heads, c.head_dim, window, n_sinks, batch=batch, **kwargs)

    def slot(self, position: int) -> int:
        """The buffer slot of the token at ``position``: p while the buffer fills (sinks stay put for good),
        then n_sinks + (p - n_sinks) mod window, the slot of the oldest windowed token."""
        validate.integer("position", position, low=0)
        if position < self.n_sinks + self.window:
            return position
        return self.n_sinks + (position - self.n_sinks) % self.window

    def _slots(self, layer: int, T: int) -> slice:
        """Where the next T tokens go: one token to its slot(), or, only while the buffer fills, T in a row."""
        start = self.lengths[layer]
        if T == 1:
            slot = self.slot(start)
            return slice(slot, slot + 1)
        return slice(start, start + T)  # append checked that they fit

    def _stored(self, layer: int) -> int:
        return min(self.lengths[layer], self.max_len)  # lengths counts every token seen


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax quantization of each vector (last axis): scale = max|x| / 127, q = round(x / scale).

    Returns (q int8, same shape as x; scale float32, shape (..., 1)); x ~ q * scale, with an error of at
    most scale / 2 per entry. An all-zero vector gets scale 1 (and q = 0). Chapter 11.
    """
    _check_quantize(x)
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


def kv_cache_bytes(config, seq_len: int, batch: int = 1, dtype_bytes: int = 2) -> int:
    """Memory of a full KV cache: 2 (K and V) * n_layers * n_kv_heads * head_dim * seq_len * batch * bytes.

    ``config``: a TransformerConfig, or any dict / object giving n_layers, n_kv_heads and head_dim (or
    d_model and n_heads), e.g. a published model's numbers. dtype_bytes: 2 for fp16/bf16, 4 for fp32,
    1 for int8 (without its scales). Chapter 11.
    """
    _check_bytes_args(seq_len, batch, dtype_bytes)
    L, H_kv, d = config_sizes(config, ("n_layers", "n_kv_heads", "head_dim"))  # positive ints, or an error
    return 2 * L * H_kv * d * seq_len * batch * dtype_bytes


@torch.no_grad()
def cached_nll(model, ids, cache, prefill: int | None = None) -> torch.Tensor:
    """Negative log-likelihood (nats) of each token ids[1:] given what ``cache`` keeps of its past.

    ids: (T,) token ids. The first ``prefill`` tokens (default: as many as the cache holds, cache.max_len)
    go in one forward pass; the rest one token at a time, as in generation. With a KVCache this equals
    the full forward pass; with a RollingKVCache each token sees only the sinks and the window. (T - 1,).
    """
    _check_nll_args(model, ids, cache, prefill)
    ids = ids.to(next(model.parameters()).device)
    prefill = min(cache.max_len if prefill is None else prefill, len(ids) - 1)
    cache.reset()
    logits = [model(ids[None, :prefill], cache=cache)[0]]  # (prefill, V)
    for t in range(prefill, len(ids) - 1):
        logits.append(model(ids[None, t:t + 1], cache=cache)[0])  # (1, V)
    logits = torch.cat(logits)  # (T - 1, V): row t predicts ids[t + 1]
    logp = (logits if logits.dtype == torch.float64 else logits.float()).log_softmax(dim=-1)
    return -logp.gather(-1, ids[1:, None]).squeeze(-1)


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_cache(n_layers, n_kv_heads, head_dim, max_len, batch, dtype, device) -> None:
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),
                        ("max_len", max_len), ("batch", batch)):
        validate.integer(name, value)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype (keys and values are real vectors; an integer "
                        f"dtype would truncate them), got {validate.describe(dtype)}")
    if device is not None:
        try:
            torch.device(device)
        except (RuntimeError, TypeError, ValueError) as err:
            raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}") from err


def _check_rolling(window, n_sinks) -> None:
    validate.integer("window", window)
    validate.integer("n_sinks", n_sinks, low=0)


def _check_model(model, rolling: bool = False) -> None:
    config = getattr(model, "config", None)
    if not isinstance(model, torch.nn.Module) or not all(hasattr(config, n) for n in ("n_layers", "n_kv_heads")):
        raise TypeError(f"model must be a Transformer (a module with a config), got {validate.describe(model)}")
    if rolling and getattr(config, "positional", None) == "alibi":  # ALiBi's bias assumes keys in time order
        raise ValueError("model uses ALiBi, but RollingKVCache needs positions inside the keys (rope, learned, "
                         "sinusoidal or none); ALiBi biases scores by slot order, which a ring buffer does not keep")


def _check_layer(cache: KVCache, layer) -> None:
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise TypeError(f"layer must be an int in [0, {cache.n_layers - 1}], got {validate.describe(layer)}")
    if not 0 <= layer < cache.n_layers:
        raise ValueError(f"layer must be an int in [0, {cache.n_layers - 1}], got {layer!r}")


def _check_append(cache: KVCache, layer, k, v) -> None:
    """Types and shapes only (no pass over the values: this runs in every layer at every decoding step)."""
    _check_layer(cache, layer)
    for name, t in (("k", k), ("v", v)):
        validate.tensor(name, t, finite=False)
        if t.dim() != 4 or t.shape[:2] != (cache.batch, cache.n_kv_heads) or t.shape[3] != cache.head_dim \
                or t.shape[2] < 1:
            raise ValueError(f"{name} must have shape (batch={cache.batch}, n_kv_heads={cache.n_kv_heads}, "
                             f"T >= 1, head_dim={cache.head_dim}), got {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    start, T = cache.lengths[layer], k.shape[2]
    rolling = isinstance(cache, RollingKVCache)
    if rolling and T > 1 and start + T > cache.max_len:
        raise ValueError(f"a rolling cache takes several tokens at once only while it fills: layer {layer} holds "
                         f"{start} of {cache.max_len} slots and k has T={T}. Feed the rest one token at a time")
    if not rolling and start + T > cache.max_len:
        raise ValueError(f"the cache is full: layer {layer} holds {start} of max_len={cache.max_len} tokens and "
                         f"k, v bring {T} more. Make a cache with a larger max_len (or use RollingKVCache, "
                         f"which forgets the oldest tokens)")


def _check_crop(cache: KVCache, n) -> None:
    validate.integer("n", n, low=0)
    if isinstance(cache, RollingKVCache) and max(cache.lengths) > cache.max_len:
        raise ValueError(f"n: a rolling cache that has wrapped ({max(cache.lengths)} tokens seen, {cache.max_len} "
                         f"slots) has overwritten the tokens a crop would need; crop before it is full")


def _check_quantize(x) -> None:
    validate.tensor("x", x)  # floating point, no NaN or inf (a NaN would quantize to a silent 0)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must have shape (..., d) with d >= 1, got {tuple(x.shape)}")


def _check_bytes_args(seq_len, batch, dtype_bytes) -> None:
    validate.integer("seq_len", seq_len, low=0)
    validate.integer("batch", batch)
    validate.integer("dtype_bytes", dtype_bytes)


def _check_nll_args(model, ids, cache, prefill) -> None:
    _check_model(model)
    validate.token_ids("ids", ids, model.config.vocab_size, ndim=1)
    if ids.numel() < 2:
        raise ValueError(f"ids must hold at least 2 token ids (one to predict from, one to score), got {ids.numel()}")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, RollingKVCache or Int8KVCache, got {validate.describe(cache)}")
    if prefill is not None:
        validate.integer("prefill", prefill)
