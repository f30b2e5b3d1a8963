"""lmbook.reasoning: the problems, the three target formats, the vocabulary, the verifier and the two ways of
spending samples (self-consistency and best-of-N). The scratchpad is checked step by step by a parser written
independently of the module's generator."""

import random
import re

import pytest
import torch
from lmbook import reasoning as R


def _steps_are_right(a: int, b: int, pad: str) -> bool:
    """An independent reading of a scratchpad: every column's digits, carry and sum, and the final answer."""
    steps, answer = pad.rstrip(".").split("|")
    carry, digits = 0, []
    rows = steps.split(";")
    width = max(len(str(a)), len(str(b)))
    if len(rows) != width:
        return False
    for i, row in enumerate(rows):
        m = re.fullmatch(r"(\d)\+(\d)\+([01])=(\d\d)", row)
        if not m:
            return False
        x, y, c, s = (int(g) for g in m.groups())
        if x != int(str(a).zfill(width)[-1 - i]) or y != int(str(b).zfill(width)[-1 - i]) or c != carry:
            return False
        if s != x + y + c:
            return False
        carry, digits = s // 10, digits + [s % 10]
    written = ("1" if carry else "") + "".join(map(str, reversed(digits)))
    return written == answer == str(a + b)


@pytest.mark.parametrize("digits", [1, 2, 3, 4, 5, 8])
def test_every_scratchpad_verifies(digits):
    for a, b in R.make_problems(300, digits, seed=digits) + [(10 ** digits - 1, 10 ** digits - 1), (0, 0)]:
        for fmt in R.FORMATS:
            assert R.reward(R.target(a, b, fmt), a, b, fmt) == 1.0, (a, b, fmt)
        assert _steps_are_right(a, b, R.target(a, b, "scratchpad")), (a, b)


def test_scratchpad_example_and_unequal_lengths():
    assert R.target(123, 459, "scratchpad") == "3+9+0=12;2+5+1=08;1+4+0=05|582."
    assert R.target(999, 1, "scratchpad") == "9+1+0=10;9+0+1=10;9+0+1=10|1000."
    assert _steps_are_right(999, 1, R.target(999, 1, "scratchpad"))


def test_reversed_format_round_trips():
    for a, b in R.make_problems(500, 4, seed=1) + [(10, 90), (500, 500), (0, 7)]:
        text = R.target(a, b, "reversed")
        assert text[:-1] == str(a + b)[::-1]
        assert R.parse_answer(text, "reversed") == a + b
        operands = R.prompt(a, b, "reversed")[:-1].split("+")
        assert [int(x[::-1]) for x in operands] == [a, b]  # the operands are reversed too
    assert R.prompt(123, 459, "reversed") == "321+954=" and R.prompt(123, 459) == "123+459="


def test_problems_are_seeded_and_have_the_right_size():
    assert R.make_problems(20, 3, seed=5) == R.make_problems(20, 3, seed=5)
    assert R.make_problems(20, 3, seed=5) != R.make_problems(20, 3, seed=6)
    for a, b in R.make_problems(200, 3):
        assert len(str(a)) == len(str(b)) == 3
    assert {a for a, _ in R.make_problems(300, 1)} == set(range(10))


def test_verifier_rejects_wrong_answers():
    for a, b in R.make_problems(100, 3, seed=2):
        for fmt in R.FORMATS:
            right = R.target(a, b, fmt)
            assert R.reward(R.target(a, b + 1, fmt), a, b, fmt) == 0.0
            assert R.reward(right[:-1], a, b, fmt) == 0.0  # no EOS: not finished, no answer
        assert R.reward(R.target(a, b, "answer"), a, b, "reversed") == float(str(a + b) == str(a + b)[::-1])


@pytest.mark.parametrize("text", ["", ".", "5", "+.", "12+3.", "|.", "1|.", "3+6+0=09;2", "12|34|.", "0x1f.",
                                  "١٢.", "1" * 40 + ".", "..", "_12."])
def test_verifier_returns_zero_on_malformed_text(text):
    for fmt in R.FORMATS:
        assert R.reward(text, 3, 4, fmt) == 0.0
        assert R.parse_answer(text, fmt) is None


def test_verifier_never_raises_on_random_strings():
    rng = random.Random(0)
    alphabet = R.VOCAB + "ab -x\n"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        for fmt in R.FORMATS:
            assert R.reward(text, 12, 30, fmt) in (0.0, 1.0)


