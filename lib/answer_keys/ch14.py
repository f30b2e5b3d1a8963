"""Answer keys for chapter 14 (mixture of experts)."""

from __future__ import annotations

import math

import numpy as np
from lmbook.teaching.checks import Case

from . import Key


def balancing_loss(logits, top_k):
    logits = np.asarray(logits, dtype=float)
    N, E = logits.shape
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    chosen = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]  # (N, k)
    f = np.bincount(chosen.ravel(), minlength=E) / (top_k * N)
    return float(E * (f * probs.mean(axis=0)).sum())


def moe_counts(vocab_size, d_model, n_layers, n_heads, n_kv_heads, head_dim, d_expert, n_experts, top_k):
    attention = 2 * d_model * n_heads * head_dim + 2 * d_model * n_kv_heads * head_dim
    expert = 3 * d_model * d_expert
    block = attention + n_experts * expert + n_experts * d_model + 2 * d_model
    total = 2 * vocab_size * d_model + n_layers * block + d_model
    return [total, total - n_layers * (n_experts - top_k) * expert]


def expert_choice(scores, capacity):
    scores = np.asarray(scores, dtype=float)
    gates = np.zeros_like(scores)
    for e in range(scores.shape[1]):
        picked = np.argsort(-scores[:, e], kind="stable")[:capacity]
        gates[picked, e] = scores[picked, e]
    return gates


def expected_drop_fraction(n_tokens, n_experts, capacity_factor):
    C, p = math.ceil(capacity_factor * n_tokens / n_experts), 1 / n_experts
    over = sum((x - C) * math.comb(n_tokens, x) * p**x * (1 - p) ** (n_tokens - x) for x in range(C + 1, n_tokens + 1))
    return n_experts * over / n_tokens


def paired_gap(losses, baseline):
    diffs = [a - b for a, b in zip(losses, baseline, strict=True)]
    mean = sum(diffs) / len(diffs)
    return [mean, math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))]


def _logits(seed, n, e, scale=1.0):
    return np.random.default_rng(seed).standard_normal((n, e)) * scale


def _scores(seed, n, e):
    logits = np.random.default_rng(seed).standard_normal((n, e))
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


KEYS = {
    "balancing_loss_infimum": Key(answer=7 / 8),
    "balancing_loss": Key(balancing_loss, lambda: [
        Case((_logits(10, 12, 4), 1)),
        Case((_logits(11, 9, 8, 2.0), 2)),
        Case((_logits(12, 20, 3), 2)),
        Case((_logits(13, 5, 5, 4.0), 4)),
    ], giveaways=("load_balancing_loss", "load_balancing_loss_func")),
    "moe_counts": Key(moe_counts, lambda: [
        Case((32768, 6144, 56, 48, 8, 128, 16384, 8, 2)),  # Mixtral 8x22B: 141B total, 39B active
        Case((151936, 2048, 48, 32, 4, 128, 768, 128, 8)),  # Qwen3-30B-A3B without its QK-norms
        Case((50, 8, 2, 2, 1, 4, 12, 3, 3)),
    ], giveaways=("parameter_counts", "num_parameters")),
    "expert_choice": Key(expert_choice, lambda: [
        Case((_scores(10, 10, 5), 2)),
        Case((_scores(11, 3, 6), 1)),
        Case((_scores(12, 7, 2), 7)),
    ]),
    "expected_drop_fraction": Key(expected_drop_fraction, lambda: [
        Case((128, 16, 1.0)),
        Case((32, 4, 1.5)),
        Case((5, 5, 0.5)),
        Case((100, 10, 2.0)),
    ]),
    "paired_gap": Key(paired_gap, lambda: [
        Case(([3.26, 3.29, 3.22], [3.19, 3.17, 3.20])),
        Case(([2.0, 2.5, 1.5, 3.0, 2.2], [2.1, 2.4, 1.7, 2.6, 2.2])),
        Case(([4.1, 3.95], [4.0, 4.05])),
    ]),
}
