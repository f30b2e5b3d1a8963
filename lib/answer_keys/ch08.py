"""Answer keys for chapter 8 (efficient attention)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from lmbook.teaching.checks import Case

from . import Key


def expand_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def merge_softmax_states(m1, l1, a1, m2, l2, a2):
    if m1 == -math.inf and m2 == -math.inf:  # two empty states
        return m1.clone(), torch.zeros_like(l1), torch.zeros_like(a1)
    m = m1 if m1 >= m2 else m2
    lse = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))  # log of the total sum of exp(s_j)
    weight1 = torch.exp(m1 + torch.log(l1) - lse) if l1 > 0 else torch.zeros_like(l1)  # worker 1's share of it
    l = torch.exp(lse - m)  # noqa: E741
    return m, l, l * (weight1 * a1 / torch.where(l1 > 0, l1, torch.ones_like(l1))
                      + (1 - weight1) * a2 / torch.where(l2 > 0, l2, torch.ones_like(l2)))


def dilated_window_mask(T, window, dilation):
    mask = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for n in range(window):
            if i - n * dilation >= 0:
                mask[i, i - n * dilation] = True
    return mask


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


def _hidden_merge():
    g = torch.Generator().manual_seed(107)

    def state(m, dv):
        return (torch.tensor(m, dtype=torch.float64), torch.rand((), generator=g, dtype=torch.float64) + 0.5,
                torch.randn(dv, generator=g, dtype=torch.float64))

    empty = (torch.tensor(-math.inf, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64),
             torch.zeros(4, dtype=torch.float64))
    return [Case((*state(0.0, 4), *state(0.0, 4))), Case((*state(-30.0, 4), *state(5.0, 4))),
            Case((*state(3.0, 4), *empty)), Case((*empty, *state(-2.0, 4))), Case((*empty, *empty)),
            Case((*state(-500.0, 4), *state(-520.0, 4)))]


def _hidden_dilated_window():
    return [Case((8, 2, 3)), Case((16, 4, 2)), Case((7, 1, 5)), Case((9, 9, 1)), Case((20, 5, 4))]


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
    "merge_softmax_states": Key(merge_softmax_states, _hidden_merge, giveaways=("flash_attention",)),
    "dilated_window_mask": Key(dilated_window_mask, _hidden_dilated_window, giveaways=("sliding_window_mask",)),
    "mean_pool_kv": Key(mean_pool_kv, _hidden_mean_pool_kv),
    "linear_attention_step": Key(linear_attention_step, _hidden_linear_step, giveaways=("linear_attention",)),
}
