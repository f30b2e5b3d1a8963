"""Chapter 2: ranking documents for a query with BM25, in its six common variants.

- :func:`bm25_idf` and :func:`bm25_tf`: the two factors of the formula, for arrays of terms or documents;
- :func:`bm25_scores`: the readable path, one document and one query token at a time;
- :class:`BM25`: the same scores from precomputed per-(document, term) weights in a sparse matrix (the fast
  path, tested against :func:`bm25_scores`), with the method names of rank_bm25 and bm25s.

Natural logs, as in rank_bm25 and bm25s. Tokens are compared exactly: tokenize queries and documents alike,
e.g. with :func:`lmbook.retrieval.tokenize`. An empty document is allowed and scores 0, except for the delta
term of bm25l and bm25+. A query whose terms are all unknown scores 0 everywhere, with a warning.

Left out on purpose: BM25F (fields), query-term weights, and the float32 and top-k tricks of bm25s.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain

import numpy as np
import scipy.sparse as sp

from . import validate
from .retrieval import (
    _check_corpus,
    _check_document_frequencies,
    _check_query,
    _check_search,
    _check_token_types,
    _count_matrix,
    _known_terms,
    _matching,
    _top_k,
)

__all__ = ["BM25_VARIANTS", "bm25_idf", "bm25_tf", "bm25_scores", "BM25"]

BM25_VARIANTS = ("okapi", "robertson", "lucene", "atire", "bm25l", "bm25+")


def bm25_idf(df, n_docs: int, variant: str = "okapi", epsilon: float = 0.25) -> np.ndarray:
    """The IDF part of BM25 for document frequencies ``df`` (V,), 1 <= df <= N, natural log (chapter 2).

    okapi     ln((N - df + 0.5) / (df + 0.5)); a negative value (df > N/2) is replaced by epsilon times the
              mean of these values over the vocabulary (rank_bm25's floor, which can itself be negative)
    robertson max(0, ln((N - df + 0.5) / (df + 0.5)))      lucene ln(1 + (N - df + 0.5) / (df + 0.5))
    atire     ln(N / df)      bm25l ln((N + 1) / (df + 0.5))      bm25+ ln((N + 1) / df)
    """
    _check_bm25_idf(df, n_docs, variant, epsilon)
    df = np.asarray(df, dtype=np.float64)  # (V,)
    N = n_docs
    if variant in ("okapi", "robertson"):
        rsj = np.log((N - df + 0.5) / (df + 0.5))  # Robertson-Sparck Jones weight: < 0 once df > N/2
        if variant == "robertson":
            return np.maximum(rsj, 0.0)
        return np.where(rsj < 0, epsilon * rsj.mean(), rsj)
    if variant == "lucene":
        return np.log(1 + (N - df + 0.5) / (df + 0.5))
    if variant == "atire":
        return np.log(N / df)
    if variant == "bm25l":
        return np.log((N + 1) / (df + 0.5))
    return np.log((N + 1) / df)  # bm25+


def bm25_tf(tf, doc_len, avgdl: float, k1: float = 1.5, b: float = 0.75, variant: str = "okapi",
            delta: float = 0.5):
    """The term-frequency part of BM25, with K = k1 (1 - b + b |d| / avgdl) (chapter 2):

    okapi, atire  tf (k1 + 1) / (tf + K)       robertson, lucene  tf / (tf + K)  (the same ranking)
    bm25l  (k1 + 1) (c + delta) / (k1 + c + delta) with c = tf / (1 - b + b |d| / avgdl)
    bm25+  tf (k1 + 1) / (tf + K) + delta
    ``tf`` and ``doc_len`` are numbers or arrays that broadcast. A term absent from the document (tf = 0)
    scores 0, except in bm25l and bm25+. Lv and Zhai sum delta only over query terms the document contains (a
    lower bound for a match); bm25s and rank_bm25, and so this code, give absent terms the tf = 0 value too,
    which turns bm25+'s delta into a constant added to every document: it changes no ranking.
    """
    _check_bm25_tf(tf, doc_len, avgdl, k1, b, variant, delta)
    tf = np.asarray(tf, dtype=np.float64)
    norm = 1 - b + b * np.asarray(doc_len, dtype=np.float64) / avgdl  # K / k1
    present = tf > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        if variant in ("okapi", "atire", "bm25+"):
            out = np.where(present, tf * (k1 + 1) / (tf + k1 * norm), 0.0)
            return out + delta if variant == "bm25+" else out
        if variant in ("robertson", "lucene"):
            return np.where(present, tf / (tf + k1 * norm), 0.0)
        c = np.where(present, tf / norm, 0.0)  # bm25l
        return np.where(k1 + c + delta > 0, (k1 + 1) * (c + delta) / (k1 + c + delta), 0.0)


def bm25_scores(corpus_tokens, query_tokens, k1: float = 1.5, b: float = 0.75, variant: str = "okapi",
                delta: float = 0.5, epsilon: float = 0.25) -> np.ndarray:
    """score(d, q) = sum over query tokens t of idf(t) * tf-part(f(t, d), |d|), one document at a time.

    The readable path (chapter 2): plain loops over documents and query tokens. A repeated query token counts
    every time; a token that occurs in no document adds nothing. Returns an array of N scores.
    """
    _check_bm25_scores(corpus_tokens, query_tokens, k1, b, variant, delta, epsilon)
    docs = [Counter(doc) for doc in corpus_tokens]
    N = len(docs)
    avgdl = sum(sum(c.values()) for c in docs) / N
    df = Counter(t for c in docs for t in c)
    vocab = sorted(df)
    idf = dict(zip(vocab, bm25_idf([df[t] for t in vocab], N, variant, epsilon), strict=True))
    scores = np.zeros(N)
    for d, counts in enumerate(docs):
        length = sum(counts.values())
        for t in query_tokens:
            if t in idf:
                scores[d] += idf[t] * float(bm25_tf(counts[t], length, avgdl, k1, b, variant, delta))
    return scores


class BM25:
    """BM25 search: ``BM25(k1=1.5, b=0.75, variant="okapi").index(docs)``, then ``.get_scores(q)`` or
    ``.search(q, k)`` (the method names of rank_bm25 and bm25s). Chapter 2.

    ``index`` precomputes w[d, t] = idf(t) * (tf-part(f[d, t], |d|) - tf-part(0, |d|)) for every (document,
    term) pair that occurs, stored term by term (CSC). A query then adds up a few columns, plus the
    tf = 0 part that bm25l and bm25+ give every document. The scores equal :func:`bm25_scores`.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, variant: str = "okapi", delta: float = 0.5,
                 epsilon: float = 0.25):
        _check_bm25_params(k1, b, variant, delta, epsilon)
        self.k1, self.b, self.variant, self.delta, self.epsilon = k1, b, variant, delta, epsilon

    def index(self, corpus_tokens) -> BM25:
        """Count the corpus and store the weights w[d, t] of its (document, term) pairs."""
        _check_corpus(corpus_tokens)
        self.vocab, self.vocab_index, F = _count_matrix(corpus_tokens)  # F: (N, V) counts
        N = F.shape[0]
        self.doc_len = np.asarray(F.sum(axis=1)).ravel()  # (N,) tokens per document
        self.avgdl = self.doc_len.mean()
        self.df = np.bincount(F.indices, minlength=len(self.vocab))  # (V,) documents containing each term
        self.idf = bm25_idf(self.df, N, self.variant, self.epsilon)
        params = (self.avgdl, self.k1, self.b, self.variant, self.delta)
        rows = np.repeat(np.arange(N), np.diff(F.indptr))  # the document of each stored (d, t) entry
        absent = bm25_tf(0.0, self.avgdl, *params)  # tf-part at tf = 0: same for every length
        weights = self.idf[F.indices] * (bm25_tf(F.data, self.doc_len[rows], *params) - absent)
        self.absent_score = self.idf * absent  # (V,) what a query term adds to every document
        self.postings = sp.csr_matrix((weights, F.indices, F.indptr), shape=F.shape).tocsc()  # (N, V)
        return self

    def unknown_terms(self, query_tokens) -> list:
        """The query tokens the index has never seen (they add nothing to any score)."""
        _check_search(self, "postings", query_tokens)
        return [t for t in query_tokens if t not in self.vocab_index]

    def get_scores(self, query_tokens) -> np.ndarray:
        """The BM25 score of every document, an array of N; warns when no query term is in the index."""
        _check_search(self, "postings", query_tokens)
        ids = [self.vocab_index[t] for t in _known_terms(self.vocab_index, query_tokens)]
        P = self.postings  # (N, V), stored column by column
        scores = np.zeros(P.shape[0])
        for t in ids:  # a repeated query token is added again
            start, end = P.indptr[t], P.indptr[t + 1]  # column t: the documents that contain term t
            np.add.at(scores, P.indices[start:end], P.data[start:end])  # scores[d] += w[d, t]
        if ids and self.variant in ("bm25l", "bm25+"):
            scores += self.absent_score[ids].sum()
        return scores

    def search(self, query_tokens, k: int = 10) -> list[tuple[int, float]]:
        """The top ``k`` (document index, score) pairs among documents containing a query term, best first;
        ties go to the lower index."""
        _check_search(self, "postings", query_tokens, k)
        scores = self.get_scores(query_tokens)
        return _top_k(scores, _matching(self.postings, self.vocab_index, query_tokens), k)

    def __repr__(self) -> str:
        indexed = hasattr(self, "postings")
        size = f", {self.postings.shape[0]} docs, {len(self.vocab)} terms" if indexed else ""
        return f"BM25(k1={self.k1}, b={self.b}, variant={self.variant!r}{size})"


