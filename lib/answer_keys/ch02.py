"""Answer keys for chapter 2 (edit distance, PMI, TF-IDF, BM25, RRF, evaluation)."""

from __future__ import annotations

import math

import numpy as np
from lmbook.teaching.checks import Case

from . import Key


def bm25_term(tf, doc_len, avgdl, df, n_docs, k1=1.5, b=0.75):
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl))


def ppmi(counts):
    C = np.asarray(counts, dtype=float)
    total = C.sum()
    p_xy = C / total
    p_x, p_y = C.sum(axis=1) / total, C.sum(axis=0) / total
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log2(p_xy / np.outer(p_x, p_y))
    return np.where(C > 0, np.maximum(pmi, 0.0), 0.0)


def rrf(rankings, k=60):
    scores = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return scores


def average_precision(ranked, relevant):
    hits, total = 0, 0.0
    for rank, doc in enumerate(ranked, start=1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


def _hidden_bm25_term():
    return [
        Case((7, 60, 120, 30, 500)),
        Case((0, 500, 200, 2, 50), kwargs=dict(k1=0.9, b=0.4)),  # tf = 0
        Case((2, 90, 150, 480, 500)),  # df > N/2: the IDF stays positive
        Case((3, 10, 50, 5, 100), kwargs=dict(k1=1.8, b=0.0)),  # no length normalisation
        Case((6, 400, 80, 12, 3000), kwargs=dict(k1=0.5, b=1.0)),
    ]


def _hidden_ppmi():
    rng = np.random.default_rng(20260202)
    square = rng.integers(0, 6, size=(4, 4))
    square[1, :] = 0  # a word never seen as x
    square[:, 2] = 0  # a word never seen as y
    square[0, 0] = 3
    rectangular = rng.integers(0, 4, size=(3, 5))  # words x contexts: row and column sums differ in length
    rectangular[:, 4] = 0
    rectangular[2, 0] = 5
    smoothed = rng.uniform(0.1, 3.0, size=(3, 3))  # fractional counts
    return [
        Case((square,)),
        Case((rectangular,)),
        Case((np.outer([1, 2, 4], [3, 1, 2]),)),  # independent: 0 everywhere
        Case((smoothed,)),
        Case((np.array([[0, 7], [2, 0]]),)),
    ]


def _hidden_rrf():
    return [
        Case(([["d4", "d1", "d7", "d2"], ["d1", "d9"], ["d7", "d4", "d1"]],)),
        Case(([["p", "q"], [], ["q"]],), kwargs=dict(k=1)),
        Case(([["solo"]],), kwargs=dict(k=0)),
        Case(([],)),
        Case(([["a", "b", "c", "d", "e"], ["e", "d", "c", "b", "a"]],), kwargs=dict(k=2.5)),
    ]


def _hidden_average_precision():
    return [
        Case((["d3", "d1", "d5", "d2", "d8", "d4"], {"d1", "d4", "d9"})),  # d9 never retrieved
        Case((["q"], {"q"})),
        Case(([], {"a", "b"})),
        Case(([10, 20, 30, 40], {40})),
        Case((["r1", "r2", "r3"], {"r1", "r2", "r3"})),
    ]


KEYS = {
    "tfidf_by_hand": Key(answer=3 / 100 * math.log(10_000_000 / 1_000)),
    "bm25_term": Key(bm25_term, _hidden_bm25_term, giveaways=("bm25_idf", "bm25_tf")),
    "ppmi": Key(ppmi, _hidden_ppmi, giveaways=("ppmi", "pmi")),
    "rrf": Key(rrf, _hidden_rrf, giveaways=("reciprocal_rank_fusion",)),
    "average_precision": Key(average_precision, _hidden_average_precision),
}
