"""Answer keys for chapter 17 (reasoning: scratchpads, test-time compute, policy gradients and GRPO)."""

from __future__ import annotations

import math
from collections import defaultdict

import torch
from lmbook.teaching.checks import Case

from . import Key


def _k2_bias():
    pi, ref = (0.5, 0.5), (0.8, 0.2)
    d = [math.log(q / p) for p, q in zip(pi, ref, strict=True)]
    return sum(p * x * x / 2 for p, x in zip(pi, d, strict=True)) - sum(-p * x for p, x in zip(pi, d, strict=True))


def multiply_scratchpad(a, d):
    digits, steps, carry = str(a)[::-1], [], 0
    for ch in digits:
        s = int(ch) * d + carry
        steps.append(f"{ch}*{d}+{carry}={s:02d}")
        carry = s // 10
    return ";".join(steps) + f"|{a * d}."


def weighted_vote(answers, logps):
    mass = defaultdict(float)
    for x, lp in zip(answers, logps, strict=True):
        if x is not None:
            mass[x] += math.exp(lp)
    if not mass:
        return None
    best = max(mass.values())
    return next(x for x, m in mass.items() if m == best)


def rloo_advantages(rewards):
    g = rewards.shape[1]
    return rewards - (rewards.sum(dim=1, keepdim=True) - rewards) / (g - 1)


def _hidden_multiply():
    return [Case((987654321, 9)), Case((10, 5)), Case((25, 4)), Case((1, 1)), Case((5555, 2))]


def _hidden_vote():
    return [Case(([1, 2, 2, 3, 1], [-0.5, -1.0, -1.2, -0.1, -4.0])), Case(([6], [-9.0])),
            Case(([None, 2, 2, None, 9], [-0.1, -3.0, -3.0, -0.2, -2.0])), Case(([4, 4, 4], [-1.0, -2.0, -3.0]))]


def _hidden_rloo():
    g = torch.Generator().manual_seed(1717)
    return [Case((torch.randint(0, 2, (4, 8), generator=g).double(),)),
            Case((torch.randn(2, 3, generator=g, dtype=torch.float64),)),
            Case((torch.tensor([[0.0, 1.0]], dtype=torch.float64),))]


KEYS = {
    "k2_bias": Key(answer=_k2_bias()),
    "multiply_scratchpad": Key(multiply_scratchpad, _hidden_multiply),
    "weighted_vote": Key(weighted_vote, _hidden_vote),
    "rloo_advantages": Key(rloo_advantages, _hidden_rloo),
}
