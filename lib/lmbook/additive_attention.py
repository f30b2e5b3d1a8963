"""Additive attention, chapter 7: the score of Bahdanau et al. (2015), the first attention for translation.

A small network scores each (query, key) pair, e_ij = v_a^T tanh(q_i W_q + k_j W_k), instead of the dot
product q_i . k_j that Luong et al. (2015) and the Transformer use. Query and key may have different sizes,
and the score is bounded, |e_ij| <= ||v_a||_1, since tanh lies in (-1, 1). The weights and the context
vector are then those of any attention: a softmax over the keys and a weighted average of the values.

Row convention, as the rest of the book: q (..., T_q, d_q), k (..., T_k, d_k), W_q (d_q, d_a), W_k (d_k, d_a),
v_a (d_a,). Left out: the recurrent encoder and decoder around it (chapter 13) and multiple heads.
"""

from __future__ import annotations

import torch

from . import validate
from .attention import _check_finite, _check_mask, softmax

__all__ = ["additive_scores", "additive_attention"]


def additive_scores(q, k, W_q, W_k, v_a) -> torch.Tensor:
    """e_ij = v_a^T tanh(q_i W_q + k_j W_k): q (..., T_q, d_q), k (..., T_k, d_k) -> (..., T_q, T_k). Chapter 7."""
    _check_additive(q, k, W_q, W_k, v_a)
    hidden = torch.tanh((q @ W_q).unsqueeze(-2) + (k @ W_k).unsqueeze(-3))  # (..., T_q, T_k, d_a): every pair
    return hidden @ v_a  # (..., T_q, T_k)


def additive_attention(q, k, values, W_q, W_k, v_a, mask=None):
    """Bahdanau attention: weights = softmax_j(e_ij) over the keys (mask: bool, True = attend), context_i =
    sum_j weights_ij values_j. values (..., T_k, d_v) -> (context (..., T_q, d_v), weights (..., T_q, T_k)). Ch. 7"""
    scores = additive_scores(q, k, W_q, W_k, v_a)  # (..., T_q, T_k)
    _check_values(values, k, mask, scores.shape)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)  # (..., T_q, T_k)
    return weights @ values, weights  # (..., T_q, d_v)


# ----- checks: each raises a TypeError or ValueError naming the argument ----------------------------------

def _check_additive(q, k, W_q, W_k, v_a) -> None:
    for name, t in (("q", q), ("k", k)):
        _check_finite(name, t)
        if t.dim() < 2 or t.shape[-1] == 0:
            raise ValueError(f"{name} must have shape (..., T, d) with d >= 1, got {tuple(t.shape)}")
    validate.tensor("v_a", v_a, ndim=1)
    if v_a.numel() == 0:
        raise ValueError("v_a must have shape (d_a,) with d_a >= 1, got (0,)")
    validate.tensor("W_q", W_q, shape=(q.shape[-1], v_a.shape[0]))
    validate.tensor("W_k", W_k, shape=(k.shape[-1], v_a.shape[0]))
    for name, t in (("k", k), ("W_q", W_q), ("W_k", W_k), ("v_a", v_a)):
        if t.dtype != q.dtype:
            raise TypeError(f"{name} must have the dtype of q ({q.dtype}), got {t.dtype}")
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading axes of q {tuple(q.shape)} and k {tuple(k.shape)} do not broadcast") from None


def _check_values(values, k, mask, scores: tuple) -> None:
    _check_finite("values", values)
    if values.dim() < 2 or values.shape[-2] != k.shape[-2] or values.shape[-1] == 0 or values.dtype != k.dtype:
        raise ValueError(f"values must have shape (..., T_k={k.shape[-2]}, d_v >= 1) and dtype {k.dtype}, "
                         f"got {validate.describe(values)}")
    try:
        torch.broadcast_shapes(scores[:-2], values.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading axes of values {tuple(values.shape)} do not broadcast with the scores' "
                         f"{tuple(scores[:-2])}") from None
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = attend), got {validate.describe(mask)}")
        _check_mask(mask, tuple(scores))
