"""Positional information for the Transformer: sinusoids, RoPE and its context extensions, ALiBi, T5 buckets.

Self-attention is permutation-equivariant: without positions, "dog bites man" and "man bites dog"
give the same multiset of outputs. ``lmbook.model`` selects a scheme by name: ``"none"``, ``"learned"``
(an ``nn.Embedding`` of absolute positions, as in GPT-2; it lives in the model), ``"sinusoidal"``
(:func:`sinusoidal_encoding`, added to the token embeddings), ``"rope"`` (:func:`apply_rope` on queries
and keys) and ``"alibi"`` (:func:`alibi_bias`, added to the attention scores).

RoPE (Su et al. 2021). Split the head dimension d into d/2 pairs; pair i at position p is rotated by
the angle p * theta_i with theta_i = base^(-2i/d), i = 0 .. d/2 - 1. Rotating q at position m and k at
position n makes their dot product depend on m - n only. Two pairings of the d features are in use:

- ``"half"`` (GPT-NeoX, Llama in transformers): pair i is (x_i, x_{i + d/2});
- ``"interleaved"`` (the RoFormer paper, llama.cpp, torchtune): pair i is (x_{2i}, x_{2i+1}).

They are the same model up to a fixed permutation of the rows of W_Q and W_K (``model.interleaved_to_half_rows``).

Context extension changes the frequencies theta_i (``rope_inv_freq(..., scaling=...)``): position
interpolation ("linear"), NTK-aware base change ("ntk"), dynamic NTK ("dynamic"), YaRN ("yarn", with
:func:`yarn_attention_factor`) and Llama 3.1's rule ("llama3"), with transformers' conventions.

Chapters 9 and 12. Left out: partial rotary dimensions, LongRoPE's searched factors, multi-dimensional
(2-D/3-D) RoPE, DeBERTa's disentangled attention and Shaw et al.'s relative key vectors.
"""

from __future__ import annotations

import math

import torch

__all__ = ["sinusoidal_encoding", "rope_inv_freq", "apply_rope", "yarn_ramp", "yarn_attention_factor",
           "rope_cos_sin", "rotate_pairs", "alibi_slopes", "alibi_bias", "relative_position_bucket", "PAIRINGS",
           "SCALING_TYPES"]

