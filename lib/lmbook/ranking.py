"""Chapter 2: what to do with rankings once a retriever has made them: fuse them, and measure them.

- :func:`reciprocal_rank_fusion`: RRF(d) = sum over rankings of 1 / (k + rank(d)), one common way to combine
  a sparse retriever (BM25, :mod:`lmbook.bm25`) with a dense one (embeddings, chapter 6), with a tie rule
  that does not depend on the order of the rankings;
- :func:`precision_at_k`, :func:`recall_at_k` and :func:`reciprocal_rank` (its mean over queries is MRR);
- :func:`manual_queries`: a labelled query set over the Python manual, to measure retrievers on, with a fixed
  split into dev queries (to choose parameters on) and test queries (to report on).

A ranking is a list of document ids, best first; any hashable id works (an int index, a topic name).
Left out on purpose: graded relevance (nDCG), average precision (an exercise of the chapter), and
learned fusion weights.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from pathlib import Path

from . import validate

__all__ = ["reciprocal_rank_fusion", "precision_at_k", "recall_at_k", "reciprocal_rank", "manual_queries",
           "QUERY_SPLITS"]

QUERY_SPLITS = ("all", "dev", "test")


def reciprocal_rank_fusion(rankings, k: float = 60) -> list[tuple[object, float]]:
    """RRF(d) = sum over rankings r of 1 / (k + r(d)), with ranks from 1; a ranking without d adds 0.

    ``rankings`` is a list of rankings, each a list of document ids, best first. Returns (id, RRF score)
    pairs, best first. The result does not depend on the order of ``rankings``: each score is an exactly
    rounded sum (``math.fsum``), and equal scores (common with two rankings: ranks (1, 2) and (2, 1) tie
    exactly) go to the better best single rank, then to the smaller id (by ``repr`` if ids do not compare).
    """
    _check_rrf(rankings, k)
    ranks: dict = {}  # doc -> its rank in each ranking that holds it
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            ranks.setdefault(doc, []).append(rank)
    fused = [(doc, math.fsum(1.0 / (k + r) for r in rs)) for doc, rs in ranks.items()]
    try:  # ties: better best single rank, then smaller id; neither depends on the order of the rankings
        return sorted(fused, key=lambda item: (-item[1], min(ranks[item[0]]), item[0]))
    except TypeError:  # ids of kinds that do not compare (say int and str)
        return sorted(fused, key=lambda item: (-item[1], min(ranks[item[0]]), repr(item[0])))


def precision_at_k(ranked, relevant: set, k: int) -> float:
    """|relevant documents among the first k| / k (a ranking shorter than k still divides by k)."""
    _check_ranked(ranked, relevant, k)
    return sum(d in relevant for d in ranked[:k]) / k


def recall_at_k(ranked, relevant: set, k: int) -> float:
    """|relevant documents among the first k| / |relevant|."""
    _check_ranked(ranked, relevant, k)
    return sum(d in relevant for d in ranked[:k]) / len(relevant)


def reciprocal_rank(ranked, relevant: set) -> float:
    """1 / (rank of the first relevant document), or 0 if none is retrieved; its mean over queries is MRR."""
    _check_ranked(ranked, relevant)
    return next((1.0 / rank for rank, d in enumerate(ranked, start=1) if d in relevant), 0.0)


def manual_queries(split: str = "all") -> list[tuple[str, frozenset]]:
    """The chapter's labelled queries over the Python manual: (query, topics that answer it).

    Written for this book (``data/manual_queries.txt``): each line is a question a reader might type and the
    topics of :func:`lmbook.data.documents` that contain the answer. ``split="dev"`` gives the queries at even
    positions of the file (0, 2, 4, ...), ``"test"`` those at odd positions, ``"all"`` every query; the file
    groups related questions, so alternating lines spreads every theme over both halves.
    """
    validate.choice("split", split, QUERY_SPLITS)
    path = Path(__file__).parent / "data" / "manual_queries.txt"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, topics = line.split("\t")
            out.append((query, frozenset(topics.split(","))))
    return out if split == "all" else out[0 if split == "dev" else 1::2]


# ----- argument checks ---------------------------------------------------------------------------------

def _check_ranking(name: str, ranking) -> None:
    """A list of distinct, hashable document ids (never a str, whose items would be characters)."""
    validate.sequence(name, ranking, empty=True, what="document ids, best first")
    for doc in ranking:
        if not isinstance(doc, Hashable):
            raise TypeError(f"{name} must hold hashable document ids, got {validate.describe(doc)}")
    if len(set(ranking)) != len(ranking):
        raise ValueError(f"{name} lists a document more than once")


def _check_rrf(rankings, k) -> None:
    validate.sequence("rankings", rankings, what="rankings, each a list of document ids")
    for r, ranking in enumerate(rankings):
        _check_ranking(f"rankings[{r}]", ranking)
    validate.number("k", k, low=0)


def _check_ranked(ranked, relevant, k: int = 1) -> None:
    _check_ranking("ranked", ranked)
    if not isinstance(relevant, (set, frozenset)):
        raise TypeError(f"relevant must be a set of document ids, got {validate.describe(relevant)}")
    if not relevant:
        raise ValueError("relevant must be a non-empty set of document ids: with nothing relevant the measure "
                         "is undefined")
    validate.integer("k", k)
