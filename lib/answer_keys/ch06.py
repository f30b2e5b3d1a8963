"""Answer keys for chapter 6 (embeddings)."""

from __future__ import annotations

import math

import numpy as np
from lmbook.fasttext import char_ngrams
from lmbook.teaching.checks import Case
from lmbook.teaching.checks.ch06 import SGNS_BY_HAND

from . import Key


def _log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x))


def fasttext_ngrams(word, n_min, n_max):
    return char_ngrams(word, n_min, n_max)


def analogy_3cosmul(vectors, a, b, c):
    best, best_score = None, -math.inf
    norms = [math.sqrt(sum(v * v for v in row)) for row in np.asarray(vectors, dtype=float).tolist()]
    rows = np.asarray(vectors, dtype=float).tolist()

    def shifted(i, j):
        return (sum(p * q for p, q in zip(rows[i], rows[j], strict=True)) / (norms[i] * norms[j]) + 1) / 2

    for x in range(len(rows)):
        if x in (a, b, c):
            continue
        score = shifted(x, b) * shifted(x, c) / (shifted(x, a) + 1e-3)
        if score > best_score:
            best, best_score = x, score
    return best


def idf_weighted_mean(tokens, vectors, index, idf):
    total, weight = np.zeros(vectors.shape[1]), 0.0
    for t in tokens:
        if t in index and t in idf:
            total += idf[t] * vectors[index[t]]
            weight += idf[t]
    return total / weight if weight else total


def _hidden_fasttext_ngrams():
    return [
        Case(("sun", 3, 5)),  # n = 5 is the whole "<sun>": left out
        Case(("a", 1, 3)),
        Case(("hello", 2, 2)),
        Case(("naïve", 3, 6)),
        Case(("transformer", 4, 5)),
    ]


def _hidden_analogy_3cosmul():
    rng = np.random.default_rng(60)
    base = rng.normal(size=(20, 7))
    offset = rng.normal(size=7)
    planted = np.vstack([base[:10], base[:10] + offset])  # row i + 10 = row i + the same offset
    return [
        Case((planted, 0, 10, 3)),
        Case((base, 19, 0, 7)),
        Case((base * rng.uniform(0.05, 20, size=(20, 1)), 1, 2, 3)),
        Case((np.abs(base), 4, 5, 6)),
        Case((rng.normal(size=(4, 3)), 3, 2, 1)),  # one candidate left
    ]


def _hidden_idf_weighted_mean():
    rng = np.random.default_rng(61)
    vectors = rng.normal(size=(6, 4))
    index = {w: i for i, w in enumerate(["a", "b", "c", "d", "e", "f"])}
    idf = {"a": 0.5, "b": 1.5, "c": 2.5, "e": 0.0, "g": 9.0}
    return [
        Case((["a", "b", "c"], vectors, index, idf)),
        Case((["c", "c", "c", "a"], vectors, index, idf)),
        Case((["d", "f", "g"], vectors, index, idf)),
        Case((["b", "e"], vectors, index, idf)),  # a zero weight still counts as known
        Case((["a"], vectors, index, idf)),
    ]


KEYS = {
    "sgns_by_hand": Key(answer=_log_sigmoid(SGNS_BY_HAND["positive"])
                        + sum(_log_sigmoid(-s) for s in SGNS_BY_HAND["negatives"])),
    "fasttext_ngrams": Key(fasttext_ngrams, _hidden_fasttext_ngrams, giveaways=("char_ngrams",)),
    "analogy_3cosmul": Key(analogy_3cosmul, _hidden_analogy_3cosmul, giveaways=("analogy",)),
    "idf_weighted_mean": Key(idf_weighted_mean, _hidden_idf_weighted_mean, giveaways=("mean_vector",)),
}
