"""Answer keys for chapter 9 (the Transformer language model and decoding)."""

from __future__ import annotations

import torch
from lmbook import decoding
from lmbook.teaching.checks import Case

from . import Key


def rms_norm(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def count_parameters(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff, tie_embeddings=True):
    head_dim = d_model // n_heads
    attention = 2 * d_model * n_heads * head_dim + 2 * d_model * n_kv_heads * head_dim  # W_Q, W_O; W_K, W_V
    block = attention + 3 * d_model * d_ff + 2 * d_model  # SwiGLU's three matrices, two RMSNorm gains
    embeddings = vocab_size * d_model * (1 if tie_embeddings else 2)
    return embeddings + n_layers * block + d_model  # + the final norm


def _hidden_rms_norm():
    g = torch.Generator().manual_seed(20260909)
    f64 = torch.float64
    return [
        Case((torch.randn(3, 10, generator=g, dtype=f64) * 5, torch.ones(10, dtype=f64))),
        Case((torch.randn(5, 7, generator=g, dtype=f64) - 4.0, torch.randn(7, generator=g, dtype=f64))),  # not centred
        Case((torch.randn(2, 3, 4, generator=g, dtype=f64), torch.randn(4, generator=g, dtype=f64))),  # last axis
        Case((torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]], dtype=f64), torch.tensor([2.0, 1.0, 0.5], dtype=f64))),
        Case((torch.randn(2, 5, generator=g, dtype=f64) * 1e-3, torch.ones(5, dtype=f64)), {"eps": 1e-4}),  # eps inside
    ]


def _hidden_top_p_filter():
    g = torch.Generator().manual_seed(20260910)
    f64 = torch.float64
    return [
        Case((torch.log(torch.tensor([[0.1, 0.6, 0.25, 0.05]], dtype=f64)), 0.75)),  # the crossing token, unsorted
        Case((torch.log(torch.tensor([[0.2, 0.7, 0.1]], dtype=f64)), 0.05)),  # the top token alone
        Case((torch.randn(2, 6, generator=g, dtype=f64), 1.0)),
        Case((torch.randn(2, 12, generator=g, dtype=f64) * 3, 0.8)),
        Case((torch.randn(3, 50, generator=g, dtype=f64) * 2, 0.5)),
    ]


KEYS = {
    "deepnorm_alpha": Key(answer=(2 * 100) ** 0.25),
    "rms_norm": Key(rms_norm, _hidden_rms_norm, giveaways=("RMSNorm",)),
    "count_parameters": Key(count_parameters, lambda: [
        Case((50, 8, 3, 2, 1, 24)),
        Case((1000, 64, 4, 8, 2, 172, False)),
        Case((256, 32, 1, 4, 4, 88, False)),
        Case((32000, 4096, 32, 32, 8, 14336)),
        Case((128256, 2048, 16, 32, 8, 8192)),
    ], giveaways=("num_parameters", "Transformer")),
    "top_p_filter": Key(decoding.top_p_filter, _hidden_top_p_filter, giveaways=("top_p_filter",)),
    "distinct_n": Key(decoding.distinct_n, lambda: [
        Case(([[3, 3, 3, 4]], 1)),
        Case(([[7, 8, 7, 8], [8, 7, 9]], 2)),  # pooled, and no n-gram across the two
        Case(([[1, 2, 3], [4], [1, 2, 3, 1]], 3)),  # a sequence shorter than n has no n-gram
        Case(([[9, 9, 9, 9, 9]], 2)),
        Case(([[2, 4, 2, 4, 2, 4, 2]], 4)),
    ], giveaways=("distinct_n",)),
}
