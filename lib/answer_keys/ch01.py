"""Answer keys for chapter 1 (language models and perplexity)."""

from __future__ import annotations

import math
import random

from lmbook.teaching.checks import Case

from . import Key


def add_k(count_hw, count_h, vocab_size, k):
    return (count_hw + k) / (count_h + k * vocab_size)


def continuation_probs(bigrams):
    types = {tuple(b) for b in bigrams}  # distinct bigram types (v, w)
    left = {}
    for _, w in types:
        left[w] = left.get(w, 0) + 1  # distinct left neighbours of w
    return {w: left[w] / len(types) for w in sorted(left)}


def optimal_logit_gap(num_classes, epsilon):
    if epsilon == 0:
        return math.inf
    low = epsilon / num_classes
    return math.log((1 - epsilon + low) / low)


def char_sequences(sentences):
    return [list(" ".join(s)) for s in sentences]


def _hidden_add_k():
    return [Case((0, 3, 7, 0.25)), Case((12, 40, 250, 0.5)), Case((1, 1, 2, 3.0)), Case((0, 0, 1, 1.0))]


def _hidden_continuation_probs():
    rng = random.Random(20261124)
    words = ["the", "a", "of", "x", "list", "tuple"]
    return [Case(([[rng.choice(words), rng.choice(words)] for _ in range(n)],)) for n in (1, 8, 40)]


def _hidden_char_sequences():
    return [Case(([["def", "f", "(", ")", ":"], ["return", "0"]],)), Case(([["é", "ß"]],)), Case(([["_"]],))]


KEYS = {
    "ppl_by_hand": Key(answer=(0.2 * 0.5 * 0.1 * 0.4) ** (-1 / 4)),
    "add_k": Key(add_k, _hidden_add_k),
    "continuation_probs": Key(continuation_probs, _hidden_continuation_probs),
    "ppl_per_word": Key(answer=math.exp(1400 * math.log(25) / 1000)),
    "optimal_logit_gap": Key(optimal_logit_gap, lambda: [Case((3, 0.5)), Case((100, 0.01)), Case((7, 1.0))]),
    "char_sequences": Key(char_sequences, _hidden_char_sequences),
}
