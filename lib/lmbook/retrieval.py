"""Chapter 2: ranking documents for a query with TF-IDF and BM25, fusing rankings, and measuring them.

- :func:`tokenize`: the chapter's tokenizer (Unicode NFKC, case-folded, runs of word characters);
- :func:`term_frequency`, :func:`inverse_document_frequency` and :func:`tf_idf`: every TF and IDF variant,
  giving a sparse document-term matrix; :class:`TfIdf` ranks documents by cosine similarity;
- :func:`bm25_idf`, :func:`bm25_tf` and :func:`bm25_scores`: the BM25 formula, one document at a time;
  :class:`BM25` computes the same scores with sparse-matrix arithmetic (the fast path, tested against it);
- :func:`reciprocal_rank_fusion`: RRF(d) = sum over rankings of 1 / (k + rank(d));
- :func:`precision_at_k`, :func:`recall_at_k`, :func:`reciprocal_rank` and :func:`manual_queries`,
  a labelled query set over the Python manual.

Logs are natural logs throughout, as in scikit-learn, rank_bm25 and bm25s.

Bad input: an empty corpus or an empty query raises ValueError; an empty *document* is allowed and scores 0
(TF-IDF, and BM25 except for the delta term of bm25l and bm25+). A query whose terms are all unknown scores 0
everywhere, with a warning that says so. Tokens are compared exactly, so case and Unicode normalisation are
the tokenizer's job: use :func:`tokenize` for queries and documents alike.

Left out on purpose: stemming, phrase and proximity queries, field weights, query expansion, dense
retrieval (chapter 6 has embeddings) and compressed posting lists.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections import Counter, defaultdict
from itertools import chain, count
from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = ["tokenize", "TF_VARIANTS", "IDF_VARIANTS", "term_frequency", "inverse_document_frequency",
           "tf_idf", "TfIdf", "BM25_VARIANTS", "bm25_idf", "bm25_tf", "bm25_scores", "BM25",
           "reciprocal_rank_fusion", "precision_at_k", "recall_at_k", "reciprocal_rank", "manual_queries"]

TF_VARIANTS = ("raw", "relative", "log", "sublinear", "boolean", "augmented")
IDF_VARIANTS = ("plain", "smooth", "plain+1", "smooth+1", "probabilistic")
BM25_VARIANTS = ("okapi", "robertson", "lucene", "atire", "bm25l", "bm25+")


def tokenize(text: str) -> list[str]:
    """NFKC-normalise, case-fold, keep runs of word characters: ``"Café's __init__"`` -> café, s, __init__.

    NFKC makes the composed "é" and "e" + combining accent the same token; casefold also maps "ß" to "ss".
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())


# ----- the document-term matrix ------------------------------------------------------------------------

def _check_corpus(corpus_tokens) -> list:
    if isinstance(corpus_tokens, str) or not hasattr(corpus_tokens, "__iter__"):
        raise TypeError("corpus_tokens must be a list of documents, each a list of tokens")
    corpus_tokens = list(corpus_tokens)
    if not corpus_tokens:
        raise ValueError("corpus_tokens is empty: there is nothing to index")
    for doc in corpus_tokens:
        if not isinstance(doc, (list, tuple)):
            raise TypeError(f"each document must be a list of tokens, got {type(doc).__name__}; "
                            "tokenize it first, e.g. with lmbook.retrieval.tokenize")
    if not any(corpus_tokens):
        raise ValueError("every document in corpus_tokens is empty: there is nothing to index")
    return corpus_tokens


def _check_query(query_tokens) -> list:
    if isinstance(query_tokens, str) or not isinstance(query_tokens, (list, tuple)):
        raise TypeError(f"query_tokens must be a list of tokens, got {type(query_tokens).__name__}; "
                        "tokenize the query first, e.g. with lmbook.retrieval.tokenize")
    if len(query_tokens) == 0:
        raise ValueError("query_tokens is empty: an empty query matches nothing (did the tokenizer drop it?)")
    return list(query_tokens)


