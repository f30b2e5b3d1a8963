"""Stretching RoPE beyond its training length: position interpolation, NTK-aware and dynamic NTK scaling, YaRN
and Llama 3.1's rule; and a trained RoPE model stretched by one of them.

A RoPE model trained on windows of L tokens turns plane i by m * theta_i at position m, theta_i = b^(-2i/d)
(:mod:`lmbook.positional`). Each method here replaces theta_i by theta_i' so that s = ``factor`` times as
many tokens fit, one function per method, named after transformers' ``rope_type``. :func:`scaled_inv_freq`
reads transformers-style dicts such as ``{"type": "yarn", "factor": 4.0, "original_max_position_embeddings":
4096}``; it is what ``positional.rope_inv_freq(head_dim, base, scaling)`` calls. The frequencies are formed
in float32 exactly as transformers' ``ROPE_INIT_FUNCTIONS`` form them, so they agree bit for bit.

Chapter 12. Left out: LongRoPE's searched per-plane factors, partial rotary dimensions, and the fine-tunes
that usually follow a stretch (chapter 12's experiments in ``lmbook.experiments.positional_runs`` run one).
"""

from __future__ import annotations

import copy
import inspect
import math

import torch
from torch import nn

from . import validate

__all__ = ["scaled_inv_freq", "linear_inv_freq", "ntk_inv_freq", "dynamic_inv_freq", "yarn_inv_freq", "yarn_ramp",
           "yarn_attention_factor", "llama3_inv_freq", "scaling_for", "rescale_rope", "SCALED", "METHOD_TYPES"]


def _inv_freq(head_dim, base):
    """theta_i = base^(-2i/d) in float32, formed as positional.rope_inv_freq (and transformers) form it."""
    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))  # (d/2,)


def scaled_inv_freq(head_dim: int, base: float, scaling: dict | None) -> torch.Tensor:
    """The frequencies theta_i' of a ``scaling`` dict: shape (head_dim // 2,), float32; None gives theta_i.

    ``scaling["type"]`` picks the method (a key of ``SCALED``), ``scaling["factor"]`` is s, and the other keys
    are that method's keyword arguments, e.g. ``original_max_position_embeddings`` (L). Chapter 12.
    """
    _check_scaling(head_dim, base, scaling)
    if scaling is None:
        return _inv_freq(head_dim, base)
    options = dict(scaling, factor=float(scaling["factor"]))
    return SCALED[options.pop("type")](head_dim, base, **options)


def linear_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """Position interpolation (Chen et al. 2023): theta_i' = theta_i / s, the same as reading position m
    as m / s, so s L positions fit in the trained range. Shape (head_dim // 2,). Chapter 12."""
    _check_method(head_dim, base, factor=factor)
    return _inv_freq(head_dim, base) / factor


def ntk_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """NTK-aware scaling (bloc97 2023): the base b' = b s^(d/(d-2)), so theta_i' = theta_i s^(-2i/(d-2)):
    plane 0 is kept and the slowest plane is divided by exactly s. Shape (head_dim // 2,). Chapter 12."""
    _check_method(head_dim, base, minimum=4, factor=factor)
    return _inv_freq(head_dim, base * factor ** (head_dim / (head_dim - 2)))


def dynamic_inv_freq(head_dim: int, base: float, factor: float, original_max_position_embeddings: int,
                     seq_len: int = 0) -> torch.Tensor:
    """Dynamic NTK (emozilla 2023): NTK's base from the current length T = max(seq_len, L),
    b' = b (s T / L - (s - 1))^(d_k/(d_k-2)): no change while T <= L. Shape (head_dim // 2,). Chapter 12."""
    _check_method(head_dim, base, minimum=4, factor=factor,
                  original_max_position_embeddings=original_max_position_embeddings, seq_len=seq_len)
    L, T = original_max_position_embeddings, max(seq_len, original_max_position_embeddings)
    return _inv_freq(head_dim, base * (factor * T / L - (factor - 1)) ** (head_dim / (head_dim - 2)))


