"""Chapter 2's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import numpy as np
import pytest
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS


def bm25_term(tf, doc_len, avgdl, df, n_docs, k1=1.5, b=0.75):
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl))


def bm25_term_plus_one_outside(tf, doc_len, avgdl, df, n_docs, k1=1.5, b=0.75):
    idf = math.log((n_docs - df + 0.5) / (df + 0.5)) + 1  # the seed's form (E18)
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl))


def bm25_term_no_k1_plus_1(tf, doc_len, avgdl, df, n_docs, k1=1.5, b=0.75):
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * doc_len / avgdl))


def ppmi(counts):
    C = np.asarray(counts, dtype=float)
    p_xy = C / C.sum()
    outer = np.outer(C.sum(1), C.sum(0)) / C.sum() ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(C > 0, np.maximum(np.log2(p_xy / outer), 0), 0.0)


def ppmi_natural_log(counts):
    C = np.asarray(counts, dtype=float)
    outer = np.outer(C.sum(1), C.sum(0)) / C.sum() ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(C > 0, np.maximum(np.log(C / C.sum() / outer), 0), 0.0)


def ppmi_nan_for_unseen(counts):
    C = np.asarray(counts, dtype=float)
    outer = np.outer(C.sum(1), C.sum(0)) / C.sum() ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(np.log2(C / C.sum() / outer), 0)  # nan where a row or column is all zero


def rrf(rankings, k=60):
    out = {}
    for r in rankings:
        for i, d in enumerate(r, start=1):
            out[d] = out.get(d, 0.0) + 1 / (k + i)
    return out


def rrf_ranks_from_zero(rankings, k=60):
    out = {}
    for r in rankings:
        for i, d in enumerate(r):
            out[d] = out.get(d, 0.0) + 1 / (k + i)
    return out


def average_precision(ranked, relevant):
    hits, total = 0, 0.0
    for i, d in enumerate(ranked, start=1):
        if d in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant)


def average_precision_over_hits(ranked, relevant):
    hits, total = 0, 0.0
    for i, d in enumerate(ranked, start=1):
        if d in relevant:
            hits += 1
            total += hits / i
    return total / hits if hits else 0.0  # divides by the relevant documents *retrieved*


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("bm25_term", bm25_term, bm25_term_plus_one_outside, "ln(1 + (N - df + 0.5)"),
        ("bm25_term", bm25_term, bm25_term_no_k1_plus_1, "tf (k1 + 1)"),
        ("ppmi", ppmi, ppmi_natural_log, "log2"),
        ("ppmi", ppmi, ppmi_nan_for_unseen, "case"),
        ("rrf", rrf, rrf_ranks_from_zero, "rank 1"),
        ("average_precision", average_precision, average_precision_over_hits, "never retrieved"),
    ],
)
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def test_by_hand_answer_and_not_attempted(capsys):
    checks.check_tfidf_by_hand(0.03 * math.log(1e4))
    assert RESULTS["tfidf_by_hand"] is True
    checks.check_tfidf_by_hand(0.12)  # the seed's log10 answer (E16)
    assert RESULTS["tfidf_by_hand"] is False and "natural log" in capsys.readouterr().out

    def stub(*args, **kwargs):
        raise NotImplementedError

    checks.check_rrf(stub)
    assert RESULTS["rrf"] is False and "not attempted" in capsys.readouterr().out
