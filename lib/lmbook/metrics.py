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

from . import validate

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


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean negative log-likelihood in nats over the scored tokens (chapter 1).

    CE = -(1/N) sum_t log softmax(logits_t)[targets_t], over the N targets != ignore_index.
    Shapes: logits (..., V), targets (...). Returns a 0-d tensor (differentiable).
    """
    _check_logits_targets(logits, targets, ignore_index)
    scored = targets != ignore_index  # (...)
    logp = torch.log_softmax(logits, dim=-1)  # (..., V)
    safe = torch.where(scored, targets, torch.zeros_like(targets)).long()  # ignored positions read class 0
    nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (...)
    nll = torch.where(scored, nll, 0.0)  # not nll * scored: class 0 may be masked (-inf), and inf * 0 is NaN
    return nll.sum() / scored.sum()


def perplexity(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """PPL = exp(cross_entropy): the effective number of equally likely choices per token (chapter 1).

    Shapes: logits (..., V), targets (...). Returns a 0-d tensor.
    """
    return torch.exp(cross_entropy(logits, targets, ignore_index))


def perplexity_from_probs(token_probs) -> float:
    """PPL = (prod_i p_i)^(-1/N) = exp(-(1/N) sum_i log p_i), for the probabilities p_i a model gave the
    N observed tokens (chapter 1). Pass the tokens of a whole dataset at once to get the dataset's perplexity.

    ``token_probs``: a list, array or tensor of N numbers in (0, 1].
    """
    _check_token_probs(token_probs)
    p = np.asarray(token_probs, dtype=np.float64).ravel()  # (N,)
    return float(np.exp(-np.mean(np.log(p))))


def entropy(p, base: float = math.e):
    """H(P) = -sum_x P(x) log P(x), with 0 log 0 = 0 (chapter 1). ``base=2`` gives bits.

    ``p``: a distribution (K,), or a batch (..., K) whose last axis sums to 1; returns a float or an array (...).
    """
    _check_distributions(base, p=p)
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * _log(np.where(p > 0, p, 1.0), base), 0.0)
    return terms.sum(axis=-1) if terms.ndim > 1 else float(terms.sum())


def kl_divergence(p, q, base: float = math.e):
    """KL(P || Q) = sum_x P(x) log(P(x)/Q(x)) (chapter 1). Infinite when Q(x) = 0 < P(x).

    ``p`` and ``q``: distributions of the same shape (..., K), along the last axis.
    """
    _check_distributions(base, p=p, q=q)
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, p / np.where(q > 0, q, 0.0), 1.0)
        terms = np.where(p > 0, p * _log(ratio, base), 0.0)
    return terms.sum(axis=-1) if terms.ndim > 1 else float(terms.sum())


def _log(x, base):
    return np.log(x) / math.log(base)


def smoothed_targets(targets: torch.Tensor, num_classes: int, epsilon: float,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Label-smoothed target distributions q' = (1 - eps) * onehot(y) + eps / K  (uniform u(k) = 1/K).

    Shapes: targets (...) of class ids -> (..., K). Each row sums to 1 (chapter 1).
    """
    _check_smoothed_targets(targets, num_classes, epsilon, dtype)
    onehot = torch.nn.functional.one_hot(targets.long(), num_classes).to(dtype)  # (..., K)
    return (1.0 - epsilon) * onehot + epsilon / num_classes


def label_smoothed_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, epsilon: float, ignore_index: int = -100
) -> torch.Tensor:
    """Cross-entropy against the smoothed targets: mean_t [ -sum_k q'_t(k) log p_t(k) ] (chapter 1).

    Equals torch's ``CrossEntropyLoss(label_smoothing=epsilon)``. Shapes: logits (..., V), targets (...).
    """
    _check_label_smoothing(logits, targets, epsilon, ignore_index)
    scored = targets != ignore_index  # (...)
    logp = torch.log_softmax(logits, dim=-1)[scored]  # (N, V)
    q = smoothed_targets(targets[scored], logits.shape[-1], epsilon, dtype=logp.dtype)  # (N, V)
    return -torch.where(q > 0, q * logp, 0.0).sum(-1).mean()  # 0 * log 0 = 0 for a masked class


