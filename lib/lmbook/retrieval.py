"""Chapter 2: ranking documents for a query with TF-IDF, on a sparse document-term matrix.

- :func:`tokenize`: the chapter's tokenizer (Unicode NFKC, case-folded, runs of word characters);
- :func:`term_frequency`, :func:`inverse_document_frequency` and :func:`tf_idf`: every TF and IDF variant,
  giving a sparse document-term matrix; :class:`TfIdf` ranks documents by cosine similarity;
- the document-term counts and the top-k selection that :mod:`lmbook.bm25` shares.

BM25 is in :mod:`lmbook.bm25`; fusing rankings and measuring them (precision@k, MRR) in :mod:`lmbook.ranking`.
Logs are natural logs throughout, as in scikit-learn, rank_bm25 and bm25s.

Bad input: an empty corpus or an empty query raises ValueError; an empty *document* is allowed and scores 0.
A query whose terms are all unknown scores 0 everywhere, with a warning that says so. Tokens are compared
exactly, so case and Unicode normalisation are the tokenizer's job: use :func:`tokenize` for queries and
documents alike.

Left out on purpose: stemming, phrase and proximity queries, field weights, query expansion, dense
retrieval (chapter 6 has embeddings) and compressed posting lists.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections import Counter, defaultdict
from itertools import chain, count

import numpy as np
import scipy.sparse as sp

from . import validate

__all__ = ["tokenize", "TF_VARIANTS", "IDF_VARIANTS", "term_frequency", "inverse_document_frequency",
           "tf_idf", "TfIdf"]

TF_VARIANTS = ("raw", "relative", "log", "sublinear", "boolean", "augmented")
IDF_VARIANTS = ("plain", "smooth", "plain+1", "smooth+1", "lucene")


def tokenize(text: str) -> list[str]:
    """NFKC-normalise, case-fold, keep runs of word characters: ``"Café's __init__"`` -> café, s, __init__.

    NFKC makes the composed "é" and "e" + combining accent the same token; casefold also maps "ß" to "ss".
    """
    validate.string("text", text, empty=True)
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())


def term_frequency(counts: sp.csr_matrix, variant: str = "raw") -> sp.csr_matrix:
    """tf(t, d) from the counts f = f[d, t], a sparse (N, V) matrix, for the terms present in each document.

    raw f; relative f / sum_t' f[d, t']; log ln(1 + f); sublinear 1 + ln f (scikit-learn's sublinear_tf);
    boolean 1; augmented 0.5 + 0.5 f / max_t' f[d, t']. Terms absent from a document stay 0 (chapter 2).
    """
    _check_term_frequency(counts, variant)
    F = sp.csr_matrix(counts, dtype=np.float64, copy=True)  # (N, V)
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
    """idf(t) from the document frequencies df(t), 1 <= df <= N, and the number of documents N (natural log).

    plain      ln(N / df)                    smooth    ln((1 + N) / (1 + df))
    plain+1    ln(N / df) + 1                (scikit-learn with smooth_idf=False)
    smooth+1   ln((1 + N) / (1 + df)) + 1    (scikit-learn's default)
    lucene     ln(1 + (N - df + 0.5) / (df + 0.5)), Lucene's BM25 IDF: the +1 inside the log keeps it
               positive, unlike the probabilistic (RSJ) IDF ln((N - df + 0.5) / (df + 0.5)), which is
               negative once df > N / 2.  Chapter 2.
    """
    _check_idf(df, n_docs, variant)
    df = np.asarray(df, dtype=np.float64)  # (V,)
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

    ``corpus_tokens``: N documents, each a list of tokens. Columns follow the sorted vocabulary.
    ``norm="l2"`` scales every row to unit length (cosine-ready). An empty document gives a zero row. Chapter 2.
    """
    _check_tf_idf(corpus_tokens, tf, idf, norm)
    vocab, _, F = _count_matrix(corpus_tokens)  # F: (N, V) counts
    df = np.bincount(F.indices, minlength=len(vocab))  # (V,) documents containing each term
    W = term_frequency(F, tf) @ sp.diags(inverse_document_frequency(df, F.shape[0], idf))
    W = sp.csr_matrix(W)
    return vocab, _l2_normalise(W) if norm == "l2" else W


class TfIdf:
    """Cosine-similarity search over TF-IDF vectors: ``TfIdf().index(docs).search(query, k)`` (chapter 2)."""

    def __init__(self, tf: str = "raw", idf: str = "smooth"):
        _check_weighting(tf, idf)
        self.tf, self.idf = tf, idf

    def index(self, corpus_tokens) -> TfIdf:
        """Weight every document d as w_d = tf(., d) * idf, scaled to unit length."""
        _check_corpus(corpus_tokens)
        self.vocab, self.vocab_index, F = _count_matrix(corpus_tokens)
        self.idf_ = inverse_document_frequency(np.bincount(F.indices, minlength=len(self.vocab)), F.shape[0],
                                               self.idf)
        self.matrix = _l2_normalise(sp.csr_matrix(term_frequency(F, self.tf) @ sp.diags(self.idf_)))
        self._counts_by_term = F.tocsc()  # (N, V), to find the documents that contain a query term
        return self

    def get_scores(self, query_tokens) -> np.ndarray:
        """cos(q, d) for every document d, the query weighted with the same tf and idf as the documents."""
        _check_search(self, "matrix", query_tokens)
        known = _known_terms(self.vocab_index, query_tokens)
        if not known:
            return np.zeros(self.matrix.shape[0])
        counts = Counter(self.vocab_index[t] for t in known)
        q = sp.csr_matrix((list(counts.values()), ([0] * len(counts), list(counts))),
                          shape=(1, len(self.vocab)))  # (1, V) query counts
        q = _l2_normalise(sp.csr_matrix(term_frequency(q, self.tf) @ sp.diags(self.idf_)))
        return (self.matrix @ q.T).toarray().ravel()

    def search(self, query_tokens, k: int = 10) -> list[tuple[int, float]]:
        """The top ``k`` (document index, score) pairs among documents sharing a term with the query."""
        _check_search(self, "matrix", query_tokens, k)
        scores = self.get_scores(query_tokens)
        return _top_k(scores, _matching(self._counts_by_term, self.vocab_index, query_tokens), k)


# ----- shared by TF-IDF and BM25 ------------------------------------------------------------------------

def _count_matrix(corpus_tokens) -> tuple[list, dict, sp.csr_matrix]:
    """Sorted vocabulary, its index, and the counts f[d, t] as a CSR matrix of shape (N docs, V terms)."""
    flat = list(chain.from_iterable(corpus_tokens))
    first_seen = defaultdict(count().__next__)  # token -> id in order of first appearance, in one pass
    try:
        ids = np.fromiter(map(first_seen.__getitem__, flat), dtype=np.int64, count=len(flat))
    except TypeError:  # an unhashable token
        _check_token_types(corpus_tokens, flat)
        raise
    _check_token_types(corpus_tokens, first_seen)  # once per distinct token, not per occurrence
    vocab = sorted(first_seen)
    index = {t: i for i, t in enumerate(vocab)}
    ids = np.fromiter((index[t] for t in first_seen), dtype=np.int64, count=len(vocab))[ids]  # sorted ids
    lengths = np.fromiter(map(len, corpus_tokens), dtype=np.int64, count=len(corpus_tokens))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    # one entry per token occurrence; sum_duplicates turns them into counts per (document, term)
    F = sp.csr_matrix((np.ones(len(ids)), ids, indptr), shape=(len(corpus_tokens), len(vocab)))
    F.sum_duplicates()
    return vocab, index, F


def _l2_normalise(W: sp.csr_matrix) -> sp.csr_matrix:
    lengths = np.sqrt(np.asarray(W.multiply(W).sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(1.0 / np.where(lengths > 0, lengths, 1.0)) @ W)


def _known_terms(index: dict, query_tokens: list) -> list:
    known = [t for t in query_tokens if t in index]
    if not known:
        warnings.warn(f"none of the query terms {list(query_tokens[:5])} is in the index: every score is 0",
                      UserWarning, stacklevel=3)
    return known


def _matching(by_term: sp.csc_matrix, index: dict, query_tokens) -> np.ndarray:
    """The documents (rows of a CSC matrix) that contain at least one query term."""
    cols = sorted({index[t] for t in query_tokens if t in index})
    if not cols:
        return np.array([], dtype=np.int64)
    return np.unique(np.concatenate([by_term.indices[by_term.indptr[t]:by_term.indptr[t + 1]] for t in cols]))


def _top_k(scores: np.ndarray, candidates: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best candidates, best first; ties go to the lower document index."""
    if len(candidates) > k:  # keep the k best, then sort them
        part = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        cutoff = scores[part].min()
        candidates = candidates[scores[candidates] >= cutoff]
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]


# ----- argument checks ---------------------------------------------------------------------------------

def _check_corpus(corpus_tokens) -> None:
    validate.sequence("corpus_tokens", corpus_tokens, what="documents, each a list of tokens")
    for d, doc in enumerate(corpus_tokens):
        if not isinstance(doc, (list, tuple)):
            raise TypeError(f"corpus_tokens[{d}] must be a list of tokens, got {validate.describe(doc)}; "
                            "tokenize each document first, e.g. with lmbook.retrieval.tokenize")
    if not any(corpus_tokens):
        raise ValueError("every document in corpus_tokens is empty: there is nothing to index")


def _check_token_types(corpus_tokens, vocabulary) -> None:
    if all(isinstance(t, str) for t in vocabulary):
        return
    d, bad = next((d, t) for d, doc in enumerate(corpus_tokens) for t in doc if not isinstance(t, str))
    raise TypeError(f"corpus_tokens[{d}] holds the token {validate.describe(bad)}: every token must be a str")


def _check_query(query_tokens) -> None:
    if isinstance(query_tokens, str):
        raise TypeError(f"query_tokens must be a list of tokens, not a str; tokenize the query first, e.g. "
                        f"with lmbook.retrieval.tokenize({query_tokens[:30]!r})")
    validate.strings("query_tokens", query_tokens, empty=True)
    if len(query_tokens) == 0:
        raise ValueError("query_tokens is empty: an empty query matches nothing (did the tokenizer drop it?)")


def _check_search(engine, fitted: str, query_tokens, k: int = 1) -> None:
    """For a search engine's methods: it was indexed (has ``fitted``), a valid query, k >= 1."""
    if not hasattr(engine, fitted):
        raise ValueError("the index is empty: call .index(corpus_tokens) first")
    _check_query(query_tokens)
    validate.integer("k", k)


def _check_term_frequency(counts, variant) -> None:
    if not sp.issparse(counts) or counts.ndim != 2:
        raise TypeError(f"counts must be a sparse (N, V) matrix of term counts, got {validate.describe(counts)}")
    validate.choice("variant", variant, TF_VARIANTS)
    data = np.asarray(counts.data)
    if data.dtype.kind not in "fiub" or not np.isfinite(data).all() or (data < 0).any():
        raise ValueError("counts must hold finite counts >= 0")


def _check_idf(df, n_docs, variant) -> None:
    validate.integer("n_docs", n_docs)
    validate.choice("variant", variant, IDF_VARIANTS)
    _check_document_frequencies(df, n_docs)


def _check_document_frequencies(df, n_docs) -> None:
    if isinstance(df, (list, tuple)) and not all(isinstance(x, (int, np.integer)) for x in df):
        raise TypeError(f"df must hold int document counts, got {validate.describe(df)}")
    if not isinstance(df, (list, tuple, np.ndarray)) or np.asarray(df).dtype.kind not in "iu":
        raise TypeError(f"df must be a list or array of int document counts, got {validate.describe(df)}")
    df = np.asarray(df)
    if df.ndim != 1 or df.size == 0:
        raise ValueError(f"df must be a non-empty 1-d list of counts, one per term, got shape {df.shape}")
    if df.min() < 1 or df.max() > n_docs:
        raise ValueError(f"df must lie in [1, n_docs = {n_docs}] (a term occurs in 1 to N documents), "
                         f"got values from {df.min()} to {df.max()}")


def _check_weighting(tf, idf) -> None:
    validate.choice("tf", tf, TF_VARIANTS)
    validate.choice("idf", idf, IDF_VARIANTS)


def _check_tf_idf(corpus_tokens, tf, idf, norm) -> None:
    _check_corpus(corpus_tokens)
    _check_weighting(tf, idf)
    validate.choice("norm", norm, (None, "l2"))
