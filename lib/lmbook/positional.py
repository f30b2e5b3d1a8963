"""Positional information for the Transformer: sinusoids, rotary embeddings (RoPE), ALiBi and T5's buckets.

Self-attention is permutation-equivariant: without positions, "dog bites man" and "man bites dog"
give the same multiset of outputs. ``lmbook.model`` selects a scheme by name: ``"none"``, ``"learned"``
(an ``nn.Embedding`` of absolute positions, as in GPT-2; it lives in the model), ``"sinusoidal"``
(:func:`sinusoidal_encoding`, added to the token embeddings), ``"rope"`` (:func:`apply_rope` on queries
and keys) and ``"alibi"`` (:func:`alibi_bias`, added to the attention scores).

RoPE (Su et al. 2021). Split the head dimension d into d/2 pairs; pair i at position m is rotated by
the angle m * theta_i with theta_i = base^(-2i/d), i = 0 .. d/2 - 1. Rotating q at position m and k at
position n makes their dot product depend on m - n only. Two pairings of the d features are in use:

- ``"half"`` (GPT-NeoX, Llama in transformers): pair i is (x_i, x_{i + d/2});
- ``"interleaved"`` (the RoFormer paper, llama.cpp, torchtune): pair i is (x_{2i}, x_{2i+1}).

They are the same model up to a fixed permutation of the rows of W_Q and W_K (``pretrained.interleaved_to_half_rows``).

Stretching RoPE beyond its training length (position interpolation, NTK, YaRN, Llama 3.1) is its own module,
:mod:`lmbook.rope_scaling`; ``rope_inv_freq(..., scaling=...)`` hands a scaling dict on to it.

Chapters 9 and 12. Left out: partial rotary dimensions, multi-dimensional (2-D/3-D) RoPE, DeBERTa's
disentangled attention and Shaw et al.'s relative key vectors.
"""

from __future__ import annotations

import math

import torch

from . import validate
from .rope_scaling import scaled_inv_freq

__all__ = ["sinusoidal_encoding", "rope_inv_freq", "apply_rope", "rope_cos_sin", "rotate_pairs", "alibi_slopes",
           "alibi_bias", "relative_position_bucket", "PAIRINGS"]

