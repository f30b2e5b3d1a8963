"""Chapter 16's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import pytest
import torch
import torch.nn.functional as F
from lmbook import checks
from lmbook.checks import RESULTS


def robust_dpo_loss(pc, pr, rc, rr, beta, eps):
    z = beta * ((pc - rc) - (pr - rr))
    return ((-(1 - eps) * F.logsigmoid(z) + eps * F.logsigmoid(-z)) / (1 - 2 * eps)).mean()


def robust_as_cdpo(pc, pr, rc, rr, beta, eps):
    z = beta * ((pc - rc) - (pr - rr))
    return (-(1 - eps) * F.logsigmoid(z) - eps * F.logsigmoid(-z)).mean()  # cDPO, not the unbiased loss


def robust_no_denominator(pc, pr, rc, rr, beta, eps):
    z = beta * ((pc - rc) - (pr - rr))
    return (-(1 - eps) * F.logsigmoid(z) + eps * F.logsigmoid(-z)).mean()


def simpo_loss(pc, pr, lc, lr, beta, gamma):
    return -F.logsigmoid(beta * (pc / lc - pr / lr) - gamma).mean()


def simpo_unnormalised(pc, pr, lc, lr, beta, gamma):
    return -F.logsigmoid(beta * (pc - pr) - gamma).mean()


def simpo_margin_outside(pc, pr, lc, lr, beta, gamma):
    return -F.logsigmoid(beta * (pc / lc - pr / lr - gamma)).mean()


def best_of_n_policy(ref_probs, rewards, n):
    ref_probs, rewards = torch.as_tensor(ref_probs, dtype=torch.float64), torch.as_tensor(rewards, dtype=torch.float64)
    at_most = torch.stack([ref_probs[rewards <= r].sum() for r in rewards])
    return at_most ** n - (at_most - ref_probs) ** n


def best_of_n_by_position(ref_probs, rewards, n):
    cdf = torch.cumsum(torch.as_tensor(ref_probs, dtype=torch.float64), 0)  # assumes sorted rewards
    return cdf ** n - (cdf - torch.as_tensor(ref_probs, dtype=torch.float64)) ** n


def best_of_n_tilted(ref_probs, rewards, n):
    p = torch.as_tensor(ref_probs, dtype=torch.float64) ** n  # not a distribution of the maximum
    return p / p.sum()


def length_bias(chosen, rejected):
    return sum((c < r) - (c > r) for c, r in zip(chosen, rejected, strict=True)) / len(chosen)


def length_bias_ties_shorter(chosen, rejected):
    return sum((c <= r) - (c > r) for c, r in zip(chosen, rejected, strict=True)) / len(chosen)


def length_bias_shorter_only(chosen, rejected):
    return sum(c < r for c, r in zip(chosen, rejected, strict=True)) / len(chosen)


@pytest.mark.parametrize("check, right, wrongs", [
    (checks.check_length_bias, length_bias, [length_bias_ties_shorter, length_bias_shorter_only]),
    (checks.check_robust_dpo_loss, robust_dpo_loss, [robust_as_cdpo, robust_no_denominator]),
    (checks.check_simpo_loss, simpo_loss, [simpo_unnormalised, simpo_margin_outside]),
    (checks.check_best_of_n_policy, best_of_n_policy, [best_of_n_by_position, best_of_n_tilted]),
])
def test_function_checks(check, right, wrongs, capsys):
    name = check.__name__.removeprefix("check_")
    check(right)
    assert RESULTS[name] is True, capsys.readouterr().out
    for wrong in wrongs:
        check(wrong)
        out = capsys.readouterr().out
        assert RESULTS[name] is False and "✗" in out and ("hint" in out or "expected" in out), out


def test_answer_checks(capsys):
    w = [0.6, 0.3 * math.exp(0.5), 0.1 * math.exp(1.5)]
    checks.check_optimum_by_hand(w[2] / sum(w))
    assert RESULTS["optimum_by_hand"] is True
    capsys.readouterr()
    checks.check_optimum_by_hand(math.exp(1.5) / (1 + math.exp(0.5) + math.exp(1.5)))  # forgot the prior pi_ref
    assert RESULTS["optimum_by_hand"] is False and "hint" in capsys.readouterr().out
    w_times_beta = [0.6, 0.3 * math.exp(2), 0.1 * math.exp(6)]  # r * beta instead of r / beta
    checks.check_optimum_by_hand(w_times_beta[2] / sum(w_times_beta))
    assert RESULTS["optimum_by_hand"] is False
    old = [0.5, 0.3 * math.e, 0.2 * math.e ** 2]  # the worked example of section 4, not this problem
    checks.check_optimum_by_hand(old[2] / sum(old))
    assert RESULTS["optimum_by_hand"] is False


def test_stub_is_reported_politely(capsys):
    def stub(*args):
        raise NotImplementedError

    checks.check_simpo_loss(stub)
    assert RESULTS["simpo_loss"] is False and "not attempted" in capsys.readouterr().out
