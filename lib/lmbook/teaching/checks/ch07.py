"""Self-checks for chapter 7 (attention)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_attention_by_hand", "check_masked_log_softmax", "check_left_padding_positions",
           "check_same_word_score"]

answer_check("attention_by_hand",
             hint="the scores are the dot products s . h_j = [1, 1, 2]; alpha_3 = e^2 / (e^1 + e^1 + e^2).")


def check_attention_by_hand(answer) -> None:
    """The weight alpha_3 that decoder state s = [1, 1] gives to h_3 = [1, 1] (h_1 = [1, 0], h_2 = [0, 1])."""
    check_answer("attention_by_hand", answer)


def _masked_log_softmax_cases():
    g = torch.Generator().manual_seed(5)
    s = torch.randn(4, 4, generator=g, dtype=torch.float64)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    some_dead = torch.tensor([[True, False, True], [False, False, False]])
    return [
        Case((s, torch.ones(4, 4, dtype=torch.bool)),
             hint="mask True means *attend*: with every position allowed this is a plain log-softmax."),
        Case((s, causal), hint="mask True means *attend*: the upper triangle (mask False) must get -inf."),
        Case((torch.tensor([[0.0, -800.0, 5.0]], dtype=torch.float64), torch.ones(1, 3, dtype=torch.bool)),
             hint="log(softmax(x)) underflows: exp(-805) is 0 in floating point, so its log is -inf, while the "
                  "log-probability is a finite -805.0067. Compute x - m - log(sum exp(x - m)) instead."),
        Case((torch.tensor([[1000.0, 1001.0, 999.0]], dtype=torch.float64), torch.ones(1, 3, dtype=torch.bool)),
             hint="subtract the row maximum before exp, or exp(1000) overflows to inf."),
        Case((torch.randn(2, 3, generator=g, dtype=torch.float64), some_dead),
             hint="a row with nothing to attend to has all weights 0, so its log-weights are all -inf, not NaN."),
        Case((torch.randn(2, 3, 5, generator=g, dtype=torch.float64), torch.tensor([True, True, False, True, False])),
             hint="the mask broadcasts against the scores, like torch's attn_mask."),
    ]


function_check("masked_log_softmax", _masked_log_softmax_cases, rtol=1e-9, atol=1e-9)


def check_masked_log_softmax(fn) -> None:
    """masked_log_softmax(scores, mask): log-softmax over the last axis of the positions where mask is True;
    masked positions get -inf, and a row with no True gets all -inf."""
    run_check("masked_log_softmax", fn)


def _left_padding_cases():
    return [
        Case((torch.tensor([4, 2, 1]), 4), hint="sequence b's real tokens fill the last n_b columns: number them "
                                                "0, 1, ... from the first REAL token (column k_len - n_b), and give "
                                                "the padding columns position 0."),
        Case((torch.tensor([3]), 5), hint="the real tokens get 0, 1, 2, the positions they get when run alone."),
        Case((torch.tensor([0, 5]), 5), hint="a sequence of length 0 is all padding (all 0); one of length k_len "
                                             "has none (0, 1, ..., k_len - 1)."),
        Case((torch.tensor([2, 3, 1, 4]), 6)),
    ]


function_check("left_padding_positions", _left_padding_cases)


def check_left_padding_positions(fn) -> None:
    """left_padding_positions(lengths (B,), k_len) -> integer (B, k_len): 0, 1, ... on the last lengths[b]
    columns, 0 on the padding before them."""
    run_check("left_padding_positions", fn)


def _same_word_cases():
    g = torch.Generator().manual_seed(8)

    def causal_weights(H, T):
        s = torch.randn(H, T, T, generator=g, dtype=torch.float64)
        return torch.softmax(s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1)

    return [
        Case((causal_weights(1, 4), torch.tensor([5, 5, 5, 5])),
             hint="only EARLIER occurrences count (j < i), not the query's own position j = i."),
        Case((causal_weights(3, 6), torch.tensor([1, 2, 1, 3, 2, 1])),
             hint="sum the weights on all earlier occurrences of the query's word, then average over the queries "
                  "that have at least one earlier occurrence (here i = 2, 4, 5), not over all queries."),
        Case((causal_weights(2, 5), torch.tensor([7, 8, 9, 7, 0])), hint="one value per head: shape (H,)."),
    ]


function_check("same_word_score", _same_word_cases, rtol=1e-9, atol=1e-12)


def check_same_word_score(fn) -> None:
    """same_word_score(weights (H, T, T), ids (T,)) -> (H,): the weight on earlier occurrences of the query's
    word, averaged over the queries whose word occurred before."""
    run_check("same_word_score", fn)