PAIRINGS = ("half", "interleaved")


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed table of Vaswani et al. (2017): shape (n_positions, d_model), float32.

    PE[m, 2i] = sin(m * w_i) and PE[m, 2i + 1] = cos(m * w_i), with w_i = base^(-2i/d_model) for
    i = 0 .. d_model/2 - 1: the sine and the cosine of a pair share one frequency, and the wavelengths
    2 pi / w_i grow geometrically from 2 pi to just under 2 pi * base. Angles in float64. Chapter 12.
    """
    _check_sinusoidal(n_positions, d_model, base)
    w = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * w  # (n, d/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (n, d/2, 2): (sin, cos) of each pair
    return table.flatten(1).float()  # (n, d): sin, cos, sin, cos, ...


def rope_inv_freq(head_dim: int, base: float = 10000.0, scaling: dict | None = None) -> torch.Tensor:
    """RoPE's rotation frequencies theta_i = base^(-2i/d), i = 0 .. d/2 - 1: shape (head_dim // 2,), float32.

    Plane i turns by m * theta_i at position m: plane 0 once every 2 pi positions, the last one almost
    ``base`` times slower. ``scaling`` (chapter 12), a dict such as ``{"type": "linear", "factor": 4.0}``,
    stretches the context; :func:`lmbook.rope_scaling.scaled_inv_freq` reads it. Computed in float32, as
    transformers does, so the angles match its own. Chapters 9 and 12.
    """
    _check_rope_inv_freq(head_dim, base)
    if scaling is not None:
        return scaled_inv_freq(head_dim, base, scaling)  # chapter 12: PI, NTK, YaRN, Llama 3.1
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim  # 2i / d, (d/2,)
    return 1.0 / (base**exponents)  # (d/2,)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, pairing: str = "half"):
    """Rotate pair i of x at position m by the angle m * theta_i: (a, b) -> (a cos - b sin, b cos + a sin).

    x (..., T, d), e.g. (B, H, T, d) or (T, d); positions (T,) integers >= 0, or (B, T) for x (B, H, T, d);
    inv_freq (d/2,), the theta_i of :func:`rope_inv_freq`. Returns a tensor shaped and typed like x.
    Chapters 9 and 12.
    """
    _check_apply_rope(x, positions, inv_freq, pairing)
    cos, sin = rope_cos_sin(positions.to(x.device), inv_freq, x.dtype)  # (T, d/2) or (B, T, d/2)
    if positions.dim() == 2:
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, d/2): every head turns by the same angles
    return rotate_pairs(x, cos, sin, pairing)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype = torch.float32):
    """cos and sin of the angles m * theta_i, each (*positions.shape, d/2): formed in float32, cast to dtype.

    A model computes them once per forward pass and every layer rotates with them (chapter 9).
    """
    _check_cos_sin(positions, inv_freq, dtype)
    angles = positions.float()[..., None] * inv_freq.to(positions.device).float()  # (..., T, d/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "half") -> torch.Tensor:
    """(a, b) -> (a cos - b sin, b cos + a sin) for every pair of x's last axis d.

    x (..., T, d); cos and sin (..., T, d/2), broadcasting against x's pairs. ``pairing="half"`` pairs x_i
    with x_{i + d/2}, ``"interleaved"`` pairs x_{2i} with x_{2i+1}. Chapters 9 and 12.
    """
    _check_rotate_pairs(x, cos, sin, pairing)
    d = x.shape[-1]
    if pairing == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]  # pair i = (x_i, x_{i + d/2})
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]  # pair i = (x_{2i}, x_{2i+1})
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)  # (..., d/2, 2) -> (..., d)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's head slopes mu_h (Press et al. 2022): shape (n_heads,), float32.

    For H a power of two, mu_h = 2^(-8h/H), h = 1 .. H: a geometric sequence from 2^(-8/H) down to 2^(-8).
    Otherwise take the n = 2^floor(log2 H) slopes of n heads, then the odd-numbered slopes of 2n heads
    (2^(-8k/2n) for k = 1, 3, 5, ...) until there are H. Chapter 12.
    """
    validate.integer("n_heads", n_heads)
    n = 2 ** math.floor(math.log2(n_heads))
    slopes = [2 ** (-8 * h / n) for h in range(1, n + 1)]
    slopes += [2 ** (-8 * k / (2 * n)) for k in range(1, 2 * (n_heads - n), 2)]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, q_len: int, k_len: int, device=None) -> torch.Tensor:
    """The ALiBi bias added to the attention scores: shape (n_heads, q_len, k_len), float32.

    bias[h, r, n] = -mu_h |m - n| for query row r at position m = r + (k_len - q_len) among the keys and key n
    (lower-right aligned, as with a KV cache). Under a causal mask only n <= m is used, and there the bias
    is -mu_h (m - n): no penalty for the current token, a linear one for each step back. Chapter 12.
    """
    _check_alibi_bias(n_heads, q_len, k_len, device)
    query_pos = torch.arange(k_len - q_len, k_len, device=device)[:, None]  # (q_len, 1)
    minus_distance = -(query_pos - torch.arange(k_len, device=device)[None, :]).abs()  # (q_len, k_len), ints
    return alibi_slopes(n_heads).to(device)[:, None, None] * minus_distance.float()  # (H, q_len, k_len)


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool = True, num_buckets: int = 32,
                             max_distance: int = 128) -> torch.Tensor:
    """T5's bucket of each relative position n - m (key minus query; Raffel et al. 2020): ints in [0, num_buckets).

    Each bucket owns one learned scalar bias per head. Bidirectional: half of the buckets for n > m, half
    for n <= m; causal: only n <= m counts (later keys share bucket 0). Within a half of N buckets,
    distances below N/2 get a bucket each; larger ones share N/2 logarithmically wider buckets up to
    ``max_distance``, beyond which everything falls into the last bucket. Any shape. Chapter 12.
    """
    _check_buckets(relative_position, bidirectional, num_buckets, max_distance)
    rel, bucket = relative_position.long(), torch.zeros_like(relative_position, dtype=torch.long)
    if bidirectional:
        num_buckets //= 2
        bucket += (rel > 0).long() * num_buckets  # keys after the query get the upper half
        distance = rel.abs()
    else:
        distance = (-rel).clamp(min=0)  # keys after the query count as distance 0
    exact = num_buckets // 2
    log_ratio = torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
    far = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)


# ---- argument checks: each raises a TypeError or ValueError naming the argument ---------------------------------

def _check_even(name, value, minimum=2):
    validate.integer(name, value)
    if value < minimum or value % 2:
        raise ValueError(f"{name} must be an even int >= {minimum} (positions use pairs of features), got {value!r}")


