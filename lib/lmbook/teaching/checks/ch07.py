"""Self-checks for chapter 7 (attention)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_attention_by_hand", "check_masked_softmax", "check_left_padding_mask",
           "check_previous_token_score"]

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


def _left_padding_cases():
    return [
        Case((torch.tensor([4, 2, 1]), 4), hint="left padding puts the real tokens in the LAST n_b columns: "
                                                "key j is real when j >= k_len - n_b (right padding is j < n_b)."),
        Case((torch.tensor([3]), 5), hint="the mask has shape (B, 1, 1, k_len), so it broadcasts over heads "
                                          "and queries."),
        Case((torch.tensor([0, 5]), 5), hint="a sequence of length 0 is all padding; one of length k_len has none."),
        Case((torch.tensor([2, 3, 1, 4]), 6)),
    ]


function_check("left_padding_mask", _left_padding_cases)


def check_left_padding_mask(fn) -> None:
    """left_padding_mask(lengths (B,), k_len) -> bool (B, 1, 1, k_len), True on the last lengths[b] columns."""
    run_check("left_padding_mask", fn)


def _previous_token_cases():
    g = torch.Generator().manual_seed(8)

    def causal_weights(H, T):
        s = torch.randn(H, T, T, generator=g, dtype=torch.float64)
        return torch.softmax(s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1)

    eye_below = torch.eye(5, dtype=torch.float64).roll(-1, dims=1).tril()  # weight 1 on key i - 1
    eye_below[0, 0] = 1.0
    return [
        Case((eye_below[None],), hint="a perfect previous-token head puts weight 1 on key i - 1 for every "
                                      "query i >= 1: its score is 1."),
        Case((causal_weights(3, 6),), hint="average the sub-diagonal w[h, i, i - 1] over i = 1 .. T - 1; "
                                           "query 0 has no previous token."),
        Case((causal_weights(2, 2),), hint="one value per head: the result has shape (H,)."),
    ]


function_check("previous_token_score", _previous_token_cases, rtol=1e-9, atol=1e-12)


def check_previous_token_score(fn) -> None:
    """previous_token_score(weights (H, T, T)) -> (H,): mean over i >= 1 of weights[h, i, i - 1]."""
    run_check("previous_token_score", fn)
