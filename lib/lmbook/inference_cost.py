"""What a forward pass costs: FLOPs by formula, and the growth exponent of measured times. Chapter 11.

- :func:`forward_flops`: the floating-point operations of one forward pass over n_new tokens after n_past
  cached ones, counting the matrix products (which dominate);
- :func:`fit_exponent`: the slope of log time against log length, to read off linear or quadratic growth;
- :func:`mla_step_flops`: the FLOPs of one decoding step of multi-head latent attention, with the keys and
  values rebuilt from the latents or with the up-projections absorbed;
- :func:`config_sizes`: a model's sizes read from a TransformerConfig, or from a dict of a published
  model's numbers, each checked to be a positive int.

The memory side, the bytes of a KV cache, is ``lmbook.kv_cache.kv_cache_bytes``. Left out on purpose:
elementwise operations (norms, activations, softmax), memory traffic and any hardware model.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import validate

__all__ = ["forward_flops", "fit_exponent", "mla_step_flops", "config_sizes"]

FLOP_SIZES = ("n_layers", "n_heads", "n_kv_heads", "d_model", "d_ff", "vocab_size")


def forward_flops(config, n_new: int, n_past: int = 0, last_only: bool = False) -> int:
    """Floating-point operations of one forward pass over ``n_new`` tokens after ``n_past`` cached ones
    (a multiply-add counts 2; only matrix products, which dominate). last_only: the output layer scores the
    last position only (``model(..., last_only=True)``, all that decoding needs), so 2 d V is paid once.

    Per token: 2 * (L * (d (H + 2 H_kv) d_h + H d_h d + k d d_ff) + d V)   (projections, FFN with k = 3
    matrices for SwiGLU or 2 for GELU, output layer), plus attention: query i (position n_past + i) scores
    n_past + i keys and mixes as many values, 4 L H d_h (n_past + i) for i = 1 .. n_new (causal keys only).

    Decoding with a cache at position t: forward_flops(c, 1, t - 1); without: forward_flops(c, t, last_only=True).
    Chapter 11.
    """
    _check_flops(config, n_new, n_past, last_only)
    L, H, H_kv, d, d_ff, V = config_sizes(config, FLOP_SIZES)  # positive ints, or an error
    d_h = d // H
    n_ffn = 3 if _get(config, "ffn", "swiglu") == "swiglu" else 2
    per_token = 2 * L * (d * (H + 2 * H_kv) * d_h + H * d_h * d + n_ffn * d * d_ff)  # the blocks
    head = 2 * d * V * (min(n_new, 1) if last_only else n_new)  # the output layer
    keys_seen = n_new * n_past + n_new * (n_new + 1) // 2  # sum over the new queries of the keys each sees
    return n_new * per_token + head + 4 * L * H * d_h * keys_seen


def fit_exponent(x, y) -> float:
    """Slope of log y against log x (least squares): y ~ c x^slope, for x and y lists or 1-d arrays of
    positive numbers. Used on measured times. Chapter 11."""
    _check_fit(x, y)
    lx, ly = torch.tensor([math.log(v) for v in x]), torch.tensor([math.log(v) for v in y])
    lx, ly = lx - lx.mean(), ly - ly.mean()
    return float((lx * ly).sum() / (lx * lx).sum())


def mla_step_flops(T: int, n_heads: int, head_dim: int, d_c: int, d_model: int, absorbed: bool) -> int:
    """FLOPs (matrix products) of one MLA decoding step of one layer over T cached latents of size d_c, for H
    heads of size d_h and the output projection to d (``efficient_attention.mla_decode``).

    Rebuilt:  4 T d_c H d_h (all keys and values) + 4 H T d_h (scores, mix) + 2 H d_h d (output).
    Absorbed: 2 H d_h d_c (query into the latent space) + 4 H T d_c (scores, mix on the latents)
              + 2 H d_c d_h (one value up-projection) + 2 H d_h d (output). Chapter 11."""
    _check_mla_flops(T, n_heads, head_dim, d_c, d_model, absorbed)
    H, d_h, d = n_heads, head_dim, d_model
    if absorbed:
        return 2 * H * d_h * d_c + 4 * H * T * d_c + 2 * H * d_c * d_h + 2 * H * d_h * d
    return 4 * T * d_c * H * d_h + 4 * H * T * d_h + 2 * H * d_h * d


def config_sizes(config, names) -> tuple[int, ...]:
    """The sizes ``names`` of a model, from a TransformerConfig or any dict / object that gives them; head_dim
    defaults to d_model // n_heads. Each must be a positive int: a clear error names the one that is not."""
    _check_config(config, names)
    return tuple(_size(config, name) for name in names)


def _get(config, name: str, default=None):
    value = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
    return default if value is None else value


def _size(config, name: str):
    if name == "head_dim" and _get(config, "head_dim") is None:  # a config without head_dim
        return _size(config, "d_model") // _size(config, "n_heads")
    value = _get(config, name)
    if value is None:
        raise ValueError(f"config must give {name} (a TransformerConfig, or a dict / object with it), got "
                         f"{validate.describe(config)}")
    validate.integer(f"config.{name}", value)
    return value


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_config(config, names) -> None:
    if isinstance(config, type) or not (isinstance(config, dict) or hasattr(config, "n_layers")):
        raise TypeError(f"config must be a TransformerConfig, or a dict / object giving {', '.join(names)}, got "
                        f"{validate.describe(config)}")
    validate.strings("names", names)
    for name in names:
        _size(config, name)


def _check_flops(config, n_new, n_past, last_only) -> None:
    _check_config(config, FLOP_SIZES)
    validate.choice("config.ffn", _get(config, "ffn", "swiglu"), ("swiglu", "gelu"))
    validate.integer("n_new", n_new, low=0)
    validate.integer("n_past", n_past, low=0)
    validate.boolean("last_only", last_only)


def _check_mla_flops(T, n_heads, head_dim, d_c, d_model, absorbed) -> None:
    for name, value in (("T", T), ("n_heads", n_heads), ("head_dim", head_dim), ("d_c", d_c), ("d_model", d_model)):
        validate.integer(name, value)
    validate.boolean("absorbed", absorbed)


def _check_fit(x, y) -> None:
    for name, values in (("x", x), ("y", y)):
        if isinstance(values, np.ndarray) and values.ndim != 1:
            raise ValueError(f"{name} must be a 1-d array or a list of positive numbers, got shape {values.shape}")
        if not isinstance(values, np.ndarray):
            validate.sequence(name, values, what="positive numbers")
        for i, v in enumerate(values.tolist() if isinstance(values, np.ndarray) else values):
            validate.number(f"{name}[{i}]", v, low=0, low_open=True)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"x and y must have the same length >= 2, got {len(x)} and {len(y)}")
    if len(set(x)) < 2:
        raise ValueError(f"x must hold at least two different values to fit a slope, got {x!r}")
