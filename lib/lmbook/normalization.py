"""Normalisation layers of a Transformer: LayerNorm and RMSNorm, over the features of each token. Chapter 9.

- :class:`LayerNorm` (Ba et al. 2016): y = (x - mean(x)) / sqrt(var(x) + eps) * g + b;
- :class:`RMSNorm` (Zhang & Sennrich 2019): y = x / sqrt(mean(x^2) + eps) * g, without centring and without b.

Both normalise the last axis of x (..., d), one token at a time, so no statistic mixes tokens or sequences.
``lmbook.model`` picks one by name (``TransformerConfig.norm``).

Left out on purpose: BatchNorm (its statistics mix the sequences of a batch, which a language model must not
do), DeepNorm's scaled residual and QK-norm; the fused kernels of torch.nn.
"""

from __future__ import annotations

import torch
from torch import nn

from . import validate

__all__ = ["LayerNorm", "RMSNorm"]


class LayerNorm(nn.Module):
    """y = (x - mean(x)) / sqrt(var(x) + eps) * g + b over the last axis of x (..., d), the biased variance
    (divide by d). bias=False drops b. Chapter 9."""

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        _check_norm(d, eps, bias)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))  # g
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None  # b

    def forward(self, x):
        _check_features(x, self.weight.shape[0])
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (..., 1)
        y = (x - mean) / torch.sqrt(var + self.eps) * self.weight
        return y if self.bias is None else y + self.bias


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * g over the last axis of x (..., d): LayerNorm without centring and
    without b (Zhang & Sennrich 2019). Chapter 9."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        _check_norm(d, eps)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))  # g

    def forward(self, x):
        _check_features(x, self.weight.shape[0])
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def _check_norm(d, eps, bias=False) -> None:
    validate.integer("d", d)
    validate.number("eps", eps, low=0, low_open=True)
    validate.boolean("bias", bias)


def _check_features(x, d: int) -> None:
    """Type and last-axis size only: a norm runs twice per block, so it never makes a pass over the values."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor (..., d), got {validate.describe(x)}")
    if x.dim() == 0 or x.shape[-1] != d:
        raise ValueError(f"x must have shape (..., d) with d={d}, got {tuple(x.shape)}")