def precision_recall_f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """P = TP/(TP+FP), R = TP/(TP+FN), F1 = 2PR/(P+R) = 2TP/(2TP+FP+FN). An undefined ratio is 0.

    ``tp``, ``fp``, ``fn``: counts of true positives, false positives and false negatives (chapter 1).
    """
    _check_counts(tp=tp, fp=fp, fn=fn)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return precision, recall, f1


# ----- argument checks ---------------------------------------------------------------------------------

def _check_logits_targets(logits, targets, ignore_index) -> None:
    validate.tensor("logits", logits, finite=False)
    validate.tensor("targets", targets, kind="int")
    validate.integer("ignore_index", ignore_index, low=None)
    if torch.isnan(logits).any() or (logits == math.inf).any():
        raise ValueError("logits must not hold NaN or +inf (-inf, a masked class, is allowed)")
    if logits.dim() < 1 or logits.shape[-1] == 0 or logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits must have shape (..., V) with V >= 1 and targets the leading shape (...); "
                         f"got logits {tuple(logits.shape)} and targets {tuple(targets.shape)}")
    scored = targets != ignore_index
    if not scored.any():
        raise ValueError(f"every entry of targets equals ignore_index={ignore_index}: there is no token to score")
    V = logits.shape[-1]
    bad = scored & ((targets < 0) | (targets >= V))
    if bad.any():
        raise ValueError(f"targets must be in [0, {V}) or equal ignore_index, found {targets[bad][0].item()}")


def _check_label_smoothing(logits, targets, epsilon, ignore_index) -> None:
    _check_logits_targets(logits, targets, ignore_index)
    validate.number("epsilon", epsilon, low=0.0, high=1.0)
    if logits.shape[-1] < 2:
        raise ValueError(f"logits must score V >= 2 classes for label smoothing, got V = {logits.shape[-1]}")


def _as_float_array(name: str, value) -> np.ndarray:
    """``value`` as a float64 array, or a TypeError naming it (never a str read as characters)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise TypeError(f"{name} must be a list, array or tensor of numbers, got {validate.describe(value)}")
    try:
        array = np.asarray(value)
    except ValueError:  # ragged nesting
        array = np.asarray(value, dtype=object)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold only numbers, got {validate.describe(value)}")
    return array.astype(np.float64)


def _check_token_probs(token_probs) -> None:
    p = _as_float_array("token_probs", token_probs)
    if p.size == 0:
        raise ValueError("token_probs is empty: perplexity needs at least one token")
    if np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise ValueError(f"token_probs must lie in (0, 1], got values from {np.min(p)} to {np.max(p)}")


def _check_distributions(base, atol: float = 1e-6, **distributions) -> None:
    validate.number("base", base, low=0.0, low_open=True)
    if base == 1:
        raise ValueError("base must be > 0 and != 1 (2 gives bits, e nats), got 1")
    shapes = {}
    for name, value in distributions.items():
        p = _as_float_array(name, value)
        if p.ndim == 0 or p.shape[-1] == 0:
            raise ValueError(f"{name} must be a non-empty probability vector, got shape {p.shape}")
        if np.any(~np.isfinite(p)) or np.any(p < 0):
            raise ValueError(f"{name} must hold non-negative finite probabilities")
        sums = p.sum(axis=-1)
        if not np.allclose(sums, 1.0, atol=atol):
            raise ValueError(f"{name} must sum to 1 along its last axis, got sum(s) {np.round(sums, 6)}")
        shapes[name] = p.shape
    if len(set(shapes.values())) > 1:
        raise ValueError(f"p and q must have the same shape, got {shapes.get('p')} and {shapes.get('q')}")


def _check_smoothed_targets(targets, num_classes, epsilon, dtype) -> None:
    validate.tensor("targets", targets, kind="int")
    validate.integer("num_classes", num_classes, low=2)
    validate.number("epsilon", epsilon, low=0.0, high=1.0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype, got {validate.describe(dtype)}")
    if targets.numel() and (targets.min() < 0 or targets.max() >= num_classes):
        raise ValueError(f"targets must be in [0, {num_classes}), got values {targets.min()}..{targets.max()}")


def _check_counts(**counts) -> None:
    for name, value in counts.items():
        validate.integer(name, value, low=0)
