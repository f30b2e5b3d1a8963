"""Chapter 14's self-checks accept the right answer and reject plausible wrong ones with a message."""

import itertools
import math

import numpy as np
import torch
from check_helpers import accepts_then_rejects, verdict
from lmbook import checks
from lmbook.moe import load_balancing_loss


def test_balancing_loss_infimum(capsys):
    ok, out = verdict(capsys, checks.check_balancing_loss_infimum, 0.875, "balancing_loss_infimum")
    assert ok and "✓" in out
    for wrong in (1.0, 0.5, 2.0, 0.75):  # uniform routing, half, collapse, a mistaken optimum
        assert not verdict(capsys, checks.check_balancing_loss_infimum, wrong, "balancing_loss_infimum")[0]


def test_balancing_loss(capsys):
    def good(logits, top_k):  # the library's torch version is the independent reference here
        return load_balancing_loss(torch.as_tensor(np.asarray(logits), dtype=torch.float64), top_k).item()

    def hf_convention(logits, top_k):  # f over N tokens: sums to k
        return top_k * good(logits, top_k)

    accepts_then_rejects(capsys, "balancing_loss", good, hf_convention, "f sums to 1")

    def top_k_then_softmax(logits, top_k):  # P from the softmax over the chosen experts only
        z = np.asarray(logits, dtype=float)
        N, E = z.shape
        chosen = np.argsort(-z, axis=1)[:, :top_k]
        probs = np.zeros_like(z)
        for t in range(N):
            w = np.exp(z[t, chosen[t]])
            probs[t, chosen[t]] = w / w.sum()
        f = np.bincount(chosen.ravel(), minlength=E) / (top_k * N)
        return float(E * (f * probs.mean(0)).sum())

    assert not verdict(capsys, checks.check_balancing_loss, top_k_then_softmax, "balancing_loss")[0]

    def without_e(logits, top_k):
        return good(logits, top_k) / np.asarray(logits).shape[1]

    assert not verdict(capsys, checks.check_balancing_loss, without_e, "balancing_loss")[0]


def test_experts_read(capsys):
    def good(n_experts, top_k, batch):  # independent forms: count k-subsets for small E, draw by draw otherwise
        if math.comb(n_experts, top_k) < 10_000:
            subsets = list(itertools.combinations(range(n_experts), top_k))
            miss = sum(0 not in s for s in subsets) / len(subsets)  # one token misses expert 0
        else:  # k draws without replacement, each missing expert 0
            miss = math.prod((n_experts - 1 - j) / (n_experts - j) for j in range(top_k))
        return n_experts * (1 - miss**batch)

    assert verdict(capsys, checks.check_experts_read, good, "experts_read")[0]

    def no_overlap(n_experts, top_k, batch):  # B k distinct experts, capped at E
        return min(n_experts, batch * top_k)

    accepts_then_rejects(capsys, "experts_read", good, no_overlap, "share an expert")

    def with_replacement(n_experts, top_k, batch):  # k B independent draws of one expert each
        return n_experts * (1 - (1 - 1 / n_experts) ** (batch * top_k))

    assert not verdict(capsys, checks.check_experts_read, with_replacement, "experts_read")[0]


def test_expert_choice(capsys):
    def good(scores, capacity):  # an independent form: rank each column with a sort of (score, row) pairs
        scores = np.asarray(scores, dtype=float)
        gates = np.zeros_like(scores)
        for e in range(scores.shape[1]):
            for _, t in sorted(((-s, t) for t, s in enumerate(scores[:, e])))[:capacity]:
                gates[t, e] = scores[t, e]
        return gates

    def token_choice(scores, capacity):  # each token picks its top experts instead
        scores = np.asarray(scores, dtype=float)
        gates = np.zeros_like(scores)
        for t, row in enumerate(scores):
            top = np.argsort(-row)[:capacity]
            gates[t, top] = row[top]
        return gates

    accepts_then_rejects(capsys, "expert_choice", good, token_choice, "each expert (column)")

    def ones(scores, capacity):
        return (good(scores, capacity) > 0).astype(float)

    assert not verdict(capsys, checks.check_expert_choice, ones, "expert_choice")[0]


def test_expected_drop_fraction(capsys):
    def good(n_tokens, n_experts, capacity_factor):  # an independent form: N - E[sum of min(X_e, C)]
        C, p = math.ceil(capacity_factor * n_tokens / n_experts), 1 / n_experts
        kept = sum(min(x, C) * math.comb(n_tokens, x) * p**x * (1 - p) ** (n_tokens - x)
                   for x in range(n_tokens + 1))
        return (n_tokens - n_experts * kept) / n_tokens

    assert verdict(capsys, checks.check_expected_drop_fraction, good, "expected_drop_fraction")[0]

    def floor_capacity2(n_tokens, n_experts, capacity_factor):
        C = math.floor(capacity_factor * n_tokens / n_experts)
        return good(n_tokens, n_experts, C * n_experts / n_tokens)

    accepts_then_rejects(capsys, "expected_drop_fraction", good, floor_capacity2, "round the capacity up")

    def one_expert_only(n_tokens, n_experts, capacity_factor):  # forgets the factor E
        return good(n_tokens, n_experts, capacity_factor) / n_experts

    assert not verdict(capsys, checks.check_expected_drop_fraction, one_expert_only, "expected_drop_fraction")[0]


def test_paired_gap(capsys):
    def good(losses, baseline):  # numpy, written differently from the key
        d = np.subtract(losses, baseline)
        return [float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))]

    assert verdict(capsys, checks.check_paired_gap, good, "paired_gap")[0]

    def unpaired(losses, baseline):  # the difference of the means, with the spread of one arm
        return [float(np.mean(losses) - np.mean(baseline)), float(np.std(losses, ddof=1) / np.sqrt(len(losses)))]

    assert not verdict(capsys, checks.check_paired_gap, unpaired, "paired_gap")[0]

    def population_sd(losses, baseline):  # ddof = 0
        d = np.subtract(losses, baseline)
        return [float(d.mean()), float(d.std() / np.sqrt(d.size))]

    assert not verdict(capsys, checks.check_paired_gap, population_sd, "paired_gap")[0]

    def no_sqrt_n(losses, baseline):  # the standard deviation, not the standard error
        d = np.subtract(losses, baseline)
        return [float(d.mean()), float(d.std(ddof=1))]

    assert not verdict(capsys, checks.check_paired_gap, no_sqrt_n, "paired_gap")[0]
