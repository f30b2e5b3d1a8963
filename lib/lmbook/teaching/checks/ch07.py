"""Self-checks for chapter 7 (attention)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_attention_by_hand", "check_masked_softmax", "check_expand_kv", "check_kv_cache_bytes",
           "check_online_attention"]

answer_check("attention_by_hand",
             hint="the scores are the dot products s . h_j = [1, 1, 2]; alpha_3 = e^2 / (e^1 + e^1 + e^2).")


def check_attention_by_hand(answer) -> None:
    """The weight alpha_3 that decoder state s = [1, 1] gives to h_3 = [1, 1] (h_1 = [1, 0], h_2 = [0, 1])."""
    check_answer("attention_by_hand", answer)


def _masked_softmax_cases():
    g = torch.Generator().manual_seed(5)
    s = torch.randn(4, 4, generator=g)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    some_dead = torch.tensor([[True, False, True], [False, False, False]])
    return [
        Case((s, torch.ones(4, 4, dtype=torch.bool)),
             hint="mask True means *attend*: with every position allowed this is a plain softmax."),
        Case((s, causal), hint="mask True means *attend*: the upper triangle (mask False) must get weight 0."),
        Case((torch.tensor([[1000.0, 1001.0, 999.0]]), torch.ones(1, 3, dtype=torch.bool)),
             hint="subtract the row maximum before exp, or exp(1000) overflows to inf and you get NaN."),
        Case((torch.randn(2, 3, generator=g), some_dead),
             hint="a row with nothing to attend to must come out as zeros, not NaN and not uniform; "
                  "filling with -1e9 instead of -inf gives a uniform row."),
        Case((torch.randn(2, 3, 5, generator=g), torch.tensor([True, True, False, True, False])),
             hint="the mask broadcasts against the scores, like torch's attn_mask."),
    ]


function_check("masked_softmax", _masked_softmax_cases, rtol=1e-5, atol=1e-6)


def check_masked_softmax(fn) -> None:
    """masked_softmax(scores, mask): softmax over the last axis of the positions where mask is True;
    masked positions get 0, and a row with no True gets all zeros."""
    run_check("masked_softmax", fn)


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


function_check("kv_cache_bytes", lambda: [
    Case((32, 32, 128, 4096), hint="keys AND values are cached: the count starts with a factor 2."),
    Case((32, 8, 128, 4096), hint="only the K/V heads are cached, not the query heads."),
    Case((30, 3, 64, 8192), kwargs={"bytes_per_value": 4}, hint="float32 takes 4 bytes per value."),
    Case((1, 1, 1, 1)),
    Case((24, 2, 64, 1000), kwargs={"batch": 8}, hint="every sequence in the batch has its own cache."),
])


def check_kv_cache_bytes(fn) -> None:
    """kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, bytes_per_value=2, batch=1)."""
    run_check("kv_cache_bytes", fn)


def _online_attention_cases():
    g = torch.Generator().manual_seed(7)

    def inputs(T, d, dv, block, spread=1.0):
        return (torch.randn(d, generator=g, dtype=torch.float64) * spread, torch.randn(T, d, generator=g,
                dtype=torch.float64), torch.randn(T, dv, generator=g, dtype=torch.float64), block)

    return [
        Case(inputs(8, 4, 3, 8), hint="with one block this is ordinary attention for one query."),
        Case(inputs(16, 4, 3, 4), hint="when a block raises the running max m, rescale both the running sum "
                                      "and the accumulated output by exp(m_old - m_new)."),
        Case(inputs(10, 4, 2, 3), hint="the last block may be shorter than block_size."),
        Case(inputs(12, 8, 2, 5, spread=500.0), hint="large scores: subtract the running max before exp."),
        Case(inputs(5, 2, 2, 1)),
    ]


function_check("online_attention", _online_attention_cases, rtol=1e-7, atol=1e-9)


def check_online_attention(fn) -> None:
    """online_attention(q (d,), K (T, d), V (T, d_v), block_size) == softmax(K q / sqrt(d)) V, one block at a time."""
    run_check("online_attention", fn)
