"""Self-checks for chapter 2 (edit distance, PMI, TF-IDF, BM25, RRF, evaluation)."""

from __future__ import annotations

import numpy as np

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_pmi_by_hand", "check_bm25_term", "check_average_precision", "check_expand_query"]

answer_check("pmi_by_hand",
             hint="PMI = log2(p(x, y) / (p(x) p(y))) "
                  "with p(x, y) = 40 / 10,000, p(x) = 50 / 10,000 and p(y) = 80 / 10,000; in bits, so log base 2.")


def check_pmi_by_hand(answer) -> None:
    """PMI(x -> y) in bits: 40 of 10,000 pairs are (x, y), 50 start with x, 80 end with y."""
    check_answer("pmi_by_hand", answer)


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


function_check("average_precision", lambda: [
    Case((["a", "b", "c"], {"a"})),
    Case((["x", "a", "y", "b"], {"a", "b"}), hint="average P@k over the ranks k of relevant documents."),
    Case((["x", "a"], {"a", "b"}),
         hint="divide by the number of relevant documents, including those never retrieved."),
    Case((["x", "y"], {"a"}), hint="no relevant document retrieved gives 0."),
    Case((["a"], {"a", "b"}), hint="a list shorter than the relevant set still divides by |relevant|: here 1/2."),
    Case(([4, 2, 7, 1, 9], {1, 4, 9})),
])


def check_average_precision(fn) -> None:
    """average_precision(ranked, relevant) = (1/|relevant|) sum over ranks k of a relevant document of P@k."""
    run_check("average_precision", fn)


_WORDS = ["arg", "call", "def", "kw", "self"]
_SCORES = np.array([[0.0, 2.0, 0.5, 3.0, 0.0],
                    [2.0, 0.0, 1.0, 0.0, 1.0],
                    [0.5, 1.0, 0.0, 1.0, 4.0],
                    [3.0, 0.0, 1.0, 0.0, 0.0],
                    [0.0, 1.0, 4.0, 0.0, 0.0]])

function_check("expand_query", lambda: [
    Case((["arg"], _SCORES, _WORDS, 2)),
    Case((["zip", "call"], _SCORES, _WORDS, 1), hint="a query token that is not in vocab adds nothing."),
    Case((["def"], _SCORES, _WORDS, 3),
         hint="equal scores go to the word that comes first in vocab (here call before kw)."),
    Case((["kw"], _SCORES, _WORDS, 4), hint="only partners with a score > 0 are added, even if m asks for more."),
    Case((["arg", "kw"], _SCORES, _WORDS, 1),
         hint="skip partners already in the output (the query or words added for earlier tokens) and take the "
              "next best, so each token adds up to m new words."),
    Case((["self", "def"], _SCORES, _WORDS, 0), hint="m = 0 returns the query unchanged."),
    Case((["kw", "kw"], _SCORES, _WORDS, 1),
         hint="a repeated query token is expanded again: each occurrence adds up to m new words."),
], hint="output = query + for each query token in vocab, its m best partners with score > 0 not yet in the output")


def check_expand_query(fn) -> None:
    """expand_query(query, association, vocab, m): the query plus each token's m best new partners."""
    run_check("expand_query", fn)