def _count_matrix(corpus_tokens) -> tuple[list, dict, sp.csr_matrix]:
    """Sorted vocabulary, its index, and the counts f[d, t] as a CSR matrix of shape (N docs, V terms)."""
    flat = list(chain.from_iterable(corpus_tokens))
    first_seen = defaultdict(count().__next__)  # token -> id in order of first appearance, in one pass
    ids = np.fromiter(map(first_seen.__getitem__, flat), dtype=np.int64, count=len(flat))
    try:
        vocab = sorted(first_seen)
    except TypeError as err:
        raise TypeError("every token must be a str (found tokens of different types)") from err
    index = {t: i for i, t in enumerate(vocab)}
    ids = np.fromiter((index[t] for t in first_seen), dtype=np.int64, count=len(vocab))[ids]  # sorted ids
    lengths = np.fromiter(map(len, corpus_tokens), dtype=np.int64, count=len(corpus_tokens))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    # one entry per token occurrence; sum_duplicates turns them into counts per (document, term)
    F = sp.csr_matrix((np.ones(len(ids)), ids, indptr), shape=(len(corpus_tokens), len(vocab)))
    F.sum_duplicates()
    return vocab, index, F


def term_frequency(counts: sp.csr_matrix, variant: str = "raw") -> sp.csr_matrix:
    """tf(t, d) from the counts f = f[d, t], applied to the terms present in each document (others stay 0).

    raw f; relative f / sum_t' f[d, t']; log ln(1 + f); sublinear 1 + ln f (scikit-learn's sublinear_tf);
    boolean 1; augmented 0.5 + 0.5 f / max_t' f[d, t'].
    """
    if variant not in TF_VARIANTS:
        raise ValueError(f"tf must be one of {TF_VARIANTS}, got {variant!r}")
    F = sp.csr_matrix(counts, dtype=np.float64, copy=True)
    rows = np.repeat(np.arange(F.shape[0]), np.diff(F.indptr))  # the document of each stored entry
    f = F.data
    if variant == "relative":
        F.data = f / np.asarray(F.sum(axis=1)).ravel()[rows]
    elif variant == "log":
        F.data = np.log1p(f)
    elif variant == "sublinear":
        F.data = 1.0 + np.log(f)
    elif variant == "boolean":
        F.data = np.ones_like(f)
    elif variant == "augmented":
        F.data = 0.5 + 0.5 * f / F.max(axis=1).toarray().ravel()[rows]
    return F


def inverse_document_frequency(df, n_docs: int, variant: str = "smooth") -> np.ndarray:
    """idf(t) from the document frequency df(t) and the number of documents N (natural log).

    plain      ln(N / df)                    smooth    ln((1 + N) / (1 + df))
    plain+1    ln(N / df) + 1                (scikit-learn with smooth_idf=False)
    smooth+1   ln((1 + N) / (1 + df)) + 1    (scikit-learn's default)
    probabilistic  ln(1 + (N - df + 0.5) / (df + 0.5)): the +1 inside the log keeps it positive, unlike
               ln((N - df + 0.5) / (df + 0.5)), which is negative once df > N / 2.
    """
    if variant not in IDF_VARIANTS:
        raise ValueError(f"idf must be one of {IDF_VARIANTS}, got {variant!r}")
    df = np.asarray(df, dtype=np.float64)
    if variant == "plain":
        return np.log(n_docs / df)
    if variant == "smooth":
        return np.log((1 + n_docs) / (1 + df))
    if variant == "plain+1":
        return np.log(n_docs / df) + 1
    if variant == "smooth+1":
        return np.log((1 + n_docs) / (1 + df)) + 1
    return np.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def tf_idf(corpus_tokens, tf: str = "raw", idf: str = "smooth", norm: str | None = None):
    """The TF-IDF matrix W[d, t] = tf(t, d) * idf(t): returns (vocabulary, W), W a CSR matrix (N, V).

    Columns follow the sorted vocabulary. ``norm="l2"`` scales every row to unit length (cosine-ready).
    An empty document gives an all-zero row.
    """
    if norm not in (None, "l2"):
        raise ValueError(f"norm must be None or 'l2', got {norm!r}")
    vocab, _, F = _count_matrix(_check_corpus(corpus_tokens))
    df = np.bincount(F.indices, minlength=len(vocab))  # documents containing each term
    W = term_frequency(F, tf) @ sp.diags(inverse_document_frequency(df, F.shape[0], idf))
    W = sp.csr_matrix(W)
    return vocab, _l2_normalise(W) if norm == "l2" else W


