"""Self-checks for chapter 8 (efficient attention)."""

from __future__ import annotations

import math

import torch

from ._core import Case, function_check, run_check

__all__ = ["check_expand_kv", "check_merge_softmax_states", "check_dilated_window_mask", "check_mean_pool_kv",
           "check_linear_attention_step"]


def _expand_kv_cases():
    g = torch.Generator().manual_seed(6)
    labelled = torch.arange(3.0).view(1, 3, 1, 1).expand(1, 3, 2, 2).contiguous()  # head g holds the value g
    return [
        Case((torch.randn(2, 4, 3, 5, generator=g), 1), hint="n_rep = 1 is plain multi-head attention: no change."),
        Case((labelled, 2), hint="heads in a group are adjacent: the result's heads hold 0, 0, 1, 1, 2, 2 "
                                 "(repeat_interleave), not 0, 1, 2, 0, 1, 2 (repeat)."),
        Case((torch.randn(2, 1, 3, 4, generator=g), 4), hint="one K/V head shared by all query heads is MQA."),
        Case((torch.randn(1, 2, 6, 8, generator=g), 3)),
    ]


function_check("expand_kv", _expand_kv_cases)


def check_expand_kv(fn) -> None:
    """expand_kv(x, n_rep): (B, H_kv, T, d) -> (B, H_kv * n_rep, T, d), query head h using K/V head h // n_rep."""
    run_check("expand_kv", fn)


def _merge_cases():
    g = torch.Generator().manual_seed(7)

    def state(m, dv):  # (m, l, a) of a worker that has seen some unmasked keys
        return (torch.tensor(m, dtype=torch.float64), torch.rand((), generator=g, dtype=torch.float64) * 3 + 1,
                torch.randn(dv, generator=g, dtype=torch.float64))

    def empty(dv):  # a worker that has seen only masked keys
        return torch.tensor(-math.inf, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64), \
            torch.zeros(dv, dtype=torch.float64)

    both = "rescale each state to the common maximum m = max(m1, m2): multiply BOTH l1 and a1 by exp(m1 - m), " \
           "BOTH l2 and a2 by exp(m2 - m), then add."
    return [
        Case((*state(0.3, 3), *state(1.2, 3)), hint=both),
        Case((*state(2.0, 2), *state(-1.0, 2)), hint="the result's m is max(m1, m2), the largest score of all keys."),
        Case((*empty(3), *state(0.5, 3)), hint="an empty state (m = -inf, l = 0, a = 0) adds nothing: the result is "
                                               "the other state."),
        Case((*state(-0.7, 2), *empty(2))),
        Case((*empty(2), *empty(2)), hint="both empty: return the empty state (m = -inf, l = 0, a = 0), with no NaN "
                                          "from exp(-inf - (-inf))."),
        Case((*state(900.0, 2), *state(850.0, 2)), hint="subtract the common maximum before exp: exp(900) overflows."),
    ]


function_check("merge_softmax_states", _merge_cases, rtol=1e-9, atol=1e-12)


def check_merge_softmax_states(fn) -> None:
    """merge_softmax_states(m1, l1, a1, m2, l2, a2) -> (m, l, a), the state of one worker that saw all the keys."""
    run_check("merge_softmax_states", fn)


def _dilated_window_cases():
    return [
        Case((6, 2, 1), hint="dilation 1 is sliding_window_mask(T, T, window): causal, the query's own position "
                             "included, `window` keys in all."),
        Case((10, 3, 2), hint="query i reads keys i, i - d, ..., i - (window - 1) d: `window` keys, spaced by the "
                              "dilation d, its own position included."),
        Case((12, 4, 3), hint="only gaps i - j that are multiples of the dilation, from 0 to (window - 1) * dilation."),
        Case((5, 3, 4), hint="keys before position 0 do not exist, and no query reads a later key (causal)."),
    ]


function_check("dilated_window_mask", _dilated_window_cases)


def check_dilated_window_mask(fn) -> None:
    """dilated_window_mask(T, window, dilation) -> (T, T) bool: query i reads keys i - n * dilation, 0 <= n < window."""
    run_check("dilated_window_mask", fn)


def _mean_pool_kv_cases():
    g = torch.Generator().manual_seed(9)
    labelled = torch.arange(4.0).repeat_interleave(2)[:, None].expand(8, 3).contiguous()  # head h: rows 2h, 2h+1 = h
    return [
        Case((torch.randn(6, 7, generator=g, dtype=torch.float64), 3, 1),
             hint="pool by the MEAN of the heads' row blocks, not the sum; n_groups = 1 is MQA: one K/V head."),
        Case((labelled, 4, 2), hint="heads of one group are adjacent: group 0 pools heads 0 and 1, group 1 "
                                    "heads 2 and 3 (not heads 0 and 2)."),
        Case((torch.randn(12, 5, generator=g, dtype=torch.float64), 6, 3),
             hint="the result has n_groups * d_k rows, one block of d_k rows per group."),
        Case((torch.randn(8, 4, generator=g, dtype=torch.float64), 4, 4), hint="n_groups = n_heads changes nothing."),
    ]


function_check("mean_pool_kv", _mean_pool_kv_cases, rtol=1e-9, atol=1e-12)


def check_mean_pool_kv(fn) -> None:
    """mean_pool_kv(W (n_heads * d_k, d_model), n_heads, n_groups) -> (n_groups * d_k, d_model)."""
    run_check("mean_pool_kv", fn)


def _linear_step_cases():
    g = torch.Generator().manual_seed(10)

    def inputs(d, dv, warm=True):
        S = torch.rand(d, dv, generator=g, dtype=torch.float64) * 3 if warm else torch.zeros(d, dv, dtype=torch.float64)
        z = torch.rand(d, generator=g, dtype=torch.float64) * 3 if warm else torch.zeros(d, dtype=torch.float64)
        q, k = torch.randn(d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)
        return S, z, q, k, torch.randn(dv, generator=g, dtype=torch.float64)

    return [
        Case(inputs(3, 2, warm=False), hint="the first token reads itself: update the state with phi(k) v^T and "
                                            "phi(k) BEFORE reading it with phi(q), so the output is v."),
        Case(inputs(4, 3), hint="out = phi(q) . S' / phi(q) . z' with phi = elu + 1 applied to q and k, not to v."),
        Case(inputs(2, 5), hint="return (out, S', z'): the new state too, so that the next step can use it."),
    ]


function_check("linear_attention_step", _linear_step_cases, rtol=1e-6, atol=1e-9)


def check_linear_attention_step(fn) -> None:
    """linear_attention_step(S (d, d_v), z (d,), q (d,), k (d,), v (d_v,)) -> (out (d_v,), S', z')."""
    run_check("linear_attention_step", fn)