def test_only_the_canonical_number_counts():
    assert R.parse_answer("0.") == 0 and R.parse_answer("007.") is None
    assert R.parse_answer("01.", "reversed") == 10 and R.parse_answer("10.", "reversed") is None
    assert R.parse_answer("1+1+0=02|02.", "scratchpad") is None


def test_answer_after_eos_is_ignored():
    assert R.parse_answer("42.99", "answer") == 42
    assert R.parse_answer("1+1+0=02|2.|3.", "scratchpad") == 2


def test_encode_decode_and_batches():
    text = "123+459=3+9+0=12;2+5+1=08;1+4+0=05|582."
    assert R.decode(R.encode(text)) == text
    assert R.decode(torch.tensor(R.encode(text))) == text
    problems = [(5, 7), (123, 459), (99, 1)]
    for fmt in R.FORMATS:
        ids, mask = R.encode_examples(problems, fmt)
        assert ids.shape[1] == mask.shape[1] + 1
        for n, (a, b) in enumerate(problems):
            assert R.decode(ids[n, 1:][mask[n]]) == R.target(a, b, fmt)  # the masked next tokens are the target
            assert R.decode(ids[n]) == R.prompt(a, b, fmt) + R.target(a, b, fmt)
    with pytest.raises(ValueError, match="text"):
        R.encode("1-2")


def test_majority_vote_and_its_ties():
    assert R.majority_vote([3, 5, 5, None, 3, 5]) == 5
    assert R.majority_vote([7, 3, 3, 7]) == 7  # a tie goes to the answer sampled first
    assert R.majority_vote([3, 7, 7, 3]) == 3
    assert R.majority_vote([None, 4]) == 4  # malformed samples do not vote
    assert R.majority_vote([None, None]) is None
    assert R.majority_vote([9]) == 9


def test_best_of_n_picks_the_first_best():
    completions = ["12.", "13.", "14.", "13."]
    assert R.best_of_n(completions, lambda c: R.reward(c, 6, 7)) == 1
    assert R.best_of_n(completions, lambda c: 0.0) == 0
    assert R.best_of_n(completions, lambda c: float(len(c) + completions.index(c))) == 2
    with pytest.raises(TypeError, match="verifier"):
        R.best_of_n(completions, "reward")


# ----- pass@k: the unbiased estimator against a brute-force average over every k-subset ----------------------

@pytest.mark.parametrize("n, c, k", [(5, 0, 1), (5, 2, 1), (5, 2, 3), (6, 3, 4), (7, 1, 7), (8, 8, 2), (6, 5, 3)])
def test_pass_at_k_is_the_average_over_subsets(n, c, k):
    import itertools

    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    assert R.pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)


def test_pass_at_k_is_unbiased_and_the_plug_in_is_biased_low():
    import math

    p, n, k = 0.2, 10, 5  # c ~ Binomial(n, p): E[estimate] must be 1 - (1 - p)^k
    weights = [math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
    unbiased = sum(w * R.pass_at_k(n, c, k) for c, w in enumerate(weights))
    plug_in = sum(w * (1 - (1 - c / n) ** k) for c, w in enumerate(weights))
    assert unbiased == pytest.approx(1 - (1 - p) ** k, abs=1e-12)
    assert plug_in < 1 - (1 - p) ** k - 0.01


@pytest.mark.parametrize("args, error", [((3, 4, 1), ValueError), ((3, 1, 4), ValueError), ((3, 1, 0), ValueError),
                                         ((3.0, 1, 1), TypeError), ((3, -1, 1), ValueError)])
def test_pass_at_k_rejects_bad_counts(args, error):
    with pytest.raises(error):
        R.pass_at_k(*args)


def test_smollm2_replies_are_scored_strictly():
    """Chapter 17's SmolLM2 scoring: the integer that ends the last line of a finished reply, nothing else."""
    from lmbook.experiments.reasoning_runs import final_answer, last_integer
    assert final_answer("Adding the tens first...\nThe answer is 139.") == 139
    assert final_answer("76 + 63 = 139") == 139
    assert final_answer("So the result is 1,024") == 1024
    assert final_answer("The answer is 139", finished=False) is None  # cut off at the token limit
    reply = "1. Count the letters.\n3. Compare each one.\nThe final answer is \"transformer.count('r')\"."
    assert final_answer(reply) is None  # no integer ends the last line
    assert final_answer("") is None and final_answer("no number here") is None
    assert last_integer(reply) == 3  # the lenient rule the chapter shows failing: a list marker
    with pytest.raises(TypeError, match="finished"):
        final_answer("42", finished="yes")
