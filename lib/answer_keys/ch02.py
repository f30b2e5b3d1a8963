"""Answer keys for chapter 2 (edit distance, PMI, TF-IDF, BM25, RRF, evaluation)."""

from __future__ import annotations

import math

import numpy as np
from lmbook.teaching.checks import Case

from . import Key


def bm25_term(tf, doc_len, avgdl, df, n_docs, k1=1.5, b=0.75):
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl))


def average_precision(ranked, relevant):
    hits, total = 0, 0.0
    for rank, doc in enumerate(ranked, start=1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


def expand_query(query, association, vocab, m):
    scores = np.asarray(association, dtype=float)
    out = list(query)
    for word in query:
        if word not in vocab:
            continue
        row = scores[vocab.index(word)]
        partners = sorted((j for j in range(len(vocab)) if row[j] > 0), key=lambda j: (-row[j], j))
        out += [vocab[j] for j in partners if vocab[j] not in out][:m]
    return out


def _hidden_bm25_term():
    return [
        Case((7, 60, 120, 30, 500)),
        Case((0, 500, 200, 2, 50), kwargs=dict(k1=0.9, b=0.4)),  # tf = 0
        Case((2, 90, 150, 480, 500)),  # df > N/2: the IDF stays positive
        Case((3, 10, 50, 5, 100), kwargs=dict(k1=1.8, b=0.0)),  # no length normalisation
        Case((6, 400, 80, 12, 3000), kwargs=dict(k1=0.5, b=1.0)),
    ]


def _hidden_average_precision():
    return [
        Case((["d3", "d1", "d5", "d2", "d8", "d4"], {"d1", "d4", "d9"})),  # d9 never retrieved
        Case((["q"], {"q"})),
        Case((["m", "n"], {"n", "o", "p"})),  # shorter than the relevant set: divide by 3, not 2
        Case(([], {"a", "b"})),
        Case(([10, 20, 30, 40], {40})),
        Case((["r1", "r2", "r3"], {"r1", "r2", "r3"})),
    ]


def _hidden_expand_query():
    words = ["ast", "byte", "code", "data", "eval", "file"]
    rng = np.random.default_rng(20261124)
    upper = np.triu(rng.integers(0, 4, size=(6, 6)).astype(float), 1)
    scores = upper + upper.T  # symmetric, zero diagonal, integer scores so ties occur
    negative = scores - 1.5  # PMI-like: some scores <= 0 must be skipped
    return [
        Case((["code", "data"], scores, words, 2)),
        Case((["eval", "ast", "file"], scores, words, 1)),
        Case((["byte"], negative, words, 5)),
        Case((["unknown", "data"], scores, words, 3)),
        Case((["file", "file"], scores, words, 2)),  # a repeated token
        Case((["ast"], np.zeros((6, 6)), words, 2)),  # nothing associated
    ]


KEYS = {
    "pmi_by_hand": Key(answer=math.log2(40 * 10_000 / (50 * 80))),
    "bm25_term": Key(bm25_term, _hidden_bm25_term, giveaways=("bm25_idf", "bm25_tf")),
    "average_precision": Key(average_precision, _hidden_average_precision),
    "expand_query": Key(expand_query, _hidden_expand_query),
}