def _l2_normalise(W: sp.csr_matrix) -> sp.csr_matrix:
    lengths = np.sqrt(np.asarray(W.multiply(W).sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(1.0 / np.where(lengths > 0, lengths, 1.0)) @ W)


class TfIdf:
    """Cosine-similarity search over TF-IDF vectors: ``TfIdf().index(docs).search(query, k)``."""

    def __init__(self, tf: str = "raw", idf: str = "smooth"):
        if tf not in TF_VARIANTS:
            raise ValueError(f"tf must be one of {TF_VARIANTS}, got {tf!r}")
        if idf not in IDF_VARIANTS:
            raise ValueError(f"idf must be one of {IDF_VARIANTS}, got {idf!r}")
        self.tf, self.idf = tf, idf

    def index(self, corpus_tokens) -> TfIdf:
        self.vocab, self.vocab_index, F = _count_matrix(_check_corpus(corpus_tokens))
        self.idf_ = inverse_document_frequency(np.bincount(F.indices, minlength=len(self.vocab)), F.shape[0],
                                               self.idf)
        self.matrix = _l2_normalise(sp.csr_matrix(term_frequency(F, self.tf) @ sp.diags(self.idf_)))
        self._counts_by_term = F.tocsc()  # (N, V), to find the documents that contain a query term
        return self

    def get_scores(self, query_tokens) -> np.ndarray:
        """cos(q, d) for every document d, the query weighted with the same tf and idf as the documents."""
        known = _known_terms(self.vocab_index, _check_query(query_tokens))
        if not known:
            return np.zeros(self.matrix.shape[0])
        counts = Counter(self.vocab_index[t] for t in known)
        q = sp.csr_matrix((list(counts.values()), ([0] * len(counts), list(counts))),
                          shape=(1, len(self.vocab)))  # (1, V) query counts
        q = _l2_normalise(sp.csr_matrix(term_frequency(q, self.tf) @ sp.diags(self.idf_)))
        return (self.matrix @ q.T).toarray().ravel()

    def search(self, query_tokens, k: int = 10) -> list[tuple[int, float]]:
        """The top ``k`` (document index, score) pairs among documents sharing a term with the query."""
        return _top_k(self.get_scores(query_tokens), self._matching(query_tokens), k)

    def _matching(self, query_tokens) -> np.ndarray:
        return _matching(self._counts_by_term, self.vocab_index, query_tokens)


def _known_terms(index: dict, query_tokens: list) -> list:
    known = [t for t in query_tokens if t in index]
    if not known:
        warnings.warn(f"none of the query terms {query_tokens[:5]} is in the index: every score is 0",
                      UserWarning, stacklevel=3)
    return known


def _matching(by_term: sp.csc_matrix, index: dict, query_tokens) -> np.ndarray:
    """The documents (rows of a CSC matrix) that contain at least one query term."""
    cols = sorted({index[t] for t in query_tokens if t in index})
    if not cols:
        return np.array([], dtype=np.int64)
    return np.unique(np.concatenate([by_term.indices[by_term.indptr[t]:by_term.indptr[t + 1]] for t in cols]))


def _top_k(scores: np.ndarray, candidates: np.ndarray, k: int) -> list[tuple[int, float]]:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    if len(candidates) > k:  # keep the k best, then sort them; ties go to the lower document index
        part = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        cutoff = scores[part].min()
        candidates = candidates[scores[candidates] >= cutoff]
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]


# ----- BM25 --------------------------------------------------------------------------------------------