def yarn_inv_freq(head_dim: int, base: float, factor: float, original_max_position_embeddings: int,
                  beta_fast: float = 32.0, beta_slow: float = 1.0, truncate: bool = True,
                  ramp: str = "index") -> torch.Tensor:
    """YaRN's frequencies, "NTK-by-parts" (Peng et al. 2024): theta_i' = (1 - g_i) theta_i / s + g_i theta_i.

    g_i from :func:`yarn_ramp` is 1 for planes that turn more than beta_fast times in L tokens (kept) and
    0 for those that turn less than beta_slow times (interpolated, as PI); the paper calls the thresholds
    beta and alpha. Pair it with :func:`yarn_attention_factor`. Shape (head_dim // 2,), float32. Chapter 12.
    """
    _check_method(head_dim, base, factor=factor, original_max_position_embeddings=original_max_position_embeddings,
                  beta_fast=beta_fast, beta_slow=beta_slow, truncate=truncate, ramp=ramp)
    theta = _inv_freq(head_dim, base)
    keep = yarn_ramp(head_dim, base, original_max_position_embeddings, beta_fast, beta_slow, ramp, truncate)
    return theta / factor * (1 - keep) + theta * keep  # (d/2,): keep = 1 extrapolates, 0 interpolates


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
    _check_method(head_dim, base, original_max_position_embeddings=original_max_position_embeddings,
                  beta_fast=beta_fast, beta_slow=beta_slow, by=by, truncate=truncate)
    L, planes = original_max_position_embeddings, torch.arange(head_dim // 2, dtype=torch.float32)  # (d/2,)
    if by == "ratio":
        r = L * (1.0 / (base ** (2 * planes / head_dim))) / (2 * math.pi)  # r_i = L / lambda_i
        return ((r - beta_slow) / (beta_fast - beta_slow)).clamp(0, 1)
    low, high = (head_dim * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))  # idx(turns)
                 for turns in (beta_fast, beta_slow))
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
    _check_factor("s", s)
    return 0.1 * math.log(s) + 1.0


def llama3_inv_freq(head_dim: int, base: float, factor: float, original_max_position_embeddings: int,
                    low_freq_factor: float = 1.0, high_freq_factor: float = 4.0) -> torch.Tensor:
    """Llama 3.1's rule (``apply_scaling`` in Meta's llama-models): keep planes of wavelength lambda_i < L / high,
    divide by s those with lambda_i > L / low, blend linearly in L / lambda_i between: YaRN's ``ramp="ratio"``
    with beta_slow = low, beta_fast = high and no temperature. Shape (head_dim // 2,), float32. Chapter 12."""
    _check_method(head_dim, base, factor=factor, original_max_position_embeddings=original_max_position_embeddings,
                  low_freq_factor=low_freq_factor, high_freq_factor=high_freq_factor)
    L, low, high = original_max_position_embeddings, low_freq_factor, high_freq_factor
    theta = _inv_freq(head_dim, base)
    wavelength = 2 * math.pi / theta  # (d/2,)
    keep = ((L / wavelength - low) / (high - low)).clamp(0, 1)  # 1 for wavelength <= L/high, 0 for >= L/low
    return torch.where(wavelength > L / low, theta / factor, (1 - keep) * theta / factor + keep * theta)


SCALED = {"linear": linear_inv_freq, "ntk": ntk_inv_freq, "dynamic": dynamic_inv_freq, "yarn": yarn_inv_freq,
          "llama3": llama3_inv_freq}  # scaling["type"] -> the method
METHOD_TYPES = {"RoPE": None, "PI": "linear", "NTK": "ntk", "NTK-by-parts": "yarn", "YaRN": "yarn"}


def scaling_for(method: str, s: float, original_length: int) -> dict | None:
    """The scaling dict of a method (a key of ``METHOD_TYPES``) for factor s and training length L: None for
    "RoPE" or s = 1. NTK-by-parts and YaRN share their frequencies; YaRN adds a temperature. Chapter 12."""
    _check_rescale(method, s, original_length)
    kind = METHOD_TYPES[method]
    if kind is None or s == 1:
        return None
    scaling = {"type": kind, "factor": float(s)}
    if kind == "yarn":
        scaling["original_max_position_embeddings"] = original_length
    return scaling


