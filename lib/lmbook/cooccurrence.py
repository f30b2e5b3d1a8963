"""Chapter 2: co-occurrence counts and pointwise mutual information (PMI).

PMI(x, y) = log p(x, y) / (p(x) p(y)): how much more often x and y occur together than they would if
they were independent. This module makes every choice behind p(x, y) explicit:

- pairs are counted **inside sentences only** (a pair never spans a sentence boundary);
- ``window=w`` pairs each token with the w-1 tokens after it (``window=2``: adjacent words);
- ``symmetric=False`` counts *ordered* pairs (x before y); ``symmetric=True`` counts each pair both ways,
  so that C[x, y] = C[y, x];
- p(x, y) = C[x, y] / (sum of C): the pair counts normalised to a distribution;
- p(x) = count(x) / (number of tokens) by default (``marginals="unigram"``), or the row and column sums of C
  (``marginals="matrix"``, the convention of a term-context matrix).

Left out on purpose: smoothing of the context distribution (p(c)^0.75), SVD of the PPMI matrix (chapter 6
does embeddings), and association measures other than PMI (t-test, chi-squared, log-likelihood ratio).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from . import validate

__all__ = ["Cooccurrence", "cooccurrence_counts", "pmi", "ppmi", "collocations", "remove_stopwords",
           "STOPWORDS"]

# A small English stopword list: articles, pronouns, auxiliaries, prepositions and conjunctions.
STOPWORDS = frozenset("""
a an the and or but nor not no so if then else than that this these those there here of in on at to from by
for with without into onto over under about as is are was were be been being am do does did done has have had
having it its it's he she they them their his her we us our you your i me my which who whom whose what when
where why how all any each both either neither some such only own same can could may might must shall should
will would also very too more most other another one just up out off again further once
""".split())


@dataclass
class Cooccurrence:
    """Pair counts C (a sparse V x V matrix, rows = first word) with the unigram counts they came from."""

    vocab: list  # the words, sorted; row/column i of ``counts`` is vocab[i]
    index: dict  # word -> row/column
    counts: sp.csr_matrix  # (V, V) C[x, y]: pairs (x, y) with y within the window after x (or either side)
    unigram: np.ndarray  # (V,) count(x): occurrences of each word
    window: int
    symmetric: bool

    def __post_init__(self):
        _check_cooccurrence(self)

    @property
    def n_tokens(self) -> int:
        return int(self.unigram.sum())

    @property
    def n_pairs(self) -> int:
        return int(self.counts.sum())

    def count(self, x: str, y: str) -> int:
        """C[x, y] (0 for a word that never occurs)."""
        _check_words(x=x, y=y)
        if x not in self.index or y not in self.index:
            return 0
        return int(self.counts[self.index[x], self.index[y]])


def cooccurrence_counts(sentences, window: int = 2, symmetric: bool = False) -> Cooccurrence:
    """Count word pairs (w_i, w_j) with 0 < j - i < ``window`` inside each sentence (chapter 2).

    ``sentences`` is a list of sentences, each a list of words. With ``symmetric=True`` each pair is also
    counted as (w_j, w_i), so C is symmetric and its total is twice the number of pairs.
    """
    _check_counting(sentences, window, symmetric)
    vocab = sorted({w for s in sentences for w in s})
    index = {w: i for i, w in enumerate(vocab)}
    rows, cols = [], []
    unigram = np.zeros(len(vocab), dtype=np.int64)
    for s in sentences:
        ids = [index[w] for w in s]  # the sentence as row numbers of C
        np.add.at(unigram, ids, 1)
        for i, x in enumerate(ids):
            for y in ids[i + 1:i + window]:
                rows.append(x)
                cols.append(y)
    if symmetric:
        rows, cols = rows + cols, cols + rows
    V = len(vocab)
    counts = sp.csr_matrix((np.ones(len(rows), dtype=np.int64), (rows, cols)), shape=(V, V))
    counts.sum_duplicates()
    return Cooccurrence(vocab, index, counts, unigram, window, symmetric)


def _marginals(cooc: Cooccurrence, marginals: str) -> tuple[np.ndarray, np.ndarray]:
    """(p(x), p(y)): unigram frequencies, or the row and column sums of C, normalised."""
    if marginals == "unigram":
        p = cooc.unigram / cooc.n_tokens
        return p, p
    rows, cols = np.asarray(cooc.counts.sum(axis=1)).ravel(), np.asarray(cooc.counts.sum(axis=0)).ravel()
    return rows / cooc.n_pairs, cols / cooc.n_pairs


def pmi(cooc: Cooccurrence, *, base: float = 2, marginals: str = "unigram") -> np.ndarray:
    """PMI(x, y) = log_base p(x, y) / (p(x) p(y)) for every pair of words: a dense (V, V) array (chapter 2).

    Pairs never seen together get -inf (log 0). When p(x) and p(y) are the marginals of p(x, y)
    (``marginals="matrix"``), PMI <= min(-log p(x), -log p(y)), with equality when the rarer of x and y only
    ever occurs with the other. Unigram marginals only approximate them: pairs are lost at sentence ends,
    so on a tiny corpus the bound can fail. Dense, so meant for small vocabularies; see :func:`ppmi` and
    :func:`collocations`.
    """
    _check_pmi(cooc, base, marginals, dense=True)
    C = cooc.counts.toarray()  # (V, V)
    p_x, p_y = _marginals(cooc, marginals)
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 where a row or column of C is empty
        values = np.log(C / cooc.n_pairs / np.outer(p_x, p_y)) / math.log(base)
    return np.where(C > 0, values, -np.inf)


def _observed_pmi(cooc: Cooccurrence, base: float, marginals: str):
    """PMI of the observed pairs only: arrays (rows, cols, counts, values), one entry per pair with C > 0."""
    p_x, p_y = _marginals(cooc, marginals)
    C = cooc.counts.tocoo()
    values = np.log(C.data / cooc.n_pairs / (p_x[C.row] * p_y[C.col])) / math.log(base)
    return C.row, C.col, C.data, values


def ppmi(cooc: Cooccurrence, *, base: float = 2, marginals: str = "unigram") -> sp.csr_matrix:
    """Positive PMI, max(PMI(x, y), 0), as a sparse (V, V) matrix: unseen pairs (PMI = -inf) become 0."""
    _check_pmi(cooc, base, marginals)
    rows, cols, _, values = _observed_pmi(cooc, base, marginals)
    keep = values > 0
    return sp.csr_matrix((values[keep], (rows[keep], cols[keep])), shape=cooc.counts.shape)


def collocations(cooc: Cooccurrence, n: int = 10, min_count: int = 5, *, base: float = 2,
                 marginals: str = "unigram") -> list[tuple[str, str, float, int]]:
    """The ``n`` pairs with the highest PMI among those seen at least ``min_count`` times.

    Returns (x, y, PMI, count) tuples, ties broken alphabetically. Without ``min_count`` the top is full of
    pairs seen once, because PMI rewards rare words: two words that occur once, side by side, get the
    largest PMI there is.
    """
    _check_collocations(cooc, n, min_count, base, marginals)
    rows, cols, counts, values = _observed_pmi(cooc, base, marginals)
    keep = counts >= min_count
    rows, cols, counts, values = rows[keep], cols[keep], counts[keep], values[keep]
    order = np.lexsort((cols, rows, -values))[:n]  # vocab is sorted, so row/col order is alphabetical
    return [(cooc.vocab[rows[i]], cooc.vocab[cols[i]], float(values[i]), int(counts[i])) for i in order]


def remove_stopwords(sentences, stopwords=STOPWORDS) -> list[list[str]]:
    """Drop stopwords from every sentence; words that were apart become neighbours, sentences stay apart."""
    _check_stopwords(sentences, stopwords)
    stop = frozenset(stopwords)
    return [[w for w in s if w not in stop] for s in sentences]


# ----- argument checks ---------------------------------------------------------------------------------

def _check_sentences(sentences) -> None:
    validate.sequence("sentences", sentences, what="sentences, each a list of words")
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise TypeError(f"sentences[{i}] must be a list of words, got the str {sentence[:30]!r}; split it first")
        validate.strings(f"sentences[{i}]", sentence, empty=True)


def _check_counting(sentences, window, symmetric) -> None:
    _check_sentences(sentences)
    if not any(sentences):
        raise ValueError("sentences is empty: there is nothing to count")
    validate.integer("window", window, low=2)  # 2 pairs adjacent words
    validate.boolean("symmetric", symmetric)


def _check_pmi(cooc, base, marginals, dense: bool = False) -> None:
    if not isinstance(cooc, Cooccurrence):
        raise TypeError(f"cooc must be the result of cooccurrence_counts(...), got {validate.describe(cooc)}")
    validate.number("base", base, low=0, low_open=True)  # 2 gives bits, e nats
    if base == 1:
        raise ValueError("base must be > 0 and != 1 (2 gives bits, e for nats), got 1")
    validate.choice("marginals", marginals, ("unigram", "matrix"))
    if cooc.n_pairs == 0:
        raise ValueError("no pairs were counted in cooc (every sentence is shorter than 2 words): PMI is undefined")
    if dense and len(cooc.vocab) > 4000:
        raise ValueError(f"pmi builds a dense V x V array, and cooc has V = {len(cooc.vocab)}; for a vocabulary "
                         "this large use ppmi() or collocations(), which keep only the pairs that occur")


def _check_collocations(cooc, n, min_count, base, marginals) -> None:
    _check_pmi(cooc, base, marginals)
    validate.integer("n", n)
    validate.integer("min_count", min_count)


def _check_words(**words) -> None:
    for name, word in words.items():
        validate.string(name, word, empty=True)


def _check_stopwords(sentences, stopwords) -> None:
    _check_sentences(sentences)
    if isinstance(stopwords, str) or not isinstance(stopwords, (set, frozenset, list, tuple)):
        raise TypeError(f"stopwords must be a set or list of words, got {validate.describe(stopwords)}")
    if not stopwords:
        raise ValueError("stopwords is empty: nothing would be removed")
    for word in stopwords:
        validate.string("stopwords", word)


def _check_cooccurrence(c: Cooccurrence) -> None:
    validate.strings("vocab", c.vocab, empty=True)
    if not isinstance(c.index, dict) or len(c.index) != len(c.vocab) or any(
            c.index.get(w) != i for i, w in enumerate(c.vocab)):
        raise ValueError("index must be the dict {vocab[i]: i} of the vocabulary")
    V = len(c.vocab)
    if not sp.issparse(c.counts) or c.counts.shape != (V, V):
        raise TypeError(f"counts must be a sparse (V, V) = ({V}, {V}) matrix, got {validate.describe(c.counts)}")
    if not isinstance(c.unigram, np.ndarray) or c.unigram.shape != (V,) or c.unigram.dtype.kind not in "iu":
        raise TypeError(f"unigram must be an int array of shape ({V},), got {validate.describe(c.unigram)}")
    if (c.unigram < 0).any() or (c.counts.data < 0).any():
        raise ValueError("counts and unigram must hold counts >= 0")
    validate.integer("window", c.window, low=2)
    validate.boolean("symmetric", c.symmetric)