def bm25_idf(df, n_docs: int, variant: str = "okapi", epsilon: float = 0.25) -> np.ndarray:
    """The IDF part of BM25 for document frequencies ``df`` (one per vocabulary term), natural log.

    okapi     ln((N - df + 0.5) / (df + 0.5)); a negative value (df > N/2) is replaced by epsilon times the
              mean of these values over the vocabulary (rank_bm25's floor, which can itself be negative)
    robertson max(0, ln((N - df + 0.5) / (df + 0.5)))      lucene ln(1 + (N - df + 0.5) / (df + 0.5))
    atire     ln(N / df)      bm25l ln((N + 1) / (df + 0.5))      bm25+ ln((N + 1) / df)
    """
    df = np.asarray(df, dtype=np.float64)
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
    if variant == "bm25+":
        return np.log((N + 1) / df)
    raise ValueError(f"variant must be one of {BM25_VARIANTS}, got {variant!r}")


def bm25_tf(tf, doc_len, avgdl: float, k1: float = 1.5, b: float = 0.75, variant: str = "okapi",
            delta: float = 0.5):
    """The term-frequency part of BM25, with K = k1 (1 - b + b |d| / avgdl):

    okapi, atire  tf (k1 + 1) / (tf + K)       robertson, lucene  tf / (tf + K)  (the same ranking)
    bm25l  (k1 + 1) (c + delta) / (k1 + c + delta) with c = tf / (1 - b + b |d| / avgdl)
    bm25+  tf (k1 + 1) / (tf + K) + delta
    A term absent from the document (tf = 0) scores 0, except in bm25l and bm25+, which give it a delta term.
    """
    tf = np.asarray(tf, dtype=np.float64)
    norm = 1 - b + b * np.asarray(doc_len, dtype=np.float64) / avgdl
    present = tf > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        if variant in ("okapi", "atire", "bm25+"):
            out = np.where(present, tf * (k1 + 1) / (tf + k1 * norm), 0.0)
            return out + delta if variant == "bm25+" else out
        if variant in ("robertson", "lucene"):
            return np.where(present, tf / (tf + k1 * norm), 0.0)
        if variant == "bm25l":
            c = np.where(present, tf / norm, 0.0)
            return np.where(k1 + c + delta > 0, (k1 + 1) * (c + delta) / (k1 + c + delta), 0.0)
    raise ValueError(f"variant must be one of {BM25_VARIANTS}, got {variant!r}")


def _check_bm25_params(k1, b, variant, delta, epsilon) -> None:
    for name, value in (("k1", k1), ("b", b), ("delta", delta), ("epsilon", epsilon)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
    if k1 < 0:
        raise ValueError(f"k1 must be >= 0 (it sets how fast term frequency saturates), got {k1!r}")
    if not 0 <= b <= 1:
        raise ValueError(f"b must be in [0, 1] (0: no length normalisation, 1: full), got {b!r}")
    if delta < 0:
        raise ValueError(f"delta must be >= 0, got {delta!r}")
    if variant not in BM25_VARIANTS:
        raise ValueError(f"variant must be one of {BM25_VARIANTS}, got {variant!r}")


def bm25_scores(corpus_tokens, query_tokens, k1: float = 1.5, b: float = 0.75, variant: str = "okapi",
                delta: float = 0.5, epsilon: float = 0.25) -> np.ndarray:
    """score(d, q) = sum over query tokens t of idf(t) * tf-part(f(t, d), |d|), one document at a time.

    The readable path: plain loops over documents and query tokens. A repeated query token counts every
    time; a token that occurs in no document adds nothing. Returns an array of N scores.
    """
    _check_bm25_params(k1, b, variant, delta, epsilon)
    docs = [Counter(doc) for doc in _check_corpus(corpus_tokens)]
    query_tokens = _check_query(query_tokens)
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
    ``.search(q, k)`` (the method names of rank_bm25 and bm25s).

    ``index`` precomputes w[d, t] = idf(t) * (tf-part(f[d, t], |d|) - tf-part(0, |d|)) for every (document,
    term) pair that occurs, stored term by term (CSC). A query then adds up a few columns, plus the
    tf = 0 part that bm25l and bm25+ give every document. The scores equal :func:`bm25_scores`.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, variant: str = "okapi", delta: float = 0.5,
                 epsilon: float = 0.25):
        _check_bm25_params(k1, b, variant, delta, epsilon)
        self.k1, self.b, self.variant, self.delta, self.epsilon = k1, b, variant, delta, epsilon

    def index(self, corpus_tokens) -> BM25:
        self.vocab, self.vocab_index, F = _count_matrix(_check_corpus(corpus_tokens))
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
        return [t for t in _check_query(query_tokens) if t not in self.vocab_index]

    def get_scores(self, query_tokens) -> np.ndarray:
        """The BM25 score of every document, an array of N; warns when no query term is in the index."""
        if not hasattr(self, "postings"):
            raise ValueError("the index is empty: call .index(corpus_tokens) first")
        ids = [self.vocab_index[t] for t in _known_terms(self.vocab_index, _check_query(query_tokens))]
        P = self.postings
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
        scores = self.get_scores(query_tokens)
        return _top_k(scores, _matching(self.postings, self.vocab_index, query_tokens), k)

    def __repr__(self) -> str:
        indexed = hasattr(self, "postings")
        size = f", {self.postings.shape[0]} docs, {len(self.vocab)} terms" if indexed else ""
        return f"BM25(k1={self.k1}, b={self.b}, variant={self.variant!r}{size})"


