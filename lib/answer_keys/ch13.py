"""Answer keys for chapter 13 (the encoder-decoder Transformer)."""

from __future__ import annotations

import torch
from lmbook.teaching.checks import Case

from . import Key


def decoder_masks(src_lengths, tgt_lengths):
    T, S = int(tgt_lengths.max()), int(src_lengths.max())
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    self_mask = (j <= i)[None] & (torch.arange(T)[None, None, :] < tgt_lengths[:, None, None])  # (B, T, T)
    cross = (torch.arange(S)[None, :] < src_lengths[:, None])[:, None, :].expand(-1, T, -1)  # (B, T, S)
    return self_mask[:, None], cross[:, None]


def prefix_lm_mask(prefix_len, total_len):
    i, j = torch.arange(total_len)[:, None], torch.arange(total_len)[None, :]
    return (j <= i) | (j < prefix_len)


def length_penalty_best(hypotheses, alpha):
    scores = [logp / ((5 + n) / 6) ** alpha for n, logp in hypotheses]
    return max(range(len(scores)), key=lambda k: scores[k])


KEYS = {
    "cross_kv_savings": Key(answer=(30 - 1) * 6 * 2 * 40 * 512**2),
    "decoder_masks": Key(decoder_masks, lambda: [
        Case((torch.tensor([1, 6]), torch.tensor([5, 2]))),
        Case((torch.tensor([4, 4, 1, 2]), torch.tensor([1, 1, 2, 3]))),
        Case((torch.tensor([7]), torch.tensor([1]))),
    ], giveaways=("padding_mask", "causal_mask")),
    "prefix_lm_mask": Key(prefix_lm_mask, lambda: [Case((1, 1)), Case((1, 6)), Case((5, 9)), Case((0, 1))],
                          giveaways=("causal_mask",)),
    "length_penalty_best": Key(length_penalty_best, lambda: [
        Case(([(1, -0.5), (12, -2.0)], 0.8)), Case(([(7, -3.3)], 1.0)),
        Case(([(2, -1.2), (3, -1.3), (10, -2.6)], 0.5)), Case(([(6, -2.0), (3, -1.6)], 2.0)),
    ]),
}
