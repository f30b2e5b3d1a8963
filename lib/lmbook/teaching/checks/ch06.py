"""Self-checks for chapter 6 (embeddings)."""

from __future__ import annotations

import numpy as np

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_sgns_by_hand", "check_fasttext_ngrams", "check_analogy_3cosmul", "check_idf_weighted_mean"]

SGNS_BY_HAND = {"positive": 2.0, "negatives": (-1.0, 0.5)}  # the scores u.v of one training example

answer_check("sgns_by_hand", hint="add one log-sigmoid per word: log s(u+.v) for the positive, log s(-u_k.v) for "
                                  "each negative (mind the minus sign); the objective is a sum of negative numbers.")


def check_sgns_by_hand(answer) -> None:
    """The negative-sampling objective log s(2) + log s(1) + log s(-0.5) for the scores in SGNS_BY_HAND."""
    check_answer("sgns_by_hand", answer)


function_check("fasttext_ngrams", lambda: [
    Case(("playing", 3, 3), hint="wrap the word in < and > first: the first trigram is '<pl'."),
    Case(("where", 3, 4)),
    Case(("iterator", 3, 6), hint="all lengths from n_min to n_max, the shorter ones first."),
    Case(("ab", 3, 5), hint="'<ab>' is the whole word, a separate feature: do not list it as an n-gram."),
    Case(("é", 2, 3)),
    Case(("banana", 3, 3), hint="keep repeated n-grams: 'ana' occurs twice in '<banana>', and fastText keeps both."),
])


def check_fasttext_ngrams(fn) -> None:
    """fasttext_ngrams(word, n_min, n_max): the n-grams of "<word>", shortest first, without "<word>"."""
    run_check("fasttext_ngrams", fn)


def _cosmul_cases():
    rng = np.random.default_rng(6)
    base = rng.normal(size=(12, 5))
    return [
        Case((np.eye(4) + 0.1, 0, 1, 2), hint="leave a, b and c themselves out of the candidates."),
        Case((np.random.default_rng(2).normal(size=(8, 3)), 0, 1, 2),
             hint="this is not 3CosAdd: multiply cos'(x, b) cos'(x, c) and divide by cos'(x, a) + 0.001."),
        Case((np.array([[1, 0, 0], [1, 0.05, 0], [0, 0, 1], [-1, 0, 0], [0.3, 0.3, 1]]), 0, 1, 2),
             hint="row 3 points away from a, so cos'(x, a) = 0: the denominator needs its + 0.001."),
        Case((base, 0, 1, 2)),
        Case((base * rng.uniform(0.1, 10, size=(12, 1)), 3, 7, 5),
             hint="compare directions: normalise the rows before taking dot products."),
        Case((np.vstack([base, base[4:5]]), 9, 10, 11), hint="on a tie, return the lowest index."),
        Case((-base, 2, 8, 0), hint="shift each cosine into [0, 1] with (cos + 1) / 2 before multiplying."),
    ]


function_check("analogy_3cosmul", _cosmul_cases,
               hint="score = cos'(x, b) cos'(x, c) / (cos'(x, a) + 0.001) with cos' = (cos + 1) / 2; argmax over "
                    "x not in {a, b, c}.")


def check_analogy_3cosmul(fn) -> None:
    """analogy_3cosmul(vectors, a, b, c): the row x outside {a, b, c} maximising 3CosMul (Levy & Goldberg 2014)."""
    run_check("analogy_3cosmul", fn)


def _idf_cases():
    vectors = np.arange(12, dtype=float).reshape(4, 3)
    index = {"the": 0, "list": 1, "iterator": 2, "raise": 3}
    idf = {"the": 0.1, "list": 2.0, "iterator": 3.0, "yield": 4.0}
    return [
        Case((["list", "iterator"], vectors, index, idf)),
        Case((["the", "list", "list"], vectors, index, idf), hint="each occurrence counts: weight it every time."),
        Case((["raise", "list"], vectors, index, idf), hint="a token without an idf weight is left out."),
        Case((["yield", "iterator"], vectors, index, idf), hint="a token without a vector is left out."),
        Case((["yield", "unknown"], vectors, index, idf), hint="no usable token: return zeros of width d."),
        Case(([], vectors, index, idf)),
        Case((["the", "list"], vectors, index, {"the": 0.0, "list": 0.0}),
             hint="weights that sum to 0 (every known token has idf 0): return zeros of width d, not 0 / 0."),
    ]


function_check("idf_weighted_mean", _idf_cases, rtol=1e-9, atol=1e-12,
               hint="sum_t idf(t) v_t / sum_t idf(t) over the occurrences of tokens in both index and idf.")


def check_idf_weighted_mean(fn) -> None:
    """idf_weighted_mean(tokens, vectors, index, idf): the IDF-weighted mean of the known tokens' vectors."""
    run_check("idf_weighted_mean", fn)
