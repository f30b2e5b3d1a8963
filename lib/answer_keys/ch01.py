"""Answer keys for chapter 1 (language models and perplexity)."""

from __future__ import annotations

import math
import random

from lmbook.teaching.checks import Case

from . import Key


def add_k(count_hw, count_h, vocab_size, k):
    return (count_hw + k) / (count_h + k * vocab_size)


def corpus_perplexity(per_string_probs):
    logs = [math.log(p) for probs in per_string_probs for p in probs]
    return math.exp(-sum(logs) / len(logs))


def optimal_logit_gap(num_classes, epsilon):
    if epsilon == 0:
        return math.inf
    low = epsilon / num_classes
    return math.log((1 - epsilon + low) / low)


def bits_per_char(ppl, n_tokens, n_chars):
    return n_tokens * math.log2(ppl) / n_chars


def _hidden_add_k():
    return [Case((0, 3, 7, 0.25)), Case((12, 40, 250, 0.5)), Case((1, 1, 2, 3.0)), Case((0, 0, 1, 1.0))]


def _hidden_corpus_perplexity():
    rng = random.Random(20261124)
    return [Case(([[rng.uniform(0.01, 1) for _ in range(rng.randint(1, 6))] for _ in range(n)],)) for n in (1, 3, 5)]


KEYS = {
    "ppl_by_hand": Key(answer=(0.2 * 0.5 * 0.1 * 0.4) ** (-1 / 4)),
    "add_k": Key(add_k, _hidden_add_k),
    "corpus_perplexity": Key(corpus_perplexity, _hidden_corpus_perplexity),
    "optimal_logit_gap": Key(optimal_logit_gap, lambda: [Case((3, 0.5)), Case((100, 0.01)), Case((7, 1.0))]),
    "bits_per_char": Key(bits_per_char, lambda: [Case((2.0, 3, 12)), Case((55.5, 1000, 3210)), Case((1.5, 1, 1))]),
}
