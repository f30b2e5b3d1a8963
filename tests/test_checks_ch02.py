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
    idf = math.log((n_docs - df + 0.5) / (df + 0.5)) + 1  # the +1 outside the log: negative once df > N/2
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl))


def bm25_term_no_k1_plus_1(tf, doc_len, avgdl, df, n_docs, k1=1.5, b=0.75):
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * doc_len / avgdl))


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


def average_precision_over_min(ranked, relevant):
    hits, total = 0, 0.0
    for i, d in enumerate(ranked, start=1):
        if d in relevant:
            hits += 1
            total += hits / i
    return total / min(len(relevant), len(ranked)) if ranked else 0.0  # caps the divisor at the list length


def expand_query(query, association, vocab, m):
    """Brute force: every candidate partner of every query word, filtered in a second pass."""
    out = list(query)
    for word in query:
        if word in vocab:
            row = np.asarray(association, dtype=float)[vocab.index(word)]
            best = sorted(range(len(vocab)), key=lambda j: (-row[j], j))
            out += [vocab[j] for j in best if row[j] > 0 and vocab[j] not in out][:m]
    return out


def expand_query_ties_by_last(query, association, vocab, m):
    out = list(query)
    for word in query:
        if word in vocab:
            row = np.asarray(association, dtype=float)[vocab.index(word)]
            best = sorted(range(len(vocab)), key=lambda j: (-row[j], -j))  # ties to the later word
            out += [vocab[j] for j in best if row[j] > 0 and vocab[j] not in out][:m]
    return out


def expand_query_top_m_then_dedupe(query, association, vocab, m):
    out = list(query)
    for word in query:
        if word in vocab:
            row = np.asarray(association, dtype=float)[vocab.index(word)]
            best = sorted(range(len(vocab)), key=lambda j: (-row[j], j))[:m]  # takes m, then drops repeats
            out += [vocab[j] for j in best if row[j] > 0 and vocab[j] not in out]
    return out


def expand_query_keeps_zero_scores(query, association, vocab, m):
    out = list(query)
    for word in query:
        if word in vocab:
            row = np.asarray(association, dtype=float)[vocab.index(word)]
            best = sorted(range(len(vocab)), key=lambda j: (-row[j], j))
            out += [vocab[j] for j in best if row[j] >= 0 and vocab[j] not in out][:m]
    return out


def expand_query_dedupes_the_query(query, association, vocab, m):
    out = list(query)
    for word in dict.fromkeys(query):  # expands each distinct token once
        if word in vocab:
            row = np.asarray(association, dtype=float)[vocab.index(word)]
            best = sorted(range(len(vocab)), key=lambda j: (-row[j], j))
            out += [vocab[j] for j in best if row[j] > 0 and vocab[j] not in out][:m]
    return out


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("bm25_term", bm25_term, bm25_term_plus_one_outside, "ln(1 + (N - df + 0.5)"),
        ("bm25_term", bm25_term, bm25_term_no_k1_plus_1, "tf (k1 + 1)"),
        ("average_precision", average_precision, average_precision_over_hits, "never retrieved"),
        ("average_precision", average_precision, average_precision_over_min, "shorter than the relevant set"),
        ("expand_query", expand_query, expand_query_ties_by_last, "first in vocab"),
        ("expand_query", expand_query, expand_query_top_m_then_dedupe, "already in the output"),
        ("expand_query", expand_query, expand_query_keeps_zero_scores, "score > 0"),
        ("expand_query", expand_query, expand_query_dedupes_the_query, "expanded again"),
    ],
)
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def test_by_hand_answer_and_not_attempted(capsys):
    checks.check_pmi_by_hand(math.log2(100))
    assert RESULTS["pmi_by_hand"] is True
    checks.check_pmi_by_hand(6.644)  # four significant figures, as the exercise asks
    assert RESULTS["pmi_by_hand"] is True
    capsys.readouterr()
    checks.check_pmi_by_hand(6.64)  # three: too coarse, and the check says so
    assert RESULTS["pmi_by_hand"] is False and "give 4 significant figures" in capsys.readouterr().out
    checks.check_pmi_by_hand(math.log(100))  # natural log instead of bits
    assert RESULTS["pmi_by_hand"] is False and "log base 2" in capsys.readouterr().out
    checks.check_pmi_by_hand(math.log2(40 * 10_000 / (50 * 80)) + 0.322)  # the bound, not the value
    assert RESULTS["pmi_by_hand"] is False

    def stub(*args, **kwargs):
        raise NotImplementedError

    checks.check_expand_query(stub)
    assert RESULTS["expand_query"] is False and "not attempted" in capsys.readouterr().out
