"""Answer keys for chapter 7 (attention)."""

from __future__ import annotations

import math

import torch
from lmbook.teaching.checks import Case

from . import Key

# the encoder states of the chapter's dot-product example, and a new decoder state
BY_HAND_H = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
BY_HAND_S = (1.0, 1.0)


def _attention_by_hand():
    scores = [sum(a * b for a, b in zip(h, BY_HAND_S, strict=True)) for h in BY_HAND_H]
    return math.exp(scores[2]) / sum(math.exp(e) for e in scores)


def masked_log_softmax(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    total = torch.exp(scores - m).sum(dim=-1, keepdim=True)
    return scores - m - torch.where(total > 0, total, torch.ones_like(total)).log()  # a dead row stays -inf


def _hidden_masked_log_softmax():
    g = torch.Generator().manual_seed(105)
    return [
        Case((torch.randn(3, 5, generator=g),
              torch.tensor([[True, False, True, True, False], [False, True, False, False, False],
                            [True, True, True, True, True]]))),
        Case((torch.randn(5, 5, generator=g), torch.ones(5, 5, dtype=torch.bool).triu())),  # True = attend
        Case((torch.tensor([[3.0, -1000.0, 2.0, -2000.0]]), torch.tensor([[True, True, True, False]]))),
        Case((torch.randn(2, 4, generator=g) * 50 + 800, torch.tensor([[True, True, True, False],
                                                                        [True, False, True, True]]))),
        Case((torch.randn(3, 4, generator=g), torch.tensor([[True, True, False, False], [False, False, False, False],
                                                            [False, True, False, True]]))),  # a dead row
        Case((torch.randn(2, 2, 3, 4, generator=g),
              torch.tensor([[True, False, True, True], [False, False, False, False], [True, True, True, False]]))),
    ]


def left_padding_positions(lengths, k_len):
    positions = torch.zeros(len(lengths), k_len, dtype=torch.long)
    for b, n in enumerate(lengths.tolist()):
        positions[b, k_len - n:] = torch.arange(n)  # the last n columns hold the real tokens
    return positions


def _hidden_left_padding():
    return [
        Case((torch.tensor([1, 3, 2]), 3)),
        Case((torch.tensor([7, 0, 4]), 7)),
        Case((torch.tensor([5]), 8)),
        Case((torch.tensor([2, 2, 6, 1, 3]), 6)),
    ]


def same_word_score(weights, ids):
    T = ids.shape[0]
    scores = []
    for h in range(weights.shape[0]):
        per_query = [sum(weights[h, i, j] for j in range(i) if ids[j] == ids[i]) for i in range(T)
                     if any(ids[j] == ids[i] for j in range(i))]
        scores.append(sum(per_query) / len(per_query))
    return torch.tensor([float(x) for x in scores], dtype=weights.dtype)


def _hidden_same_word():
    g = torch.Generator().manual_seed(108)

    def causal_weights(H, T):
        s = torch.randn(H, T, T, generator=g, dtype=torch.float64) * 3
        return torch.softmax(s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1)

    return [Case((causal_weights(4, 9), torch.tensor([0, 1, 0, 2, 1, 0, 3, 3, 4]))),
            Case((causal_weights(1, 3), torch.tensor([2, 2, 1]))),
            Case((causal_weights(6, 12), torch.randint(0, 4, (12,), generator=g)))]


KEYS = {
    "attention_by_hand": Key(answer=_attention_by_hand()),
    "masked_log_softmax": Key(masked_log_softmax, _hidden_masked_log_softmax,
                              giveaways=("scaled_dot_product_attention", "softmax", "log_softmax", "logsumexp")),
    "left_padding_positions": Key(left_padding_positions, _hidden_left_padding),
    "same_word_score": Key(same_word_score, _hidden_same_word),
}