PAIRINGS = ("half", "interleaved")
# the keys each scaling type accepts (besides "type" and "factor"), with their defaults; None = required
SCALING_TYPES = {
    "linear": {},
    "ntk": {},
    "dynamic": {"original_max_position_embeddings": None, "seq_len": 0},
    "yarn": {"original_max_position_embeddings": None, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True,
             "ramp": "index"},
    "llama3": {"original_max_position_embeddings": None, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
}


def _check_even(name, value, minimum=2):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or value % 2:
        raise ValueError(f"{name} must be an even int >= {minimum} (positions use pairs of features), got {value!r}")


def _check_base(base):
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1:
        raise ValueError(f"base must be a number > 1, got {base!r}")


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed table of Vaswani et al. (2017): shape (n_positions, d_model), float32.

    PE[p, 2i] = sin(p * w_i) and PE[p, 2i + 1] = cos(p * w_i), with w_i = base^(-2i/d_model) for
    i = 0 .. d_model/2 - 1: the sine and the cosine of a pair share one frequency, and the wavelengths
    2 pi / w_i grow geometrically from 2 pi to just under 2 pi * base. Angles in float64. Chapter 12.
    """
    if isinstance(n_positions, bool) or not isinstance(n_positions, int) or n_positions < 1:
        raise ValueError(f"n_positions must be an int >= 1, got {n_positions!r}")
    _check_even("d_model", d_model)
    _check_base(base)
    w = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * w  # (n, d/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (n, d/2, 2): (sin, cos) of each pair
    return table.flatten(1).float()  # (n, d): sin, cos, sin, cos, ...


def _scaling_options(scaling) -> tuple[str, float, dict]:
    """Validate a scaling dict; return (type, factor, options with defaults filled in)."""
    if not isinstance(scaling, dict):
        raise ValueError(f"scaling must be None or a dict such as {{'type': 'linear', 'factor': 2.0}}, got {scaling!r}")
    kind = scaling.get("type")
    if kind not in SCALING_TYPES:
        raise ValueError(f"scaling['type'] must be one of {tuple(SCALING_TYPES)}, got {kind!r}")
    factor = scaling.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 1:
        raise ValueError(f"scaling['factor'] must be a number >= 1 (the context is stretched s times), got {factor!r}")
    allowed = SCALING_TYPES[kind]
    unknown = set(scaling) - {"type", "factor"} - set(allowed)
    if unknown:
        raise ValueError(f"scaling type {kind!r} takes the keys {('type', 'factor', *allowed)}, got unknown "
                         f"{sorted(unknown)}")
    options = {**allowed, **{k: v for k, v in scaling.items() if k in allowed}}
    for key, value in options.items():
        if value is None:
            raise ValueError(f"scaling['{key}'] is required for type {kind!r} (the training context length L)")
    L = options.get("original_max_position_embeddings")
    if L is not None and (isinstance(L, bool) or not isinstance(L, int) or L < 1):
        raise ValueError(f"scaling['original_max_position_embeddings'] must be an int >= 1, got {L!r}")
    if kind == "yarn" and options["ramp"] not in ("index", "ratio"):
        raise ValueError(f"scaling['ramp'] must be 'index' (transformers) or 'ratio' (the paper), "
                         f"got {options['ramp']!r}")
    if kind == "yarn" and not options["beta_fast"] > options["beta_slow"] > 0:
        raise ValueError(f"scaling['beta_fast'] must exceed scaling['beta_slow'] > 0, got {options['beta_fast']!r}"
                         f" and {options['beta_slow']!r}")
    if kind == "llama3" and not options["high_freq_factor"] > options["low_freq_factor"] > 0:
        raise ValueError("scaling['high_freq_factor'] must exceed scaling['low_freq_factor'] > 0, got "
                         f"{options['high_freq_factor']!r} and {options['low_freq_factor']!r}")
    return kind, float(factor), options


def rope_inv_freq(head_dim: int, base: float = 10000.0, scaling: dict | None = None) -> torch.Tensor:
    """The rotation frequencies theta_i = base^(-2i/d) for i = 0 .. d/2 - 1: shape (head_dim // 2,), float32.

    ``scaling`` stretches a model trained on L tokens to s = scaling["factor"] times as many (chapter 12):

    - ``{"type": "linear", "factor": s}``: position interpolation, theta_i / s (positions p / s);
    - ``{"type": "ntk", "factor": s}``: NTK-aware base b' = b s^(d/(d-2)); theta_i s^(-2i/(d-2)), so the
      highest frequency is kept and the lowest divided by s;
    - ``{"type": "dynamic", "factor": s, "original_max_position_embeddings": L, "seq_len": n}``: NTK with
      the base recomputed from the current length n: b' = b (s n / L - (s - 1))^(d/(d-2)); no change for n <= L;
    - ``{"type": "yarn", "factor": s, "original_max_position_embeddings": L, ...}``: NTK-by-parts,
      theta_i' = (1 - g_i) theta_i / s + g_i theta_i with g_i from :func:`yarn_ramp` (1 = keep, 0 =
      interpolate); pair it with :func:`yarn_attention_factor`;
    - ``{"type": "llama3", "factor": s, "original_max_position_embeddings": L, "low_freq_factor": 1,
      "high_freq_factor": 4}``: keep planes with wavelength < L / high, divide by s those with wavelength >
      L / low, blend linearly in L / wavelength between.

    Computed in float32 as transformers' ``ROPE_INIT_FUNCTIONS`` do, so angles match them.
    """
    _check_even("head_dim", head_dim)
    _check_base(base)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim  # 2i / d
    if scaling is None:
        return 1.0 / (base**exponents)  # (head_dim // 2,)
    kind, s, opt = _scaling_options(scaling)
    d = head_dim
    if kind == "linear":
        return 1.0 / (base**exponents) / s
    if kind == "ntk":
        return 1.0 / ((base * s ** (d / (d - 2))) ** exponents)
    if kind == "dynamic":
        L = opt["original_max_position_embeddings"]
        n = max(int(opt["seq_len"]), L)
        return 1.0 / ((base * (s * n / L - (s - 1)) ** (d / (d - 2))) ** exponents)
    inv_freq = 1.0 / (base**exponents)
    if kind == "yarn":
        keep = yarn_ramp(d, base, opt["original_max_position_embeddings"], opt["beta_fast"], opt["beta_slow"],
                         by=opt["ramp"], truncate=opt["truncate"])  # (d/2,): 1 = keep, 0 = divide by s
        return inv_freq / s * (1 - keep) + inv_freq * keep
    # llama3
    L, low, high = opt["original_max_position_embeddings"], opt["low_freq_factor"], opt["high_freq_factor"]
    wavelength = 2 * math.pi / inv_freq
    keep = ((L / wavelength - low) / (high - low)).clamp(0, 1)  # 1 for wavelength <= L/high, 0 for >= L/low
    return torch.where(wavelength > L / low, inv_freq / s, (1 - keep) * inv_freq / s + keep * inv_freq)


def yarn_ramp(head_dim: int, base: float, original_max_position_embeddings: int, beta_fast: float = 32.0,
              beta_slow: float = 1.0, by: str = "index", truncate: bool = True) -> torch.Tensor:
    """YaRN's per-plane blend g_i in [0, 1]: 1 keeps theta_i (extrapolate), 0 divides it by s (interpolate).

    Plane i turns r_i = L / lambda_i times in the training window, lambda_i = 2 pi / theta_i.
    ``by="ratio"`` is the paper's ramp, linear in r: g = clamp((r - beta_slow) / (beta_fast - beta_slow), 0, 1).
    ``by="index"`` is the reference code's (and transformers'), linear in the plane index i: planes up to
    idx(beta_fast) are kept, planes from idx(beta_slow) interpolated, where idx(r) = d ln(L / (2 pi r)) /
    (2 ln b) is the fractional plane that turns r times; ``truncate`` rounds the two ends outwards.
    Both agree outside the blend band; inside it they differ. Shape (head_dim // 2,), float32. Chapter 12.
    """
    _check_even("head_dim", head_dim)
    _check_base(base)
    L = original_max_position_embeddings
    planes = torch.arange(head_dim // 2, dtype=torch.float32)
    if by == "ratio":
        r = L * (1.0 / (base ** (2 * planes / head_dim))) / (2 * math.pi)  # r_i = L / lambda_i
        return ((r - beta_slow) / (beta_fast - beta_slow)).clamp(0, 1)
    if by != "index":
        raise ValueError(f"by must be 'index' or 'ratio', got {by!r}")

    def idx(turns):  # the fractional plane index that turns `turns` times in L tokens
        return head_dim * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = idx(beta_fast), idx(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)  # transformers clips high at d - 1, not d/2 - 1
    if low == high:
        high += 0.001  # as the reference code: avoid dividing by zero
    return 1 - ((planes - low) / (high - low)).clamp(0, 1)


def yarn_attention_factor(s: float) -> float:
    """YaRN's attention scale sqrt(1/t) = 0.1 ln s + 1 (1 for s = 1).

    Multiply both q and k by it (transformers multiplies cos and sin), so the logits grow by
    (0.1 ln s + 1)^2 = 1/t: a temperature t < 1 that *sharpens* attention, undoing the flattening that
    interpolated positions cause. Chapter 12.
    """
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not s >= 1:
        raise ValueError(f"s (the scaling factor) must be a number >= 1, got {s!r}")
    return 0.1 * math.log(s) + 1.0


def apply_rope(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, pairing: str = "half"):
    """Rotate each pair (a, b) of x by the angle p * theta_i: (a, b) -> (a cos - b sin, b cos + a sin).

    Shapes: x (B, H, T, d) or (T, d); positions (T,) or (B, T) integer positions of the T rows;
    inv_freq (d/2,) from :func:`rope_inv_freq`. Returns a tensor shaped and typed like x.
    Angles are formed in float32 (as transformers does) and cos/sin cast to x's dtype. Chapters 9 and 12.
    """
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2:
        raise TypeError(f"x must be a floating-point tensor of shape (..., T, d), got {getattr(x, 'shape', x)!r}")
    T, d = x.shape[-2], x.shape[-1]
    if d != 2 * inv_freq.shape[-1]:
        raise ValueError(f"x has head dim {d} but inv_freq has {inv_freq.shape[-1]} frequencies (need d/2)")
    positions = torch.as_tensor(positions, device=x.device)
    if positions.is_floating_point() or positions.dim() not in (1, 2) or positions.shape[-1] != T:
        raise ValueError(f"positions must be integers of shape (T,) or (B, T) with T={T}, "
                         f"got {positions.dtype} {tuple(positions.shape)}")
    cos, sin = rope_cos_sin(positions, inv_freq, x.dtype)  # (T, d/2) or (B, T, d/2)
    if positions.dim() == 2 and x.dim() == 4:
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, d/2): the same rotation for every head
    return rotate_pairs(x, cos, sin, pairing)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype = torch.float32):
    """cos and sin of the angles p * theta_i, each (*positions.shape, d/2): formed in float32, cast to dtype.
    A model computes them once per forward pass and every layer rotates with them (Chapter 9)."""
    if not isinstance(positions, torch.Tensor) or positions.is_floating_point():
        raise TypeError(f"positions must be an integer tensor, got {getattr(positions, 'dtype', type(positions))}")
    angles = positions.float()[..., None] * inv_freq.to(positions.device).float()  # (..., T, d/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "half") -> torch.Tensor:
    """(a, b) -> (a cos - b sin, b cos + a sin) for every pair of x's last axis (d); cos and sin broadcast
    against (..., T, d/2). "half" pairs x_i with x_{i + d/2}; "interleaved" pairs x_{2i} with x_{2i+1}."""
    d = x.shape[-1]
    if pairing not in PAIRINGS or cos.shape[-1] != d // 2 or sin.shape != cos.shape or d % 2:
        raise ValueError(f"need pairing in {PAIRINGS} and cos, sin of last axis d/2 = {d / 2:g} for x of last axis "
                         f"{d}; got pairing={pairing!r}, cos {tuple(cos.shape)}, sin {tuple(sin.shape)}")
    if pairing == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]  # pair i = (x_i, x_{i + d/2})
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]  # pair i = (x_{2i}, x_{2i+1})
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)  # re-interleave


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's head slopes m_h (Press et al. 2022): shape (n_heads,), float32.

    For H a power of two, m_h = 2^(-8h/H), h = 1 .. H: a geometric sequence from 2^(-8/H) down to 2^(-8).
    Otherwise take the n = 2^floor(log2 H) slopes of n heads, then the odd-numbered slopes of 2n heads
    (2^(-8k/2n) for k = 1, 3, 5, ...) until there are H. Chapter 12.
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads must be an int >= 1, got {n_heads!r}")
    n = 2 ** math.floor(math.log2(n_heads))
    slopes = [2 ** (-8 * h / n) for h in range(1, n + 1)]
    slopes += [2 ** (-8 * k / (2 * n)) for k in range(1, 2 * (n_heads - n), 2)]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, q_len: int, k_len: int, device=None) -> torch.Tensor:
    """The ALiBi bias added to the attention scores: shape (n_heads, q_len, k_len), float32.

    bias[h, i, j] = -m_h |i' - j|, where i' = i + (k_len - q_len) is query i's position among the keys
    (lower-right aligned, as with a KV cache). Under a causal mask only j <= i' is used, and there the bias
    is -m_h (i' - j): no penalty for the current token, a linear one for each step back. Chapter 12.
    """
    for name, value in (("q_len", q_len), ("k_len", k_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if q_len > k_len:
        raise ValueError(f"q_len={q_len} must not exceed k_len={k_len} (queries are the last q_len keys)")
    query_pos = torch.arange(k_len - q_len, k_len, device=device)[:, None]  # (q_len, 1)
    minus_distance = -(query_pos - torch.arange(k_len, device=device)[None, :]).abs()  # (q_len, k_len), ints
    return alibi_slopes(n_heads).to(device)[:, None, None] * minus_distance.float()  # (H, q_len, k_len)


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool = True, num_buckets: int = 32,
                             max_distance: int = 128) -> torch.Tensor:
    """T5's bucket of each relative position j - i (Raffel et al. 2020): integers in [0, num_buckets).

    Each bucket owns one learned scalar bias per head. Bidirectional: half of the buckets for j > i, half
    for j <= i; causal: only j <= i counts (later keys share bucket 0). Within a half of n buckets,
    distances below n/2 get a bucket each; larger ones share n/2 logarithmically wider buckets up to
    ``max_distance``, beyond which everything falls into the last bucket. Chapter 12.
    """
    rel = torch.as_tensor(relative_position)
    if rel.is_floating_point():
        raise ValueError(f"relative_position must hold integers, got {rel.dtype}")
    rel = rel.long()
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or num_buckets < (4 if bidirectional else 2):
        raise ValueError(f"num_buckets must be an int >= {4 if bidirectional else 2}, got {num_buckets!r}")
    bucket = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        bucket += (rel > 0).long() * num_buckets  # keys after the query get the upper half
        distance = rel.abs()
    else:
        distance = (-rel).clamp(min=0)  # keys after the query count as distance 0
    exact = num_buckets // 2
    if not max_distance > exact:
        raise ValueError(f"max_distance must exceed {exact} (the exactly-bucketed distances), got {max_distance!r}")
    log_ratio = torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
    far = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)
