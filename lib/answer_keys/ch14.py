"""Answer keys for chapter 14 (mixture of experts)."""

from __future__ import annotations

import math

import numpy as np
from lmbook.teaching.checks import Case

from . import Key

# The project's runs (ch14-granularity), made by ``python -m lmbook.experiments.moe_runs --project`` with the recipe
# of the stored runs and kept here, outside the shipped package, because they are the exercise's answer: the final
# validation loss for seeds 0, 1 and 2, the parameter counts, and the median seconds per training step measured in
# turns with the stored arms (``moe_runs.step_times``).
GRANULARITY_RUNS = {
    "moe, 4 experts top-1": {"val_loss": [3.2457, 3.2935, 3.2384], "total": 2_091_904, "active": 903_040,
                             "seconds_per_step": 0.4041},
    "moe, 16 experts top-4": {"val_loss": [3.1908, 3.2198, 3.1747], "total": 2_096_512, "active": 907_648,
                              "seconds_per_step": 0.4879},
}


def balancing_loss(logits, top_k):
    logits = np.asarray(logits, dtype=float)
    N, E = logits.shape
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    chosen = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]  # (N, k)
    f = np.bincount(chosen.ravel(), minlength=E) / (top_k * N)
    return float(E * (f * probs.mean(axis=0)).sum())


def experts_read(n_experts, top_k, batch):
    missed = 1.0
    for _ in range(batch):  # each token misses a given expert with probability C(E - 1, k) / C(E, k)
        missed *= math.comb(n_experts - 1, top_k) / math.comb(n_experts, top_k)
    return n_experts * (1 - missed)


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
    "experts_read": Key(experts_read, lambda: [
        Case((128, 8, 11)),  # Qwen3-30B-A3B near the batch at which half of its experts are read
        Case((256, 8, 32)),  # DeepSeek-V3's routed experts
        Case((8, 2, 0)),
        Case((10, 3, 7)),
    ]),
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
