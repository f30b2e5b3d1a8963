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


def masked_softmax(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    e = torch.exp(scores - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def _hidden_masked_softmax():
    g = torch.Generator().manual_seed(105)
    return [
        Case((torch.randn(3, 5, generator=g),
              torch.tensor([[True, False, True, True, False], [False, True, False, False, False],
                            [True, True, True, True, True]]))),
        Case((torch.randn(5, 5, generator=g), torch.ones(5, 5, dtype=torch.bool).triu())),  # True = attend
        Case((torch.randn(2, 4, generator=g) * 50 + 800, torch.tensor([[True, True, True, False],
                                                                        [True, False, True, True]]))),
        Case((torch.randn(3, 4, generator=g), torch.tensor([[True, True, False, False], [False, False, False, False],
                                                            [False, True, False, True]]))),  # a dead row
        Case((torch.randn(2, 2, 3, 4, generator=g),
              torch.tensor([[True, False, True, True], [False, False, False, False], [True, True, True, False]]))),
    ]


def left_padding_mask(lengths, k_len):
    return (torch.arange(k_len) >= (k_len - lengths)[:, None])[:, None, None, :]


def _hidden_left_padding():
    return [
        Case((torch.tensor([1, 3, 2]), 3)),
        Case((torch.tensor([7, 0, 4]), 7)),
        Case((torch.tensor([5]), 8)),
        Case((torch.tensor([2, 2, 6, 1, 3]), 6)),
    ]


def previous_token_score(weights):
    return torch.stack([torch.stack([weights[h, i, i - 1] for i in range(1, weights.shape[-1])]).mean()
                        for h in range(weights.shape[0])])


def _hidden_previous_token():
    g = torch.Generator().manual_seed(108)

    def causal_weights(H, T):
        s = torch.randn(H, T, T, generator=g, dtype=torch.float64) * 3
        return torch.softmax(s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1)

    return [Case((causal_weights(4, 9),)), Case((causal_weights(1, 3),)), Case((causal_weights(6, 12),))]


KEYS = {
    "attention_by_hand": Key(answer=_attention_by_hand()),
    "masked_softmax": Key(masked_softmax, _hidden_masked_softmax,
                          giveaways=("scaled_dot_product_attention",)),
    "left_padding_mask": Key(left_padding_mask, _hidden_left_padding),
    "previous_token_score": Key(previous_token_score, _hidden_previous_token),
}
