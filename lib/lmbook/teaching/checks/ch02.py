"""Self-checks for chapter 2 (edit distance, PMI, TF-IDF, BM25, RRF, evaluation)."""

from __future__ import annotations

import numpy as np

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_tfidf_by_hand", "check_bm25_term", "check_ppmi", "check_rrf", "check_average_precision"]

answer_check("tfidf_by_hand",
             hint="TF = 3/100 and IDF = ln(N / df), with the natural log: log10 gives 4 and 0.12.")


def check_tfidf_by_hand(answer) -> None:
    """TF-IDF of "cat": 3 times in a 100-word document, in 1,000 of 10 million documents, natural log."""
    check_answer("tfidf_by_hand", answer)


function_check("bm25_term", lambda: [
    Case((3, 100, 100, 10, 1000)),
    Case((0, 80, 100, 10, 1000), hint="a term that is not in the document (tf = 0) contributes 0."),
    Case((2, 300, 100, 50, 1000), hint="the length term 1 - b + b * doc_len / avgdl multiplies k1."),
    Case((5, 40, 100, 900, 1000),
         hint="with df > N/2 the IDF must stay positive: the +1 goes inside the log."),
    Case((1, 100, 100, 1, 10), kwargs=dict(k1=1.2, b=0.0), hint="b = 0 turns length normalisation off."),
    Case((4, 250, 100, 3, 20), kwargs=dict(k1=2.0, b=1.0),
         hint="the numerator is tf * (k1 + 1); use the k1 and b you are given."),
], rtol=1e-9, hint="score = ln(1 + (N - df + 0.5) / (df + 0.5)) * tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))"
                   " with dl = doc_len and N = n_docs")


def check_bm25_term(fn) -> None:
    """bm25_term(tf, doc_len, avgdl, df, n_docs, k1, b): one query term's BM25 score in one document."""
    run_check("bm25_term", fn)


function_check("ppmi", lambda: [
    Case((np.array([[2.0, 1.0], [1.0, 4.0]]),)),
    Case((np.array([[0, 2, 0], [1, 0, 3], [0, 0, 1]]),),
         hint="a pair never seen has PMI = -inf; PPMI turns it into 0 (watch out for nan from 0/0)."),
    Case((np.array([[0, 1, 1, 0, 0, 2], [0, 0, 0, 1, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 2, 0],
                    [2, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]),),
         hint="p(x) is the row sum over the total, p(y) the column sum: a row of zeros is allowed."),
    Case((np.array([[5, 1], [1, 5]]),), hint="PMI is in bits here: use log2."),
    Case((np.array([[1, 3], [3, 9]]),), hint="independent counts give PMI = 0 everywhere."),
], hint="PPMI = max(0, log2(p(x,y) / (p(x) p(y)))) with p(x,y) = C / C.sum(), "
        "p(x) = row sums / C.sum(), p(y) = column sums / C.sum(), and 0 where C is 0.")


def check_ppmi(fn) -> None:
    """ppmi(counts): max(0, log2 p(x,y) / (p(x) p(y))) from a count matrix, marginals from its row and column
    sums, and 0 where the count is 0."""
    run_check("ppmi", fn)


function_check("rrf", lambda: [
    Case(([["a", "b", "c"], ["b", "a", "c"]],)),
    Case(([["a", "b"], ["c"]],), hint="a document missing from a ranking adds nothing for that ranking."),
    Case(([["x", "y", "z"]],), kwargs=dict(k=0), hint="ranks start at 1: with k = 0 the top scores 1/1."),
    Case(([[3, 1, 2], [2, 3], [1]],), kwargs=dict(k=10), hint="use the k you are given."),
], hint="RRF(d) = sum over rankings of 1 / (k + rank of d); the top document has rank 1.")


def check_rrf(fn) -> None:
    """rrf(rankings, k=60) -> {document: sum over rankings of 1 / (k + rank)}, ranks from 1."""
    run_check("rrf", fn)


function_check("average_precision", lambda: [
    Case((["a", "b", "c"], {"a"})),
    Case((["x", "a", "y", "b"], {"a", "b"}), hint="average P@k over the ranks k of relevant documents."),
    Case((["x", "a"], {"a", "b"}),
         hint="divide by the number of relevant documents, including those never retrieved."),
    Case((["x", "y"], {"a"}), hint="no relevant document retrieved gives 0."),
    Case(([4, 2, 7, 1, 9], {1, 4, 9})),
])


def check_average_precision(fn) -> None:
    """average_precision(ranked, relevant) = (1/|relevant|) sum over ranks k of a relevant document of P@k."""
    run_check("average_precision", fn)