# ----- fusion and evaluation ---------------------------------------------------------------------------

def reciprocal_rank_fusion(rankings, k: float = 60) -> list[tuple[object, float]]:
    """RRF(d) = sum over rankings r of 1 / (k + r(d)), with ranks from 1; a ranking without d adds 0.

    ``rankings`` is a list of rankings, each a list of document ids, best first. Returns (id, RRF score)
    pairs, best first; equal scores keep the order in which the ids were first seen.
    """
    if isinstance(rankings, (str, bytes)) or not hasattr(rankings, "__iter__"):
        raise TypeError("rankings must be a list of rankings, each a list of document ids")
    rankings = [list(r) for r in rankings]
    if not rankings:
        raise ValueError("rankings is empty: there is nothing to fuse")
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not (k >= 0 and np.isfinite(k)):
        raise ValueError(f"k must be a finite number >= 0, got {k!r}")
    scores: dict = {}
    for r, ranking in enumerate(rankings):
        if len(set(ranking)) != len(ranking):
            raise ValueError(f"ranking {r} lists a document more than once")
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])  # sorted() is stable: ties keep first-seen order


def _check_ranked(ranked, relevant, k=None) -> None:
    if not isinstance(relevant, (set, frozenset)) or not relevant:
        raise ValueError(f"relevant must be a non-empty set of document ids, got {relevant!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be an int >= 1, got {k!r}")


def precision_at_k(ranked, relevant: set, k: int) -> float:
    """|relevant documents among the first k| / k (a ranking shorter than k still divides by k)."""
    _check_ranked(ranked, relevant, k)
    return sum(d in relevant for d in list(ranked)[:k]) / k


def recall_at_k(ranked, relevant: set, k: int) -> float:
    """|relevant documents among the first k| / |relevant|."""
    _check_ranked(ranked, relevant, k)
    return sum(d in relevant for d in list(ranked)[:k]) / len(relevant)


def reciprocal_rank(ranked, relevant: set) -> float:
    """1 / (rank of the first relevant document), or 0 if none is retrieved; its mean over queries is MRR."""
    _check_ranked(ranked, relevant)
    return next((1.0 / rank for rank, d in enumerate(ranked, start=1) if d in relevant), 0.0)


def manual_queries() -> list[tuple[str, frozenset]]:
    """The chapter's labelled queries over the Python manual: (query, topics that answer it).

    Written for this book (``data/manual_queries.txt``): each line is a question a reader might type and the
    topics of :func:`lmbook.data.documents` that contain the answer.
    """
    path = Path(__file__).parent / "data" / "manual_queries.txt"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, topics = line.split("\t")
            out.append((query, frozenset(topics.split(","))))
    return out
