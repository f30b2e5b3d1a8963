"""Answer keys for chapter 8 (efficient attention)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from lmbook.teaching.checks import Case

from . import Key


def expand_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def online_softmax_step(m, l, a, s, V):  # noqa: E741
    scores = torch.cat([m.reshape(1), s])
    m_new = scores.max()
    if torch.isinf(m_new) and m_new < 0:  # nothing seen yet: the empty state stays as it is
        return m, l, a
    rescale = torch.exp(m - m_new)
    p = torch.exp(s - m_new)
    return m_new, l * rescale + p.sum(), a * rescale + p @ V


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


def _hidden_online_step():
    g = torch.Generator().manual_seed(107)

    def case(m, n, dv, spread):
        return Case((torch.tensor(m, dtype=torch.float64), torch.rand((), generator=g, dtype=torch.float64) + 0.5,
                     torch.randn(dv, generator=g, dtype=torch.float64),
                     torch.randn(n, generator=g, dtype=torch.float64) * spread,
                     torch.randn(n, dv, generator=g, dtype=torch.float64)))

    empty = (torch.tensor(-math.inf, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64),
             torch.zeros(2, dtype=torch.float64))
    return [case(0.0, 3, 2, 4.0), case(3.0, 5, 4, 0.1), case(-100.0, 1, 1, 200.0),
            Case((*empty, torch.tensor([1.0, -math.inf], dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64))),
            Case((torch.tensor(2.0, dtype=torch.float64), torch.tensor(1.5, dtype=torch.float64),
                  torch.ones(2, dtype=torch.float64), torch.full((3,), -math.inf, dtype=torch.float64),
                  torch.ones(3, 2, dtype=torch.float64)))]


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
    "online_softmax_step": Key(online_softmax_step, _hidden_online_step, giveaways=("flash_attention",)),
    "mean_pool_kv": Key(mean_pool_kv, _hidden_mean_pool_kv),
    "linear_attention_step": Key(linear_attention_step, _hidden_linear_step, giveaways=("linear_attention",)),
}
