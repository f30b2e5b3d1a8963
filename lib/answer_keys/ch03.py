"""Answer keys for chapter 3 (PageRank, personalised PageRank, TextRank)."""

from __future__ import annotations

import numpy as np
from lmbook.graphs import pagerank
from lmbook.teaching.checks import Case

from . import Key


def pagerank_dense(adjacency, damping=0.85):
    A = np.asarray(adjacency, dtype=float)
    n = A.shape[0]
    out = A.sum(axis=1)
    S = np.where(out[:, None] > 0, A / np.where(out > 0, out, 1)[:, None], 1.0 / n)  # dangling rows uniform
    x = np.full(n, 1.0 / n)
    while True:
        new = damping * x @ S + (1 - damping) / n
        if np.abs(new - x).sum() < 1e-12:
            return new
        x = new


def rank_players(matches, damping=0.85):
    players = sorted({p for match in matches for p in match})
    index = {p: i for i, p in enumerate(players)}
    A = np.zeros((len(players), len(players)))
    for winner, loser in matches:
        A[index[loser], index[winner]] += 1
    scores = pagerank(A, damping=damping, tol=1e-13).scores
    return {p: float(scores[index[p]]) for p in players}


def related_topics(adjacency, seeds, k=5):
    A = np.asarray(adjacency, dtype=float)
    v = np.zeros(A.shape[0])
    v[list(seeds)] = 1.0
    scores = pagerank(A + A.T, personalization=v, tol=1e-13).scores
    order = [int(i) for i in np.argsort(-scores, kind="stable") if i not in set(seeds)]
    return order[:k]


def _hidden_pagerank_dense():
    rng = np.random.default_rng(303)
    A = (rng.random((7, 7)) < 0.3) * rng.uniform(0.5, 2.0, (7, 7))
    A[2] = 0  # dangling
    return [
        Case((A,)),
        Case((np.zeros((3, 3)),)),  # every node dangling: uniform
        Case((np.array([[0.0, 1.0], [0.0, 0.0]]),), kwargs=dict(damping=0.0)),  # pure teleport
        Case((A.T.copy(),), kwargs=dict(damping=0.7)),
    ]


def _hidden_rank_players():
    return [
        Case(([("a", "b")],)),
        Case(([("p", "q"), ("q", "r"), ("r", "s"), ("s", "p"), ("p", "r"), ("p", "r")],), kwargs=dict(damping=0.9)),
        Case(([(1, 2), (2, 3), (3, 1), (1, 3)],)),
    ]


def _hidden_related_topics():
    rng = np.random.default_rng(404)
    A = np.round((rng.random((9, 9)) < 0.25) * rng.uniform(0.5, 2.0, (9, 9)), 2) * (1 - np.eye(9))
    B = np.pad(A, (1, 1))  # an isolated node at each end: dangling, so w matters
    return [Case((A, [3]), kwargs=dict(k=4)), Case((A, [0, 8]), kwargs=dict(k=7)), Case((B, [4, 10]), kwargs=dict(k=9))]


KEYS = {
    "pagerank_by_hand": Key(answer=float(pagerank(np.array([[0, 1, 1], [0, 0, 1], [1, 0, 0.0]]),
                                                  tol=1e-14).scores[2])),
    "pagerank_dense": Key(pagerank_dense, _hidden_pagerank_dense, giveaways=("pagerank", "google_matrix")),
    "rank_players": Key(rank_players, _hidden_rank_players),
    "related_topics": Key(related_topics, _hidden_related_topics),
}
