"""A task whose answer needs intermediate steps: multi-digit addition, written three ways, with a verifier.

- :func:`make_problems`: pairs (a, b) of ``digits``-digit numbers drawn by a seeded ``random.Random``;
- :func:`prompt` and :func:`target`: the text "a+b=" and the text a model must write after it, in one of
  ``FORMATS``: "answer" (579.), "reversed" (every number least significant digit first, the order in which
  the digits are computed: "321+954=" then "975.") or "scratchpad" (one step per column, carries written
  out, then the answer);
- :func:`encode`, :func:`decode` and :func:`encode_examples`: a character vocabulary of 16 symbols, and
  padded batches of prompt + target with a mask of the target's positions (the positions a loss counts);
- :func:`parse_answer` and :func:`reward`: the verifier; a completion earns 1 if it states a + b, else 0;
  malformed text earns 0 and never raises;
- :func:`majority_vote` (self-consistency) and :func:`best_of_n`: two ways to spend more samples at test
  time; :func:`pass_at_k`: the unbiased estimate of the chance that k samples hold a right one. Chapter 17.

Left out on purpose: multiplication and other tasks (the same pieces would serve), and any model: the
policy-gradient losses are :mod:`lmbook.policy_gradient`, the model and its trainer are chapter 9's.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Callable

import torch

from . import validate

__all__ = ["FORMATS", "VOCAB", "PAD", "EOS", "make_problems", "prompt", "scratchpad", "target", "encode",
           "decode", "encode_examples", "parse_answer", "reward", "majority_vote", "best_of_n", "pass_at_k"]

FORMATS = ("answer", "reversed", "scratchpad")
PAD, EOS = "_", "."  # padding (id 0) and the end of every target
VOCAB = PAD + "0123456789+=;|" + EOS  # 16 characters; a character's id is its index here
_ID = {ch: i for i, ch in enumerate(VOCAB)}


# ---------------------------------------------------------------------------------------------------------
# The task and its three written forms
# ---------------------------------------------------------------------------------------------------------


def make_problems(n: int, digits: int, seed: int = 0) -> list[tuple[int, int]]:
    """``n`` problems (a, b), each operand drawn uniformly from the numbers with exactly ``digits`` digits
    (0-9 for one digit), by ``random.Random(seed)``: the same seed gives the same problems on every machine."""
    _check_make_problems(n, digits, seed)
    rng = random.Random(seed)
    low, high = (0 if digits == 1 else 10 ** (digits - 1)), 10 ** digits - 1
    return [(rng.randint(low, high), rng.randint(low, high)) for _ in range(n)]


def prompt(a: int, b: int, fmt: str = "answer") -> str:
    """The question as the model reads it: "a+b=", with both operands' digits reversed in the "reversed" format
    ("321+954=" for 123 + 459), so that the i-th digits of a, b and the answer sit the same distance apart."""
    _check_target(a, b, fmt)
    if fmt == "reversed":
        return f"{str(a)[::-1]}+{str(b)[::-1]}="
    return f"{a}+{b}="


def scratchpad(a: int, b: int) -> str:
    """The column steps of a + b, least significant column first. Column i adds the digits a_i and b_i
    (0 beyond a number's length) and the carry c_i into it, and writes the two-digit column sum:

        "a_i+b_i+c_i=s_i"   with  s_i = a_i + b_i + c_i in 00..19,  c_{i+1} = s_i // 10,  digit_i = s_i % 10.

    For 123 + 459 the steps are "3+9+0=12;2+5+1=08;1+4+0=05": each step needs only the step before it."""
    _check_operands(a, b)
    steps, carry = [], 0
    for i in range(max(len(str(a)), len(str(b)))):
        x, y = a // 10 ** i % 10, b // 10 ** i % 10
        column = x + y + carry
        steps.append(f"{x}+{y}+{carry}={column:02d}")
        carry = column // 10
    return ";".join(steps)


def target(a: int, b: int, fmt: str = "answer") -> str:
    """What a model must write after :func:`prompt`: "579." ("answer"), "975." ("reversed") or
    "3+6+0=09;2+5+0=07;1+4+0=05|579." ("scratchpad": the steps, "|", the answer). Every target ends with EOS."""
    _check_target(a, b, fmt)
    answer = str(a + b)
    if fmt == "answer":
        return answer + EOS
    if fmt == "reversed":
        return answer[::-1] + EOS
    return scratchpad(a, b) + "|" + answer + EOS


# ---------------------------------------------------------------------------------------------------------
# Characters and ids
# ---------------------------------------------------------------------------------------------------------


def encode(text: str) -> list[int]:
    """The ids of ``text``'s characters in ``VOCAB``."""
    _check_text(text)
    return [_ID[ch] for ch in text]


def decode(ids) -> str:
    """The text of a list of ids (or a 1-D integer tensor); padding (id 0) is dropped."""
    ids = _check_ids(ids)
    return "".join(VOCAB[i] for i in ids if i != 0)


def encode_examples(problems, fmt: str = "answer") -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of prompt + target sequences, right-padded with PAD (id 0), and the mask of the positions whose
    next token is a target character (the positions a loss on the answer counts):

        ids (N, T) int64,  target_mask (N, T - 1) bool,  target_mask[n, t] = (ids[n, t + 1] is in the target).
    """
    _check_examples(problems, fmt)
    texts = [(prompt(a, b, fmt), target(a, b, fmt)) for a, b in problems]
    length = max(len(p) + len(t) for p, t in texts)
    ids = torch.zeros(len(texts), length, dtype=torch.long)  # (N, T), PAD = 0
    target_mask = torch.zeros(len(texts), length - 1, dtype=torch.bool)  # (N, T - 1)
    for n, (p, t) in enumerate(texts):
        ids[n, :len(p) + len(t)] = torch.tensor(encode(p + t))
        target_mask[n, len(p) - 1:len(p) + len(t) - 1] = True
    return ids, target_mask


# ---------------------------------------------------------------------------------------------------------
# The verifier
# ---------------------------------------------------------------------------------------------------------


def parse_answer(completion: str, fmt: str = "answer") -> int | None:
    """The number a completion states, or None if it states none. The completion is read up to its first EOS
    (it must have one); "scratchpad" reads what follows the last "|", "reversed" reads the digits backwards.
    Anything but a number written as ``str(n)`` writes it (1 to 20 digits, no leading zero) gives None: empty
    text, a "+", a missing EOS, a step without its answer, "007". So only the exact answer earns a reward."""
    _check_parse(completion, fmt)
    if EOS not in completion:
        return None
    text = completion.split(EOS, 1)[0]
    if fmt == "scratchpad":
        if "|" not in text:
            return None
        text = text.rsplit("|", 1)[1]
    number = text[::-1] if fmt == "reversed" else text
    canonical = number.isascii() and number.isdigit() and len(number) <= 20 and number == str(int(number))
    return int(number) if canonical else None


def reward(completion: str, a: int, b: int, fmt: str = "answer") -> float:
    """The verifiable reward: 1.0 if the completion's answer (:func:`parse_answer`) equals a + b, else 0.0.
    Only the answer is checked, not the steps: an outcome reward, as in RL with verifiable rewards."""
    _check_operands(a, b)
    return float(parse_answer(completion, fmt) == a + b)


# ---------------------------------------------------------------------------------------------------------
# Spending samples at test time
# ---------------------------------------------------------------------------------------------------------


def majority_vote(answers) -> int | None:
    """Self-consistency: the most frequent answer among N sampled ones, None answers (malformed samples)
    left out; None if every sample is malformed. A tie goes to the tied answer that was sampled first, so the
    vote is a deterministic function of the list (and a vote of one sample is that sample)."""
    _check_answers(answers)
    counts = Counter(x for x in answers if x is not None)  # a Counter keeps first-seen order
    if not counts:
        return None
    best = max(counts.values())
    return next(x for x, c in counts.items() if c == best)


def best_of_n(completions, verifier: Callable[[str], float]) -> int:
    """Best-of-N: the index of the completion the verifier scores highest (the first one on a tie).
    With an exact verifier (:func:`reward`) best-of-N is right whenever any of the N samples is right."""
    _check_best_of_n(completions, verifier)
    scores = [verifier(c) for c in completions]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k, the chance that at least one of k samples is right, from n >= k samples
    of which c are right (Chen et al. 2021): one minus the share of k-subsets of the n samples with no right one,

        pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)   (the stable product).

    The plug-in 1 - (1 - c/n)^k is biased low: it is a concave function of the estimate c/n (Jensen)."""
    _check_pass_at_k(n, c, k)
    if n - c < k:  # every k-subset holds a right sample
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


# ---------------------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------------------


def _check_make_problems(n, digits, seed) -> None:
    validate.integer("n", n)
    validate.integer("digits", digits, high=18)
    validate.integer("seed", seed, low=0)


def _check_operands(a, b) -> None:
    validate.integer("a", a, low=0)
    validate.integer("b", b, low=0)


def _check_target(a, b, fmt) -> None:
    _check_operands(a, b)
    validate.choice("fmt", fmt, FORMATS)


def _check_parse(completion, fmt) -> None:
    validate.string("completion", completion, empty=True)
    validate.choice("fmt", fmt, FORMATS)


def _check_best_of_n(completions, verifier) -> None:
    validate.strings("completions", completions)
    if not callable(verifier):
        raise TypeError(f"verifier must be a function from a completion to a score, got {validate.describe(verifier)}")


def _check_text(text) -> None:
    validate.string("text", text, empty=True)
    bad = [ch for ch in text if ch not in _ID]
    if bad:
        raise ValueError(f"text must use only the characters {VOCAB!r}, found {bad[0]!r}")


def _check_ids(ids) -> list[int]:
    if isinstance(ids, torch.Tensor):
        validate.token_ids("ids", ids, len(VOCAB), ndim=1)
        return ids.tolist()
    validate.sequence("ids", ids, empty=True, what="ids")
    for i, x in enumerate(ids):
        validate.integer(f"ids[{i}]", x, low=0, high=len(VOCAB) - 1)
    return list(ids)


def _check_examples(problems, fmt) -> None:
    _check_problems(problems)
    validate.choice("fmt", fmt, FORMATS)


def _check_problems(problems) -> None:
    validate.sequence("problems", problems, what="(a, b) pairs")
    for i, pair in enumerate(problems):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"problems[{i}] must be an (a, b) pair, got {validate.describe(pair)}")
        validate.integer(f"problems[{i}][0]", pair[0], low=0)
        validate.integer(f"problems[{i}][1]", pair[1], low=0)


def _check_answers(answers) -> None:
    validate.sequence("answers", answers, empty=False, what="ints or None")
    for i, x in enumerate(answers):
        if x is not None:
            validate.integer(f"answers[{i}]", x, low=0)


def _check_pass_at_k(n, c, k) -> None:
    validate.integer("n", n)
    validate.integer("c", c, low=0, high=n)
    validate.integer("k", k, high=n)
