"""Self-checks for chapter 16 (preference optimisation: Bradley–Terry, the KL-regularised optimum, DPO)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_optimum_by_hand", "check_robust_dpo_loss", "check_simpo_loss",
           "check_best_of_n_policy",
           "check_length_bias"]

answer_check("optimum_by_hand",
             hint="pi*(y) = pi_ref(y) exp(r(y) / beta) / Z: divide each reward by beta = 2, weight each reply by "
                  "its reference probability, and divide by the sum of the weights, Z.")


def check_optimum_by_hand(answer) -> None:
    """pi*(y_3) for pi_ref = [0.6, 0.3, 0.1], r = [0, 1, 3], beta = 2."""
    check_answer("optimum_by_hand", answer)


def _random_logps(seed: int, n: int = 6, scale: float = 4.0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(n, generator=g, dtype=torch.float64) * scale - 20 for _ in range(4))


function_check("robust_dpo_loss", lambda: [
    Case((*_random_logps(0), 0.1, 0.0), hint="with eps = 0 this is the plain DPO loss -log sigma(beta h)."),
    Case((*_random_logps(1), 0.1, 0.2),
         hint="two things to check: the flipped term enters with a PLUS sign, + eps log sigma(-z) (the loss is "
              "subtracted, unlike cDPO), and the whole numerator is divided by 1 - 2 eps."),
    Case((*_random_logps(2), 0.5, 0.3), hint="divide by 1 - 2 eps, which makes the loss unbiased under flips."),
    Case((*_random_logps(3, n=1), 2.0, 0.1), hint="return the mean over pairs, a 0-d tensor."),
], rtol=1e-6, atol=1e-9)


def check_robust_dpo_loss(fn) -> None:
    """robust_dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta, eps):
    the mean over pairs of (-(1 - eps) log sigma(z) + eps log sigma(-z)) / (1 - 2 eps), z = beta h."""
    run_check("robust_dpo_loss", fn)


def _simpo_cases():
    def case(seed, beta, gamma, hint=""):
        g = torch.Generator().manual_seed(seed)
        pc, pr = (torch.randn(5, generator=g, dtype=torch.float64) * 3 - 15 for _ in range(2))
        lc, lr = (torch.randint(1, 12, (5,), generator=g).double() for _ in range(2))
        return Case((pc, pr, lc, lr, beta, gamma), hint=hint)

    return [
        case(0, 2.0, 0.0, hint="divide each log-probability by its completion length before taking the difference."),
        case(1, 2.0, 0.5, hint="the margin gamma is subtracted inside the sigmoid: -log sigma(beta * diff - gamma)."),
        case(2, 10.0, 1.0, hint="beta multiplies the difference of the mean log-probabilities, not gamma."),
    ]


function_check("simpo_loss", _simpo_cases, rtol=1e-6, atol=1e-9)


def check_simpo_loss(fn) -> None:
    """simpo_loss(policy_chosen_logps, policy_rejected_logps, chosen_lengths, rejected_lengths, beta, gamma):
    mean over pairs of -log sigma(beta (log pi(y_w)/|y_w| - log pi(y_l)/|y_l|) - gamma)."""
    run_check("simpo_loss", fn)


function_check("best_of_n_policy", lambda: [
    Case(([0.5, 0.3, 0.2], [0.0, 1.0, 2.0], 1), hint="n = 1 draws one sample: the result is pi_ref itself."),
    Case(([0.5, 0.3, 0.2], [0.0, 1.0, 2.0], 4),
         hint="the best of n is y when all n samples have reward <= r(y), minus the case where all are < r(y)."),
    Case(([0.1, 0.4, 0.2, 0.3], [2.0, -1.0, 0.5, 1.5], 3),
         hint="rank by reward, not by position in the list: the responses are not sorted."),
    Case(([0.25, 0.25, 0.25, 0.25], [3.0, 1.0, 2.0, 0.0], 10)),
], rtol=1e-6, atol=1e-9)


def check_best_of_n_policy(fn) -> None:
    """best_of_n_policy(ref_probs, rewards, n): the distribution of the highest-reward response among n
    independent samples of pi_ref (rewards distinct): P(best = y) = F(y)^n - F(y-)^n."""
    run_check("best_of_n_policy", fn)


function_check("length_bias", lambda: [
    Case(([3, 5, 2], [4, 5, 7]), hint="a tie (5 against 5) counts for neither side."),
    Case(([10, 2, 8, 1], [3, 9, 4, 6]), hint="subtract the fraction of pairs whose chosen reply is LONGER."),
    Case(([1, 1, 1, 1, 1], [6, 6, 6, 6, 6]), hint="every chosen reply shorter gives +1."),
    Case(([7, 9], [2, 3]), hint="every chosen reply longer gives -1: shorter counts +, longer counts -."),
], rtol=1e-9, atol=1e-12)


def check_length_bias(fn) -> None:
    """length_bias(chosen_lengths, rejected_lengths): mean(chosen < rejected) - mean(chosen > rejected)."""
    run_check("length_bias", fn)
