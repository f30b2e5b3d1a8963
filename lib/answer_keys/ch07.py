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


def expand_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, bytes_per_value=2, batch=1):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * bytes_per_value * batch


def online_attention(q, K, V, block_size):
    return torch.softmax(K @ q / math.sqrt(q.shape[-1]), dim=0) @ V


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


def _hidden_expand_kv():
    g = torch.Generator().manual_seed(106)
    labelled = torch.arange(2.0).view(1, 2, 1, 1).expand(2, 2, 3, 1).contiguous()  # head g holds the value g
    return [
        Case((labelled, 3)),  # 0, 0, 0, 1, 1, 1, not 0, 1, 0, 1, 0, 1
        Case((torch.randn(1, 3, 2, 4, generator=g), 2)),
        Case((torch.randn(3, 2, 1, 3, generator=g), 1)),
        Case((torch.randn(2, 1, 4, 2, generator=g), 3)),
        Case((torch.randn(1, 4, 3, 2, generator=g), 2)),
    ]


def _hidden_kv_cache_bytes():
    return [
        Case((28, 4, 128, 32768)),
        Case((16, 16, 64, 2048), kwargs={"bytes_per_value": 1}),
        Case((2, 5, 32, 100), kwargs={"batch": 3, "bytes_per_value": 4}),
        Case((12, 12, 64, 512, 2, 4)),  # all six arguments, positionally
        Case((80, 8, 128, 131072)),
    ]


def _hidden_online_attention():
    g = torch.Generator().manual_seed(107)

    def inputs(T, d, dv, block, spread=1.0, rising=False):
        q = torch.randn(d, generator=g, dtype=torch.float64) * spread
        K = torch.randn(T, d, generator=g, dtype=torch.float64)
        if rising:  # every block raises the running max
            K = K[torch.argsort(K @ q)]
        return q, K, torch.randn(T, dv, generator=g, dtype=torch.float64), block

    return [
        Case(inputs(9, 3, 4, 2)),
        Case(inputs(15, 5, 3, 4, spread=3.0, rising=True)),
        Case(inputs(20, 6, 3, 7, spread=300.0)),
        Case(inputs(6, 4, 5, 10)),  # one block, longer than T
        Case(inputs(1, 2, 2, 1)),
    ]


KEYS = {
    "attention_by_hand": Key(answer=_attention_by_hand()),
    "masked_softmax": Key(masked_softmax, _hidden_masked_softmax,
                          giveaways=("scaled_dot_product_attention",)),
    "expand_kv": Key(expand_kv, _hidden_expand_kv, giveaways=("repeat_kv",)),
    "kv_cache_bytes": Key(kv_cache_bytes, _hidden_kv_cache_bytes),
    "online_attention": Key(online_attention, _hidden_online_attention,
                            giveaways=("scaled_dot_product_attention", "fast_attention",
                                       "flash_attention")),
}