def rescale_rope(model: nn.Module, method: str, s: float, original_length: int) -> nn.Module:
    """A copy of a RoPE ``model`` trained on ``original_length`` tokens, stretched s times by ``method``.

    The frequencies come from :func:`scaling_for`; nothing is trained. For YaRN, the attention factor
    sqrt(1/t) = 0.1 ln s + 1 multiplies q and k; since RoPE is linear, that is the same as multiplying the rows
    of W_Q and W_K by it once (the logits grow by 1/t). ``model``: an ``lmbook.model.Transformer``. Chapter 12.
    """
    _check_rescale_rope(model, method, s, original_length)
    stretched = copy.deepcopy(model)  # the trained model stays as it is
    scaling = scaling_for(method, s, original_length)
    stretched.inv_freq = scaled_inv_freq(model.config.head_dim, model.config.rope_base, scaling)  # (d/2,)
    if method == "YaRN" and s > 1:
        factor = yarn_attention_factor(s)  # sqrt(1/t)
        with torch.no_grad():
            for block in stretched.blocks:
                for proj in (block.attn.q_proj, block.attn.k_proj):
                    proj.weight.mul_(factor)
                    if proj.bias is not None:
                        proj.bias.mul_(factor)
    return stretched


# ---- argument checks: each raises a TypeError or ValueError naming the argument ---------------------------------

def _check_factor(name, value):
    validate.number(name, value)
    if value < 1:
        raise ValueError(f"{name} must be a number >= 1 (the context is stretched s times), got {value!r}")


def _check_positive(name, value):
    validate.number(name, value, low=0, low_open=True)


_OPTION_CHECKS = {  # option -> check(name, value)
    "factor": _check_factor,
    "original_max_position_embeddings": validate.integer,  # L >= 1
    "seq_len": lambda name, value: validate.integer(name, value, low=0),
    "beta_fast": _check_positive, "beta_slow": _check_positive,
    "low_freq_factor": _check_positive, "high_freq_factor": _check_positive,
    "truncate": validate.boolean,
    "ramp": lambda name, value: validate.choice(name, value, ("index", "ratio")),
    "by": lambda name, value: validate.choice(name, value, ("index", "ratio")),
}


def _check_options(options, named=str):
    """Each option's value, and the two orderings; ``named(key)`` is how a message names the option."""
    for key, value in options.items():
        _OPTION_CHECKS[key](named(key), value)
    for fast, slow in (("beta_fast", "beta_slow"), ("high_freq_factor", "low_freq_factor")):
        if fast in options and not options[fast] > options[slow]:
            raise ValueError(f"{named(fast)} must exceed {named(slow)} > 0, got {options[fast]!r} and "
                             f"{options[slow]!r}")


def _check_head_dim_base(head_dim, base, minimum=2):
    validate.integer("head_dim", head_dim)
    if head_dim < minimum or head_dim % 2:
        raise ValueError(f"head_dim must be an even int >= {minimum} (RoPE turns pairs of features), got {head_dim!r}")
    validate.number("base", base, low=1, low_open=True)


def _check_method(head_dim, base, minimum=2, **options):
    _check_head_dim_base(head_dim, base, minimum)
    _check_options(options)


def _check_scaling(head_dim, base, scaling):
    if scaling is not None and not isinstance(scaling, dict):
        raise TypeError(f"scaling must be None or a dict such as {{'type': 'linear', 'factor': 2.0}}, got "
                        f"{validate.describe(scaling)}")
    kind = None if scaling is None else scaling.get("type")
    if scaling is not None:
        validate.choice("scaling['type']", kind, SCALED)
    _check_head_dim_base(head_dim, base, 4 if kind in ("ntk", "dynamic") else 2)
    if scaling is None:
        return
    params = inspect.signature(SCALED[kind]).parameters
    keys = [k for k in params if k not in ("head_dim", "base")]  # factor, then the method's options
    if unknown := sorted(set(scaling) - {"type", *keys}):
        raise ValueError(f"scaling type {kind!r} takes the keys {('type', *keys)}, got unknown {unknown}")
    for key in keys:
        if key not in scaling and params[key].default is inspect.Parameter.empty:
            raise ValueError(f"scaling['{key}'] is required for type {kind!r}"
                             + (" (the training context length L)" if key.startswith("original") else ""))
    _check_options({k: scaling.get(k, params[k].default) for k in keys}, lambda k: f"scaling['{k}']")


def _check_rescale(method, s, original_length):
    validate.choice("method", method, METHOD_TYPES)
    _check_factor("s", s)
    validate.integer("original_length", original_length)


def _check_rescale_rope(model, method, s, original_length):
    _check_rescale(method, s, original_length)
    if not isinstance(model, nn.Module) or not hasattr(model, "config") or not hasattr(model, "blocks"):
        raise TypeError(f"model must be an lmbook.model.Transformer, got {validate.describe(model)}")
    if model.config.positional != "rope":
        raise ValueError(f"rescale_rope needs a RoPE model, got model with positional={model.config.positional!r}")
