"""Self-checks for chapter 10 (decoding)."""

from __future__ import annotations

import math

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_repetition_penalty_prob", "check_beam_search_table", "check_typical_filter", "check_pareto_front"]

answer_check("repetition_penalty_prob",
             hint="the penalty must push a seen token's logit down: what does dividing a negative logit by 2 do "
                  "to it? Penalise the seen tokens only, then take the softmax of all four logits.")


def check_repetition_penalty_prob(answer) -> None:
    """The probability of token 0 after the repetition penalty 2 (CTRL's, as transformers applies it) on logits
    [3, 1, -1, 0.5], tokens 0 and 2 seen."""
    check_answer("repetition_penalty_prob", answer)


def _log_table(rows):
    return [[math.log(p) for p in row] for row in rows]


def _random_table(seed, V):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(V, V, generator=g, dtype=torch.float64) * 2).log_softmax(-1).tolist()


_TRAP = _log_table([[0.1, 0.5, 0.4], [0.3, 0.36, 0.34], [0.05, 0.05, 0.9]])  # greedy takes 1 (0.5), then 0.36 at best

function_check("beam_search_table", lambda: [
    Case((_TRAP, 0, 2, 1), hint="with beam_width = 1 beam search is greedy: the most probable next token each step."),
    Case((_TRAP, 0, 2, 2), hint="rank the beams by their TOTAL log-probability, the sum over the sequence, not by "
                                "the last step's log-probability alone."),
    Case((_random_table(1, 5), 2, 4, 3), hint="extend every beam by every token, then keep the beam_width best of "
                                              "all beam_width * V candidates together, not the best per beam."),
    Case((_random_table(2, 4), 0, 3, 64), hint="a beam as wide as all sequences is exhaustive search."),
    Case((_random_table(3, 6), 5, 5, 2), hint="return the generated tokens only, without the start token."),
    Case((_random_table(117, 4), 1, 3, 2), hint="keep the beam_width best of all beam_width * V candidates "
                                                "together: one beam's second-best extension can beat another "
                                                "beam's best, and then both survivors share a parent."),
])


def check_beam_search_table(fn) -> None:
    """beam_search_table(log_probs, start, length, beam_width): the best `length` tokens after `start` under the
    Markov chain log_probs[current][next], found by beam search."""
    run_check("beam_search_table", fn)


def _typical_cases():
    g = torch.Generator().manual_seed(10)
    f64 = torch.float64
    peaked = torch.log(torch.tensor([[0.4] + [0.1] * 6], dtype=f64))
    return [
        Case((peaked, 0.5), hint="rank tokens by |-log p - H|, the distance of their surprisal from the entropy H, "
                                 "not by probability: here the 0.1 tokens are more typical than the 0.4 one."),
        Case((peaked, 0.95), hint="keep the fewest most typical tokens whose total probability reaches mass; the "
                                  "token that crosses it is kept."),
        Case((torch.log(torch.full((1, 4), 0.25, dtype=f64)), 0.3), hint="with equal surprisals every token is as "
                                                                        "typical as the crossing one: keep ties."),
        Case((torch.randn(3, 30, generator=g, dtype=f64) * 2, 0.9), hint="filter each row separately, with its own "
                                                                          "entropy H = -sum p log p."),
        Case((torch.randn(2, 12, generator=g, dtype=f64), 0.2)),
    ]


function_check("typical_filter", _typical_cases, rtol=0, atol=0)


def check_typical_filter(fn) -> None:
    """typical_filter(logits (B, V), mass): locally typical sampling's filter (Meister et al. 2023)."""
    run_check("typical_filter", fn)


function_check("pareto_front", lambda: [
    Case(([(0.0, 1.0), (1.0, 0.0), (0.5, 0.5)],)),
    Case(([(0.0, 0.0), (1.0, 1.0), (0.5, 2.0)],), hint="a point is dominated if another is at least as good on "
                                                      "both numbers and better on one: (0, 0) is."),
    Case(([(1.0, 1.0), (1.0, 1.0), (0.0, 0.0)],), hint="two equal points do not dominate each other: keep both."),
    Case(([(1.0, 0.5), (1.0, 0.7)],), hint="equal on one number and better on the other still dominates."),
    Case(([(-3.7, 0.89), (-2.2, 0.65), (-6.3, 0.99), (-2.3, 0.68), (-3.4, 0.87), (-2.0, 0.56)],),
         hint="return the indices of the points on the front, in increasing order."),
])


def check_pareto_front(fn) -> None:
    """pareto_front(points): the sorted indices of the points (x, y) that no other point dominates (higher is
    better in both)."""
    run_check("pareto_front", fn)
