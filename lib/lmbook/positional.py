"""Positional information for the Transformer: rotary position embeddings (RoPE).

Self-attention is permutation-equivariant: without positions, "dog bites man" and "man bites dog"
give the same multiset of outputs. ``lmbook.model`` offers three choices, selected by name:
``"none"``, ``"learned"`` (an ``nn.Embedding`` of absolute positions, added to the token embeddings,
as in GPT-2; it lives in the model) and ``"rope"`` (this module), which rotates queries and keys.

RoPE (Su et al. 2021). Split the head dimension d into d/2 pairs; pair i at position p is rotated by
the angle p * theta_i with theta_i = base^(-2i/d), i = 0 .. d/2 - 1. Rotating q at position m and k at
position n makes their dot product depend on m - n only. Two pairings of the d features are in use:

- ``"half"`` (GPT-NeoX, Llama in transformers): pair i is (x_i, x_{i + d/2});
- ``"interleaved"`` (the RoFormer paper, llama.cpp, torchtune): pair i is (x_{2i}, x_{2i+1}).

They are the same model up to a fixed permutation of the rows of W_Q and W_K (chapter 6 loads a
llama.cpp file into half pairing by undoing that permutation).

Chapter 6 uses this module; chapter 8 extends it (sinusoidal tables, ALiBi, RoPE scaling for
longer contexts). Left out here: everything but plain RoPE.
"""

from __future__ import annotations

import torch

__all__ = ["rope_inv_freq", "apply_rope", "PAIRINGS"]

PAIRINGS = ("half", "interleaved")


def rope_inv_freq(head_dim: int, base: float = 10000.0, scaling=None) -> torch.Tensor:
    """The rotation frequencies theta_i = base^(-2i/d) for i = 0 .. d/2 - 1: shape (head_dim // 2,).

    Computed in float32 exactly as transformers does, so angles (and logits) match it bit for bit.
    ``scaling`` (context extension: linear, NTK, YaRN ...) is chapter 8's subject; only None is accepted here.
    """
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be an even int >= 2 for RoPE (it rotates pairs), got {head_dim!r}")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1:
        raise ValueError(f"base must be a number > 1, got {base!r}")
    if scaling is not None:
        raise ValueError(f"scaling must be None here (RoPE scaling is added in chapter 8), got {scaling!r}")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim  # 2i / d
    return 1.0 / (base**exponents)  # (head_dim // 2,), float32


def apply_rope(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, pairing: str = "half"):
    """Rotate each pair (a, b) of x by the angle p * theta_i: (a, b) -> (a cos - b sin, b cos + a sin).

    Shapes: x (B, H, T, d) or (T, d); positions (T,) or (B, T) integer positions of the T rows;
    inv_freq (d/2,) from :func:`rope_inv_freq`. Returns a tensor shaped and typed like x.
    Angles are formed in float32 (as transformers does) and cos/sin cast to x's dtype. Chapter 6.
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
    angles = positions.float()[..., None] * inv_freq.to(x.device).float()  # (T, d/2) or (B, T, d/2)
    if positions.dim() == 2 and x.dim() == 4:
        angles = angles[:, None]  # (B, 1, T, d/2): the same rotation for every head
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if pairing == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]  # pair i = (x_i, x_{i + d/2})
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]  # pair i = (x_{2i}, x_{2i+1})
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)  # re-interleave
