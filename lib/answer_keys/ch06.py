"""Answer keys for chapter 6 (embeddings)."""

from __future__ import annotations

import math

import numpy as np
from lmbook.fasttext import char_ngrams
from lmbook.hierarchical_softmax import huffman_code
from lmbook.teaching.checks import Case
from lmbook.teaching.checks.ch06 import SGNS_BY_HAND

from . import Key


def _log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x))


def context_pairs(sentence, window):
    return [(sentence[i], sentence[j]) for i in range(len(sentence))
            for j in range(i - window, i + window + 1) if j != i and 0 <= j < len(sentence)]


def fasttext_ngrams(word, n_min, n_max):
    return char_ngrams(word, n_min, n_max)


def noise_distribution(counts, power):
    weights = np.asarray(counts, dtype=float) ** power
    return weights / weights.sum()


def expected_path_length(counts):
    paths, _ = huffman_code(counts)
    lengths = (paths >= 0).sum(1).numpy()
    return float(np.dot(counts, lengths) / np.sum(counts))


def _hidden_context_pairs():
    return [
        Case((["to", "be", "or", "not", "to", "be"], 4)),  # "to" is in its own window: keep that pair
        Case((["z", "z", "z"], 2)),
        Case((list("abcdefg"), 3)),
        Case((["hi", "there"], 1)),
        Case((["lone"], 4)),
    ]


def _hidden_fasttext_ngrams():
    return [
        Case(("sun", 3, 5)),  # n = 5 is the whole "<sun>": left out
        Case(("a", 1, 3)),
        Case(("hello", 2, 2)),
        Case(("naïve", 3, 6)),
        Case(("transformer", 4, 5)),
    ]


def _hidden_noise_distribution():
    return [
        Case(([7, 3, 2, 1], 0.75)),
        Case(([12, 5, 5, 1, 40], 1.0)),
        Case(([9, 1, 1], 0.0)),
        Case(([10000, 100, 1], 0.5)),
        Case(([3], 0.75)),
    ]


def _hidden_expected_path_length():
    return [
        Case(([5, 5],)),
        Case(([1, 1, 1],)),
        Case(([10, 1, 1, 1, 1, 1, 1],)),
        Case(([3, 7, 1, 9, 2, 2],)),  # not sorted
        Case(([1] * 37,)),  # not a power of 2
    ]


KEYS = {
    "sgns_by_hand": Key(answer=_log_sigmoid(SGNS_BY_HAND["positive"])
                        + sum(_log_sigmoid(-s) for s in SGNS_BY_HAND["negatives"])),
    "context_pairs": Key(context_pairs, _hidden_context_pairs, giveaways=("skipgram_pairs",)),
    "fasttext_ngrams": Key(fasttext_ngrams, _hidden_fasttext_ngrams, giveaways=("char_ngrams",)),
    "noise_distribution": Key(noise_distribution, _hidden_noise_distribution),
    "expected_path_length": Key(expected_path_length, _hidden_expected_path_length, giveaways=("huffman_code",)),
}
