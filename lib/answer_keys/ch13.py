"""Answer keys for chapter 13 (the encoder-decoder Transformer)."""

from __future__ import annotations

import torch
from lmbook.teaching.checks import Case

from . import Key


def packed_masks(lengths):
    seg = torch.repeat_interleave(torch.arange(len(lengths)), lengths)  # (T,): the word of each position
    i, j = torch.arange(len(seg))[:, None], torch.arange(len(seg))[None, :]
    starts = torch.cumsum(lengths, 0) - lengths  # (W,): each word's first position
    return (seg[:, None] == seg[None, :]) & (j <= i), torch.arange(len(seg)) - starts[seg]


def prefix_lm_mask(prefix_len, total_len):
    i, j = torch.arange(total_len)[:, None], torch.arange(total_len)[None, :]
    return (j <= i) | (j < prefix_len)


def length_penalty_best(hypotheses, alpha):
    scores = [logp / ((5 + n) / 6) ** alpha for n, logp in hypotheses]
    return max(range(len(scores)), key=lambda k: scores[k])


KEYS = {
    "cross_kv_savings": Key(answer=(30 - 1) * 6 * 2 * 40 * 512**2),
    "packed_masks": Key(packed_masks, lambda: [
        Case((torch.tensor([2, 5]),)), Case((torch.tensor([1, 3, 1, 2]),)), Case((torch.tensor([6]),)),
    ], giveaways=("causal_mask",)),
    "prefix_lm_mask": Key(prefix_lm_mask, lambda: [Case((1, 1)), Case((1, 6)), Case((5, 9)), Case((0, 1))],
                          giveaways=("causal_mask",)),
    "length_penalty_best": Key(length_penalty_best, lambda: [
        Case(([(1, -0.5), (12, -2.0)], 0.8)), Case(([(7, -3.3)], 1.0)),
        Case(([(2, -1.2), (3, -1.3), (10, -2.6)], 0.5)), Case(([(6, -2.0), (3, -1.6)], 2.0)),
    ]),
}
