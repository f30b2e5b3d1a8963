"""Chapter 1: how a language model is scored.

Cross-entropy and perplexity from logits, perplexity from token probabilities, entropy and
KL divergence with an explicit log base, label smoothing, and precision / recall / F1.

Conventions (the ones torch, torchmetrics and Hugging Face use):
- natural logs (nats) unless ``base`` says otherwise; bits = nats / ln 2;
- a dataset's perplexity is exp(total NLL / total scored tokens), never a mean of per-string perplexities;
- ``targets`` are *not* shifted here: position t of ``logits`` scores ``targets[t]``. A causal LM's caller
  shifts (logits[:, :-1] against ids[:, 1:]).

Left out on purpose: BLEU/ROUGE and other generation metrics.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = [
    "cross_entropy",
    "perplexity",
    "perplexity_from_probs",
    "entropy",
    "kl_divergence",
    "smoothed_targets",
    "label_smoothed_cross_entropy",
    "precision_recall_f1",
]


def _check_logits_targets(logits, targets, ignore_index):
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise TypeError(
            f"logits and targets must be torch tensors, got {type(logits).__name__} and {type(targets).__name__}"
        )
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor, got dtype {logits.dtype}")
    if logits.dim() < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits must have shape (..., V) and targets the leading shape (...); "
            f"got logits {tuple(logits.shape)} and targets {tuple(targets.shape)}"
        )
    if targets.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError(f"targets must hold integer class ids, got dtype {targets.dtype}")
    scored = targets != ignore_index
    if not scored.any():
        raise ValueError(f"every target equals ignore_index={ignore_index}: there is no token to score")
    V = logits.shape[-1]
    bad = scored & ((targets < 0) | (targets >= V))
    if bad.any():
        raise ValueError(f"targets must be in [0, {V}) or equal ignore_index, found {targets[bad][0].item()}")
    return scored


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean negative log-likelihood in nats over the scored tokens.

    CE = -(1/N) sum_t log softmax(logits_t)[targets_t], over the N targets != ignore_index.
    Shapes: logits (..., V), targets (...). Returns a 0-d tensor (differentiable).
    """
    scored = _check_logits_targets(logits, targets, ignore_index)
    logp = torch.log_softmax(logits, dim=-1)  # (..., V)
    safe = torch.where(scored, targets, torch.zeros_like(targets)).long()
    nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (...)
    return (nll * scored).sum() / scored.sum()


def perplexity(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """exp(cross_entropy): the effective number of equally likely choices per token."""
    return torch.exp(cross_entropy(logits, targets, ignore_index))


def perplexity_from_probs(token_probs) -> float:
    """PPL = (prod_i p_i)^(-1/N) = exp(-(1/N) sum_i log p_i), for the probabilities p_i a model gave the
    N observed tokens. Pass the tokens of a whole dataset at once to get the dataset's perplexity."""
    p = np.asarray(token_probs, dtype=np.float64).ravel()
    if p.size == 0:
        raise ValueError("token_probs is empty: perplexity needs at least one token")
    if np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise ValueError(f"token_probs must lie in (0, 1], got values from {p.min()} to {p.max()}")
    return float(np.exp(-np.mean(np.log(p))))


def _as_distribution(name, p, atol=1e-6):
    p = np.asarray(p, dtype=np.float64)
    if p.ndim == 0 or p.shape[-1] == 0:
        raise ValueError(f"{name} must be a non-empty probability vector, got shape {p.shape}")
    if np.any(~np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"{name} must hold non-negative finite probabilities")
    sums = p.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=atol):
        raise ValueError(f"{name} must sum to 1 along its last axis, got sum(s) {np.round(sums, 6)}")
    return p


def _log(x, base):
    if base is None or base <= 0 or base == 1:
        raise ValueError(f"base must be > 0 and != 1, got {base!r}")
    return np.log(x) / math.log(base)


def entropy(p, base: float = math.e):
    """H(P) = -sum_x P(x) log P(x), with 0 log 0 = 0. ``base=2`` gives bits. Works along the last axis."""
    p = _as_distribution("p", p)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * _log(np.where(p > 0, p, 1.0), base), 0.0)
    return terms.sum(axis=-1) if terms.ndim > 1 else float(terms.sum())


def kl_divergence(p, q, base: float = math.e):
    """KL(P || Q) = sum_x P(x) log(P(x)/Q(x)). Infinite when Q(x) = 0 < P(x). Works along the last axis."""
    p, q = _as_distribution("p", p), _as_distribution("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, p / np.where(q > 0, q, 0.0), 1.0)
        terms = np.where(p > 0, p * _log(ratio, base), 0.0)
    return terms.sum(axis=-1) if terms.ndim > 1 else float(terms.sum())


def smoothed_targets(targets: torch.Tensor, num_classes: int, epsilon: float,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Label-smoothed target distributions q' = (1 - eps) * onehot(y) + eps / K  (uniform u(k) = 1/K).

    Shapes: targets (...) of class ids -> (..., K). Each row sums to 1.
    """
    if not isinstance(targets, torch.Tensor):
        raise TypeError(f"targets must be a torch tensor, got {type(targets).__name__}")
    if not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2, got {num_classes!r}")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
    if targets.numel() and (targets.min() < 0 or targets.max() >= num_classes):
        raise ValueError(f"targets must be in [0, {num_classes}), got values {targets.min()}..{targets.max()}")
    onehot = torch.nn.functional.one_hot(targets.long(), num_classes).to(dtype)
    return (1.0 - epsilon) * onehot + epsilon / num_classes


def label_smoothed_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, epsilon: float, ignore_index: int = -100
) -> torch.Tensor:
    """Cross-entropy against the smoothed targets: mean_t [ -sum_k q'_t(k) log p_t(k) ].

    Equals torch's ``CrossEntropyLoss(label_smoothing=epsilon)``. Shapes: logits (..., V), targets (...).
    """
    scored = _check_logits_targets(logits, targets, ignore_index)
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
    logp = torch.log_softmax(logits, dim=-1)[scored]  # (N, V)
    q = smoothed_targets(targets[scored], logits.shape[-1], epsilon, dtype=logp.dtype)  # (N, V)
    return -(q * logp).sum(-1).mean()


def precision_recall_f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """P = TP/(TP+FP), R = TP/(TP+FN), F1 = 2PR/(P+R) = 2TP/(2TP+FP+FN). An undefined ratio is 0."""
    for name, v in (("tp", tp), ("fp", fp), ("fn", fn)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return precision, recall, f1