def _check_sinusoidal(n_positions, d_model, base):
    validate.integer("n_positions", n_positions)
    _check_even("d_model", d_model)
    validate.number("base", base, low=1, low_open=True)


def _check_rope_inv_freq(head_dim, base):
    _check_even("head_dim", head_dim)
    validate.number("base", base, low=1, low_open=True)


def _check_positions(positions, ndim=(1, 2)):
    """Integer positions >= 0; their shape is checked against x by the callers."""
    validate.tensor("positions", positions, ndim=ndim, kind="int")
    if positions.numel() and positions.min() < 0:
        raise ValueError(f"positions must be integers >= 0 (positions count from 0), got {positions.min().item()}")


def _check_inv_freq(inv_freq):
    validate.tensor("inv_freq", inv_freq, ndim=1)
    if len(inv_freq) == 0:
        raise ValueError("inv_freq must hold d/2 >= 1 frequencies, got an empty tensor")


def _check_apply_rope(x, positions, inv_freq, pairing):
    validate.choice("pairing", pairing, PAIRINGS)
    validate.tensor("x", x)
    if x.dim() < 2 or x.shape[-1] == 0 or x.shape[-1] % 2:
        raise ValueError(f"x must have shape (..., T, d) with an even head dim d (RoPE turns pairs), got "
                         f"{tuple(x.shape)}")
    _check_inv_freq(inv_freq)
    if x.shape[-1] != 2 * len(inv_freq):
        raise ValueError(f"x has head dim {x.shape[-1]} but inv_freq has {len(inv_freq)} frequencies (need d/2)")
    validate.tensor("positions", positions, kind="int")
    T = x.shape[-2]
    if positions.dim() not in (1, 2) or positions.shape[-1] != T or (positions.dim() == 2 and (
            x.dim() != 4 or positions.shape[0] != x.shape[0])):
        raise ValueError(f"positions must be integers of shape (T,) with T = {T}, or (B, T) for x of shape "
                         f"(B, H, T, d); got positions {tuple(positions.shape)} for x {tuple(x.shape)}")
    _check_positions(positions)


def _check_cos_sin(positions, inv_freq, dtype):
    _check_positions(positions, ndim=None)
    _check_inv_freq(inv_freq)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype such as torch.float32, got {dtype!r}")


def _check_rotate_pairs(x, cos, sin, pairing):
    validate.choice("pairing", pairing, PAIRINGS)
    # No NaN/inf scan here: this runs in every attention layer, and on a GPU a scan waits for the device.
    validate.tensor("x", x, finite=False)
    validate.tensor("cos", cos, finite=False)
    validate.tensor("sin", sin, finite=False)
    d = x.shape[-1] if x.dim() else 0
    if x.dim() < 2 or d == 0 or d % 2 or cos.dim() < 2 or cos.shape[-1] != d // 2 or sin.shape != cos.shape:
        raise ValueError(f"need x of shape (..., T, d) with d even, and cos, sin of last axis d/2 = {d / 2:g}; got "
                         f"x {tuple(x.shape)}, cos {tuple(cos.shape)}, sin {tuple(sin.shape)}")
    try:
        torch.broadcast_shapes(x.shape[:-1] + (d // 2,), cos.shape)
    except RuntimeError:
        raise ValueError(f"cos and sin {tuple(cos.shape)} do not broadcast against the pairs of x "
                         f"{tuple(x.shape)}") from None
    if cos.dim() > x.dim():
        raise ValueError(f"cos and sin {tuple(cos.shape)} have more axes than x {tuple(x.shape)}")


def _check_alibi_bias(n_heads, q_len, k_len, device):
    validate.integer("n_heads", n_heads)
    validate.integer("q_len", q_len)
    validate.integer("k_len", k_len)
    if q_len > k_len:
        raise ValueError(f"q_len={q_len} must not exceed k_len={k_len} (queries are the last q_len keys)")
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be None, a str such as 'cpu' or a torch.device, got {validate.describe(device)}")
    try:
        torch.device("cpu" if device is None else device)
    except RuntimeError as err:
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}") from err


def _check_buckets(relative_position, bidirectional, num_buckets, max_distance):
    validate.tensor("relative_position", relative_position, kind="int")
    validate.boolean("bidirectional", bidirectional)
    validate.integer("num_buckets", num_buckets, low=4 if bidirectional else 2)
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2  # the distances with a bucket each
    validate.integer("max_distance", max_distance)
    if not max_distance > exact:
        raise ValueError(f"max_distance must exceed {exact} (the exactly-bucketed distances), got {max_distance!r}")
