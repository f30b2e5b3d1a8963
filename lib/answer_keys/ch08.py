"""Answer keys for chapter 8 (efficient attention)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from lmbook.teaching.checks import Case

from . import Key


def expand_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def online_attention(q, K, V, block_size):
    return torch.softmax(K @ q / math.sqrt(q.shape[-1]), dim=0) @ V


def mean_pool_kv(W, n_heads, n_groups):
    d_k = W.shape[0] // n_heads
    blocks = W.view(n_groups, n_heads // n_groups, d_k, W.shape[1])  # (groups, heads per group, d_k, d_model)
    return blocks.mean(1).reshape(n_groups * d_k, W.shape[1])


def linear_attention_step(S, z, q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S, z = S + torch.outer(phi_k, v), z + phi_k
    return (phi_q @ S) / (phi_q @ z), S, z


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


def _hidden_mean_pool_kv():
    g = torch.Generator().manual_seed(109)
    return [Case((torch.randn(18, 4, generator=g, dtype=torch.float64), 9, 3)),
            Case((torch.randn(16, 3, generator=g, dtype=torch.float64), 8, 2)),
            Case((torch.randn(10, 6, generator=g, dtype=torch.float64), 5, 1))]


def _hidden_linear_step():
    g = torch.Generator().manual_seed(110)

    def inputs(d, dv):
        return (torch.rand(d, dv, generator=g, dtype=torch.float64), torch.rand(d, generator=g, dtype=torch.float64),
                torch.randn(d, generator=g, dtype=torch.float64) * 2, torch.randn(d, generator=g, dtype=torch.float64),
                torch.randn(dv, generator=g, dtype=torch.float64))

    return [Case(inputs(5, 2)), Case(inputs(1, 4)), Case(inputs(8, 8))]


KEYS = {
    "expand_kv": Key(expand_kv, _hidden_expand_kv, giveaways=("repeat_kv",)),
    "online_attention": Key(online_attention, _hidden_online_attention,
                            giveaways=("scaled_dot_product_attention", "fast_attention", "flash_attention")),
    "mean_pool_kv": Key(mean_pool_kv, _hidden_mean_pool_kv),
    "linear_attention_step": Key(linear_attention_step, _hidden_linear_step, giveaways=("linear_attention",)),
}
