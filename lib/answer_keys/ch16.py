"""Answer keys for chapter 16 (preference optimisation: Bradley–Terry, the KL-regularised optimum, DPO)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from lmbook.teaching.checks import Case

from . import Key

OPTIMUM_PROBLEM = ((0.6, 0.3, 0.1), (0.0, 1.0, 3.0), 2.0)  # pi_ref, r, beta


def _optimum_answer():
    ref, r, beta = OPTIMUM_PROBLEM
    weights = [p * math.exp(x / beta) for p, x in zip(ref, r, strict=True)]
    return weights[2] / sum(weights)


def robust_dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta, eps):
    z = beta * ((policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps))
    return ((-(1 - eps) * F.logsigmoid(z) + eps * F.logsigmoid(-z)) / (1 - 2 * eps)).mean()


def simpo_loss(policy_chosen_logps, policy_rejected_logps, chosen_lengths, rejected_lengths, beta, gamma):
    z = beta * (policy_chosen_logps / chosen_lengths - policy_rejected_logps / rejected_lengths) - gamma
    return -F.logsigmoid(z).mean()


def best_of_n_policy(ref_probs, rewards, n):
    ref_probs = torch.as_tensor(ref_probs, dtype=torch.float64)
    rewards = torch.as_tensor(rewards, dtype=torch.float64)
    at_most = torch.stack([ref_probs[rewards <= r].sum() for r in rewards])  # P(r(Y) <= r(y)), Y ~ pi_ref
    below = at_most - ref_probs  # P(r(Y) < r(y)); rewards are distinct
    return at_most ** n - below ** n


def length_bias(chosen_lengths, rejected_lengths):
    shorter = sum(c < r for c, r in zip(chosen_lengths, rejected_lengths, strict=True))
    longer = sum(c > r for c, r in zip(chosen_lengths, rejected_lengths, strict=True))
    return (shorter - longer) / len(chosen_lengths)


def _hidden_length_bias():
    return [
        Case(([4], [4])),  # one tie: 0
        Case(([2, 3, 4, 5, 6, 7], [7, 6, 5, 4, 3, 2])),  # symmetric: 0
        Case(([1, 2, 3, 32, 32], [32, 32, 32, 5, 32])),
        Case(([0, 0, 3], [0, 1, 2])),  # empty replies
        Case((list(range(1, 21)), [10] * 20)),
    ]


def _logps(g, n, scale, shift):
    return tuple(torch.randn(n, generator=g, dtype=torch.float64) * scale - shift for _ in range(4))


def _hidden_robust_dpo():
    g = torch.Generator().manual_seed(1612)
    zeros = torch.zeros(3, dtype=torch.float64)
    pc, pr = (torch.randn(3, generator=g, dtype=torch.float64) * 2 - 10 for _ in range(2))
    return [
        Case((*_logps(g, 4, 3.0, 30), 0.2, 0.0)),
        Case((*_logps(g, 7, 5.0, 25), 0.05, 0.25)),
        Case((*_logps(g, 5, 2.0, 12), 1.0, 0.45)),  # eps near 1/2: the denominator 1 - 2 eps matters most
        Case((*_logps(g, 1, 4.0, 18), 0.3, 0.15)),  # one pair
        Case((pc, pr, zeros, zeros, 0.7, 0.1)),  # reference-free
    ]


def _hidden_simpo():
    def case(seed, n, beta, gamma):
        g = torch.Generator().manual_seed(seed)
        pc, pr = (torch.randn(n, generator=g, dtype=torch.float64) * 4 - 20 for _ in range(2))
        lc, lr = (torch.randint(1, 20, (n,), generator=g).double() for _ in range(2))
        return Case((pc, pr, lc, lr, beta, gamma))

    g = torch.Generator().manual_seed(1617)
    pc, pr = (torch.randn(4, generator=g, dtype=torch.float64) * 2 - 8 for _ in range(2))
    ones = torch.ones(4, dtype=torch.float64)
    return [
        case(1613, 6, 2.5, 0.3),
        case(1614, 3, 0.5, 3.0),
        case(1615, 1, 4.0, 0.0),  # one pair
        case(1616, 8, 1.0, 1.5),
        Case((pc, pr, ones * 3, ones * 7, 2.0, 0.8)),  # equal lengths within each side, different across sides
    ]


def _hidden_best_of_n():
    return [
        Case(([0.2, 0.8], [5.0, -5.0], 2)),  # rewards in decreasing order
        Case(([0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 2.0, 3.0], 1)),  # n = 1: pi_ref
        Case(([0.05, 0.15, 0.3, 0.2, 0.3], [1.0, 4.0, -2.0, 0.5, 3.0], 5)),
        Case(([1.0], [0.7], 7)),  # a single response is always the best
        Case(([0.3, 0.3, 0.4], [2.0, 1.0, 0.0], 2)),
    ]


KEYS = {
    "optimum_by_hand": Key(answer=_optimum_answer()),
    "robust_dpo_loss": Key(robust_dpo_loss, _hidden_robust_dpo),
    "simpo_loss": Key(simpo_loss, _hidden_simpo),
    "best_of_n_policy": Key(best_of_n_policy, _hidden_best_of_n),
    "length_bias": Key(length_bias, _hidden_length_bias),
}