# ----- argument checks ---------------------------------------------------------------------------------

def _check_bm25_params(k1, b, variant, delta, epsilon) -> None:
    validate.number("k1", k1, low=0)  # k1 sets how fast term frequency saturates
    validate.number("b", b)
    if not 0 <= b <= 1:
        raise ValueError(f"b must be in [0, 1] (0: no length normalisation, 1: full), got {b!r}")
    validate.choice("variant", variant, BM25_VARIANTS)
    validate.number("delta", delta, low=0)
    validate.number("epsilon", epsilon, low=0)


def _check_bm25_idf(df, n_docs, variant, epsilon) -> None:
    validate.integer("n_docs", n_docs)
    validate.choice("variant", variant, BM25_VARIANTS)
    validate.number("epsilon", epsilon, low=0)
    _check_document_frequencies(df, n_docs)


def _check_amounts(name: str, value) -> np.ndarray:
    """A number or an array of numbers, finite and >= 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number, list, tuple,
                                                                      np.ndarray)):
        raise TypeError(f"{name} must be a number or an array of numbers, got {validate.describe(value)}")
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold only numbers, got {validate.describe(value)}")
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"{name} must be finite and >= 0, got {validate.describe(value)}")
    return array


def _check_bm25_tf(tf, doc_len, avgdl, k1, b, variant, delta) -> None:
    shapes = _check_amounts("tf", tf).shape, _check_amounts("doc_len", doc_len).shape
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"tf and doc_len must broadcast together, got shapes {shapes[0]} and {shapes[1]}"
                         ) from None
    validate.number("avgdl", avgdl, low=0, low_open=True)
    _check_bm25_params(k1, b, variant, delta, 0.0)


def _check_bm25_scores(corpus_tokens, query_tokens, k1, b, variant, delta, epsilon) -> None:
    _check_bm25_params(k1, b, variant, delta, epsilon)
    _check_corpus(corpus_tokens)
    _check_token_types(corpus_tokens, chain.from_iterable(corpus_tokens))
    _check_query(query_tokens)
