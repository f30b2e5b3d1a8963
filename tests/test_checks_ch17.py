"""Chapter 17's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math
from collections import Counter, defaultdict

import pytest
from lmbook import checks
from lmbook.checks import RESULTS


def multiply_scratchpad(a, d):
    steps, carry = [], 0
    for i in range(len(str(a))):
        digit = a // 10**i % 10
        s = digit * d + carry
        steps.append(f"{digit}*{d}+{carry}={s:02d}")
        carry = s // 10
    return ";".join(steps) + "|" + str(a * d) + "."


def multiply_most_significant_first(a, d):
    return multiply_scratchpad(int(str(a)[::-1]), d) if a % 10 else multiply_scratchpad(a, d)


def multiply_one_digit_column(a, d):
    return multiply_scratchpad(a, d).replace("=0", "=")  # drops the leading zero of a small column


def weighted_vote(answers, logps):
    mass = defaultdict(float)
    for x, lp in zip(answers, logps, strict=True):
        if x is not None:
            mass[x] += math.exp(lp)
    return max(mass, key=lambda x: (mass[x], -list(mass).index(x))) if mass else None


def vote_by_count(answers, logps):
    counts = Counter(x for x in answers if x is not None)
    return counts.most_common(1)[0][0] if counts else None


def vote_by_logp_sum(answers, logps):  # sums log-probabilities: a product of probabilities, not a mass
    mass = defaultdict(float)
    for x, lp in zip(answers, logps, strict=True):
        if x is not None:
            mass[x] += lp
    return max(mass, key=mass.get) if mass else None


def rloo_advantages(rewards):
    return rewards - (rewards.sum(1, keepdim=True) - rewards) / (rewards.shape[1] - 1)


def rloo_with_self(rewards):  # GRPO's unscaled advantage: the mean includes the sample itself
    return rewards - rewards.mean(1, keepdim=True)


def rloo_over_all_prompts(rewards):
    return rewards - (rewards.sum() - rewards) / (rewards.numel() - 1)


@pytest.mark.parametrize("check, right, wrongs", [
    (checks.check_multiply_scratchpad, multiply_scratchpad, [multiply_most_significant_first,
                                                             multiply_one_digit_column]),
    (checks.check_weighted_vote, weighted_vote, [vote_by_count, vote_by_logp_sum]),
    (checks.check_rloo_advantages, rloo_advantages, [rloo_with_self, rloo_over_all_prompts]),
])
def test_function_checks(check, right, wrongs, capsys):
    name = check.__name__.removeprefix("check_")
    check(right)
    assert RESULTS[name] is True, capsys.readouterr().out
    for wrong in wrongs:
        check(wrong)
        out = capsys.readouterr().out
        assert RESULTS[name] is False and "✗" in out and ("hint" in out or "expected" in out), out


def test_answer_check(capsys):
    d = [math.log(0.8 / 0.5), math.log(0.2 / 0.5)]
    kl = 0.5 * math.log(0.5 / 0.8) + 0.5 * math.log(0.5 / 0.2)
    checks.check_k2_bias(sum(0.5 * x * x / 2 for x in d) - kl)
    assert RESULTS["k2_bias"] is True
    capsys.readouterr()
    checks.check_k2_bias(sum(0.5 * x * x / 2 for x in d))  # E[k2] itself, not its bias
    assert RESULTS["k2_bias"] is False and "hint" in capsys.readouterr().out
    reverse_kl = 0.8 * math.log(0.8 / 0.5) + 0.2 * math.log(0.2 / 0.5)  # KL(pi_ref || pi)
    checks.check_k2_bias(sum(0.5 * x * x / 2 for x in d) - reverse_kl)
    assert RESULTS["k2_bias"] is False


def test_stub_is_reported_politely(capsys):
    def stub(*args):
        raise NotImplementedError

    checks.check_rloo_advantages(stub)
    assert RESULTS["rloo_advantages"] is False and "not attempted" in capsys.readouterr().out
