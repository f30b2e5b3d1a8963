"""Self-checks for chapter 17 (reasoning: scratchpads, test-time compute, policy gradients and GRPO)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_k2_bias", "check_multiply_scratchpad", "check_weighted_vote", "check_rloo_advantages"]

answer_check("k2_bias",
             hint="d = log pi_ref(y) - log pi(y) at each of the two tokens; E_pi[k2] = sum_y pi(y) d(y)^2 / 2, and "
                  "KL(pi || pi_ref) = sum_y pi(y) log(pi(y) / pi_ref(y)). Subtract the KL from E_pi[k2].")


def check_k2_bias(answer) -> None:
    """E_pi[k2] - KL(pi || pi_ref) for pi = [0.5, 0.5], pi_ref = [0.8, 0.2], k2 = d^2 / 2."""
    check_answer("k2_bias", answer)


function_check("multiply_scratchpad", lambda: [
    Case((47, 8), hint="least significant digit first: '7*8+0=56' is the first step, and its carry 5 enters the next."),
    Case((3, 3), hint="one digit, one step: '3*3+0=09|9.' (the column value always has two digits)."),
    Case((999, 9), hint="the last carry is not a step of its own: it is already the leading digit of the product."),
    Case((1204, 0), hint="a zero multiplier still writes one step per digit of a."),
    Case((0, 7), hint="a = 0 has one digit."),
])


def check_multiply_scratchpad(fn) -> None:
    """multiply_scratchpad(a, d): the steps "a_i*d+c_i=s_i" (s_i two digits), least significant digit first, joined
    by ";", then "|", the product a * d and "."."""
    run_check("multiply_scratchpad", fn)


function_check("weighted_vote", lambda: [
    Case(([5, 7, 7], [-1.0, -3.0, -3.0]), hint="weigh each sample by its probability exp(logp), not by its count."),
    Case(([5, 7, 7], [-2.0, -2.0, -2.0]), hint="with equal log-probabilities the vote is the plain majority."),
    Case(([None, 4, None], [0.0, -5.0, -0.1]), hint="a malformed sample (None) has no vote, however likely it is."),
    Case(([None, None], [-1.0, -2.0]), hint="no well-formed sample: return None."),
    Case(([3, 8], [-1.5, -1.5]), hint="a tie goes to the answer sampled first, as in majority_vote."),
])


def check_weighted_vote(fn) -> None:
    """weighted_vote(answers, logps): the answer with the largest sum of exp(logp) over its samples; None answers
    left out; None if there is no other; a tie goes to the answer sampled first."""
    run_check("weighted_vote", fn)


def _rewards(seed: int, p: int, g: int) -> torch.Tensor:
    return torch.randint(0, 2, (p, g), generator=torch.Generator().manual_seed(seed)).double()


function_check("rloo_advantages", lambda: [
    Case((torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64),),
         hint="leave the sample itself out: the baseline of the right sample is the mean of the other three, 0."),
    Case((_rewards(0, 3, 5),), hint="one baseline per prompt (row): average over the other G - 1 of its row."),
    Case((torch.tensor([[0.3, 0.3]], dtype=torch.float64),), hint="equal rewards: every advantage is 0."),
    Case((torch.tensor([[2.0, -1.0, 0.5]], dtype=torch.float64),), hint="the rewards need not be 0 or 1."),
])


def check_rloo_advantages(fn) -> None:
    """rloo_advantages(rewards): (P, G) -> (P, G), A_pg = r_pg - (sum_h r_ph - r_pg) / (G - 1)."""
    run_check("rloo_advantages", fn)
