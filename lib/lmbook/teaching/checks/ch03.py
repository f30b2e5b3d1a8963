"""Self-checks for chapter 3 (PageRank, personalised PageRank, TextRank)."""

from __future__ import annotations

import numpy as np

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_pagerank_by_hand", "check_pagerank_dense", "check_rank_players", "check_related_topics"]

answer_check("pagerank_by_hand",
             hint="each page gets (1 - d)/N = 0.05 from teleport; page 1 splits its score between pages 2 and 3, "
                  "page 2 gives all of it to page 3; solve the three equations (the scores sum to 1).")


def check_pagerank_by_hand(answer) -> None:
    """PageRank of page 3 in the graph 1 -> 2, 1 -> 3, 2 -> 3, 3 -> 1 with d = 0.85 and uniform teleport."""
    check_answer("pagerank_by_hand", answer)


def _chain(n):
    A = np.zeros((n, n))
    A[np.arange(n - 1), np.arange(1, n)] = 1.0  # 0 -> 1 -> ... -> n-1, the last node dangling
    return A


function_check("pagerank_dense", lambda: [
    Case((np.array([[0.0, 1.0], [1.0, 0.0]]),), hint="a two-node cycle: both scores are 1/2."),
    Case((np.array([[0.0, 1.0, 1.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),)),
    Case((_chain(4),), hint="a dangling node (a row of zeros) jumps to every node with probability 1/N."),
    Case((np.array([[0.0, 3.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),), kwargs=dict(damping=0.5),
         hint="links are weighted: divide each row by its sum; use the damping you are given."),
    Case((np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]),), kwargs=dict(damping=0.95),
         hint="a self-loop is a link like any other."),
], rtol=1e-7, atol=1e-9, hint="x <- d (x P + (x . m) / N) + (1 - d) / N from the uniform x, with P the row-normalised "
                              "adjacency and m the dangling mask, until the L1 change is below 1e-12.")


def check_pagerank_dense(fn) -> None:
    """pagerank_dense(adjacency, damping=0.85): PageRank with uniform teleport and dangling jumps."""
    run_check("pagerank_dense", fn)


function_check("rank_players", lambda: [
    Case(([("ann", "bob"), ("bob", "cat"), ("cat", "ann")],), hint="a cycle of wins: everyone ties at 1/3."),
    Case(([("ann", "bob"), ("ann", "cat"), ("bob", "cat")],),
         hint="each match is a link from the loser to the winner; an unbeaten player is a dangling node."),
    Case(([("ann", "bob"), ("ann", "bob"), ("bob", "ann"), ("cat", "bob")],),
         hint="repeated wins add up: the link's weight is the number of wins."),
    Case(([("x", "y"), ("y", "z"), ("z", "w"), ("w", "x"), ("x", "z")],), kwargs=dict(damping=0.6),
         hint="use the damping you are given."),
], rtol=1e-6, atol=1e-9, hint="every match (winner, loser) adds 1 to the link loser -> winner; return "
                              "{player: PageRank score} over every player who played.")


def check_rank_players(fn) -> None:
    """rank_players(matches, damping=0.85) -> {player: score}, PageRank with losers linking to winners."""
    run_check("rank_players", fn)


def _weighted(seed, n, p=0.35):
    rng = np.random.default_rng(seed)
    return np.round((rng.random((n, n)) < p) * rng.uniform(0.5, 2.0, (n, n)), 2) * (1 - np.eye(n))


function_check("related_topics", lambda: [
    Case((_weighted(1, 6), [0]), kwargs=dict(k=3)),
    Case((_weighted(2, 8), [1, 4]), kwargs=dict(k=4),
         hint="teleport only to the seeds, uniformly; never return a seed."),
    Case((np.array([[0, 1, 0, 0, 0], [0, 0, 1.5, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 2, 0]]), [2]),
         kwargs=dict(k=2), hint="follow links both ways: use A + A^T, so that a topic that only links *to* the "
                                "seed is related too."),
    Case((_weighted(3, 7), [6]), hint="the default k is 5."),
    Case((np.pad(_weighted(5, 6), (0, 2)), [0, 7]), kwargs=dict(k=6),
         hint="seed 7 is isolated, so dangling: from there the walker jumps back to the seeds (w = v), not to any "
              "node."),
], rtol=0, atol=0, hint="personalised PageRank on A + A^T (links count both ways) with v uniform over the seeds and "
                        "dangling nodes jumping by v too; the k best nodes that are not seeds (never return a seed), "
                        "best first.")


def check_related_topics(fn) -> None:
    """related_topics(adjacency, seeds, k=5): the k non-seed nodes with the highest personalised PageRank on the
    undirected graph, best first."""
    run_check("related_topics", fn)
