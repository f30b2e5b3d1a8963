"""Answer keys for chapter 10 (decoding)."""

from __future__ import annotations

import math

import torch
from lmbook.teaching.checks import Case

from . import Key


def beam_search_table(log_probs, start, length, beam_width):
    beams = [(0.0, [start])]
    for _ in range(length):
        candidates = [(score + log_probs[seq[-1]][v], seq + [v]) for score, seq in beams
                      for v in range(len(log_probs))]
        beams = sorted(candidates, key=lambda c: -c[0])[:beam_width]
    return beams[0][1][1:]


def typical_filter(logits, mass):
    logp = logits.log_softmax(dim=-1)  # (B, V)
    entropy = -(logp.exp() * logp).nansum(dim=-1, keepdim=True)  # (B, 1)
    deviation = (-logp - entropy).abs()  # (B, V): how far each surprisal is from the entropy
    order = deviation.argsort(dim=-1, stable=True)  # most typical first
    cumulative = logp.exp().gather(-1, order).cumsum(dim=-1)  # (B, V)
    crossing = (cumulative < mass).sum(dim=-1, keepdim=True).clamp(max=logits.shape[-1] - 1)  # (B, 1)
    limit = deviation.gather(-1, order).gather(-1, crossing)  # the crossing token's deviation
    return logits.masked_fill(deviation > limit, float("-inf"))


def pareto_front(points):
    def dominated(i):
        return any(a >= points[i][0] and b >= points[i][1] and (a, b) != tuple(points[i]) for a, b in points)
    return [i for i in range(len(points)) if not dominated(i)]


def _penalised_prob():
    z = [3.0 / 2, 1.0, -1.0 * 2, 0.5]  # tokens 0 and 2 seen: 3 / 2 and -1 * 2
    return math.exp(z[0]) / sum(math.exp(v) for v in z)


def _random_table(seed, V):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(V, V, generator=g, dtype=torch.float64) * 2).log_softmax(-1).tolist()


def _hidden_typical():
    g = torch.Generator().manual_seed(20261010)
    f64 = torch.float64
    return [
        Case((torch.log(torch.tensor([[0.05, 0.6, 0.15, 0.2]], dtype=f64)), 0.4)),
        Case((torch.randn(2, 40, generator=g, dtype=f64) * 3, 0.95)),
        Case((torch.randn(4, 9, generator=g, dtype=f64), 0.5)),
        Case((torch.randn(1, 25, generator=g, dtype=f64) * 0.5, 1.0)),
    ]


KEYS = {
    "repetition_penalty_prob": Key(answer=_penalised_prob()),
    "beam_search_table": Key(beam_search_table, lambda: [
        Case((_random_table(21, 4), 1, 3, 1)),
        Case((_random_table(22, 5), 0, 4, 2)),
        Case((_random_table(23, 3), 2, 6, 5)),
        Case((_random_table(24, 7), 3, 3, 400)),
    ], giveaways=("beam_search",)),
    "typical_filter": Key(typical_filter, _hidden_typical, giveaways=("TypicalLogitsWarper",)),
    "pareto_front": Key(pareto_front, lambda: [
        Case(([(0.2, 0.3)],)),
        Case(([(0.0, 0.0), (0.0, 0.0), (0.0, 0.0)],)),
        Case(([(3.0, 1.0), (2.0, 2.0), (1.0, 3.0), (1.0, 1.0), (2.5, 0.5)],)),
        Case(([(-1.0, 0.9), (-1.5, 0.95), (-1.2, 0.9), (-0.8, 0.2)],)),
    ]),
}
