"""Chapter 3's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import numpy as np
import pytest
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS
from lmbook.graphs import pagerank


def pagerank_dense(adjacency, damping=0.85):
    A = np.asarray(adjacency, dtype=float)
    n = len(A)
    out = A.sum(1)
    x = np.full(n, 1 / n)
    for _ in range(10_000):
        spread = np.zeros(n)
        for i in range(n):  # loops, not matrices: written differently from the key
            if out[i] == 0:
                spread += x[i] / n
            else:
                spread += x[i] * A[i] / out[i]
        new = damping * spread + (1 - damping) / n
        if np.abs(new - x).sum() < 1e-13:
            return new
        x = new
    return x


def pagerank_dangling_leaks(adjacency, damping=0.85):
    A = np.asarray(adjacency, dtype=float)
    n = len(A)
    out = A.sum(1)
    P = A / np.where(out > 0, out, 1)[:, None]  # dangling rows stay 0: their mass is lost every step
    x = np.full(n, 1 / n)
    for _ in range(2000):
        x = damping * x @ P + (1 - damping) / n
    return x


def pagerank_unweighted(adjacency, damping=0.85):
    return pagerank_dense((np.asarray(adjacency) > 0).astype(float), damping)


def pagerank_fixed_damping(adjacency, damping=0.85):
    return pagerank_dense(adjacency, 0.85)


def rank_players(matches, damping=0.85):
    players = sorted({p for m in matches for p in m})
    A = np.zeros((len(players), len(players)))
    for winner, loser in matches:
        A[players.index(loser), players.index(winner)] += 1
    scores = pagerank(A, damping=damping, tol=1e-13).scores
    return dict(zip(players, scores.tolist(), strict=True))


def rank_players_winner_links_loser(matches, damping=0.85):
    return rank_players([(loser, winner) for winner, loser in matches], damping)


def rank_players_ignores_repeats(matches, damping=0.85):
    return rank_players(sorted(set(matches), key=str), damping)


def related_topics(adjacency, seeds, k=5):
    A = np.asarray(adjacency, dtype=float)
    v = np.isin(np.arange(len(A)), seeds).astype(float)
    scores = pagerank(A + A.T, personalization=v, tol=1e-13).scores
    return [int(i) for i in np.argsort(-scores, kind="stable") if int(i) not in seeds][:k]


def related_topics_directed(adjacency, seeds, k=5):
    A = np.asarray(adjacency, dtype=float)
    v = np.isin(np.arange(len(A)), seeds).astype(float)
    scores = pagerank(A, personalization=v, tol=1e-13).scores
    return [int(i) for i in np.argsort(-scores, kind="stable") if int(i) not in seeds][:k]


def related_topics_uniform_dangling(adjacency, seeds, k=5):  # isolated nodes jump anywhere, not to the seeds
    A = np.asarray(adjacency, dtype=float)
    v = np.isin(np.arange(len(A)), seeds).astype(float)
    scores = pagerank(A + A.T, personalization=v, dangling=np.ones(len(A)), tol=1e-13).scores
    return [int(i) for i in np.argsort(-scores, kind="stable") if int(i) not in seeds][:k]


def related_topics_keeps_seeds(adjacency, seeds, k=5):
    A = np.asarray(adjacency, dtype=float)
    v = np.isin(np.arange(len(A)), seeds).astype(float)
    return [int(i) for i in np.argsort(-pagerank(A + A.T, personalization=v).scores, kind="stable")][:k]


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("pagerank_dense", pagerank_dense, pagerank_dangling_leaks, "dangling"),
        ("pagerank_dense", pagerank_dense, pagerank_unweighted, "weighted"),
        ("pagerank_dense", pagerank_dense, pagerank_fixed_damping, "damping"),
        ("rank_players", rank_players, rank_players_winner_links_loser, "loser to the winner"),
        ("rank_players", rank_players, rank_players_ignores_repeats, "repeated wins"),
        ("related_topics", related_topics, related_topics_directed, "both ways"),
        ("related_topics", related_topics, related_topics_keeps_seeds, "never return a seed"),
        ("related_topics", related_topics, related_topics_uniform_dangling, "isolated"),
    ],
)
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def test_by_hand_answer(capsys):
    checks.check_pagerank_by_hand(0.3974)
    assert RESULTS["pagerank_by_hand"] is True
    checks.check_pagerank_by_hand(1 / 3)  # the uniform guess
    assert RESULTS["pagerank_by_hand"] is False and "0.05" in capsys.readouterr().out
    checks.check_pagerank_by_hand(0.3974 * 3)  # the unnormalised (1 - d) + d sum(...) form, which sums to N
    assert RESULTS["pagerank_by_hand"] is False
