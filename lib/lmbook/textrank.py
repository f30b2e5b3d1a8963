"""Chapter 3: TextRank (Mihalcea and Tarau, 2004), PageRank on graphs built from the text of one document.

- keywords: the vertices are candidate words, the tokens that ``keep`` accepts; an undirected edge joins two
  candidates that are fewer than ``window`` positions apart inside one sentence (``window=2``: neighbours),
  positions counted over the candidates alone (``span="candidates"``, the default, so a stopword between two
  words does not separate them) or over all tokens (``span="tokens"``); PageRank ranks the words, and
  :func:`keyphrases` merges top words that stand next to each other;
- summaries: the vertices are sentences, the edge weights the overlap similarity
  |S_i & S_j| / (log |S_i| + log |S_j|), and the top-ranked sentences, in document order, are the summary.

``keep`` is a function from a sentence's tokens to one bool per token. The default,
:func:`content_words`, keeps alphabetic words that are not stopwords; a part-of-speech filter (nouns and
adjectives, as in the paper) plugs in the same way once chapter 4 has a tagger.

Left out on purpose: the paper's unnormalised score (1 - d) + d sum(...), which ranks alike (chapter 3 shows
it); lemmatisation; LexRank's cosine similarity and thresholds; and abstractive summaries.
"""

from __future__ import annotations

import math
import re

import numpy as np
import scipy.sparse as sp

from . import validate
from .cooccurrence import STOPWORDS
from .graphs import pagerank

__all__ = ["content_words", "cooccurrence_graph", "keywords", "keyphrases", "overlap_similarity",
           "similarity_graph", "summarize"]

_WORD = re.compile(r"[^\W\d_]{2,}")  # two or more letters, no digits or underscores


def content_words(tokens) -> list[bool]:
    """The default ``keep``: True for a word of two or more letters that is not a stopword (chapter 3)."""
    validate.strings("tokens", tokens, empty=True)
    return [bool(_WORD.fullmatch(t)) and t.lower() not in STOPWORDS for t in tokens]


def cooccurrence_graph(sentences, window: int = 2, keep=content_words,
                       span: str = "candidates") -> tuple[list, sp.csr_matrix]:
    """(vocab, A): the candidates in order of first appearance and the symmetric 0/1 adjacency (V, V), with
    A[x, y] = 1 when x and y are fewer than ``window`` positions apart in some sentence, positions counted over
    the candidates (``span="candidates"``) or over all tokens (``span="tokens"``) (chapter 3)."""
    _check_keywords(sentences, window, keep, span=span)
    index, pairs = {}, set()
    for sentence in sentences:
        kept = [(i, t) for i, (t, ok) in enumerate(zip(sentence, keep(sentence), strict=True)) if ok]
        if span == "candidates":
            kept = [(a, t) for a, (_, t) in enumerate(kept)]  # renumber: filtered words take no position
        for a, (i, x) in enumerate(kept):
            index.setdefault(x, len(index))
            for j, y in kept[a + 1:]:
                if j - i < window and x != y:
                    pairs.add((x, y))
    A = sp.lil_matrix((len(index), len(index)))  # (V, V)
    for x, y in pairs:
        A[index[x], index[y]] = A[index[y], index[x]] = 1.0
    A = A.tocsr()
    return list(index), A


def keywords(sentences, top: int = 10, window: int = 2, keep=content_words, damping: float = 0.85,
             span: str = "candidates") -> list:
    """The ``top`` words of one document by PageRank on its co-occurrence graph, as (word, score), ties broken
    by first appearance (chapter 3)."""
    _check_keywords(sentences, window, keep, top, damping, span)
    vocab, A = cooccurrence_graph(sentences, window, keep, span)
    if not vocab:
        return []
    scores = pagerank(A, damping=damping, tol=1e-12).scores
    order = np.argsort(-scores, kind="stable")[:top]
    return [(vocab[i], float(scores[i])) for i in order]


def keyphrases(sentences, words) -> list[str]:
    """Runs of adjacent tokens that are all in ``words`` (for example the top keywords), joined by spaces, each
    once, in order of first appearance: the paper's post-processing step (chapter 3)."""
    _check_keyphrases(sentences, words)
    chosen, found = set(words), {}
    for sentence in sentences:
        run = []
        for token in [*sentence, None]:  # None ends the last run
            if token in chosen:
                run.append(token)
            elif run:
                found.setdefault(" ".join(run), len(found))
                run = []
    return list(found)


def overlap_similarity(a, b) -> float:
    """|set(a) & set(b)| / (ln |a| + ln |b|) for two token lists; 0 when both are single tokens (chapter 3)."""
    _check_pair(a, b)
    denominator = math.log(len(a)) + math.log(len(b))
    return len(set(a) & set(b)) / denominator if denominator > 0 else 0.0


def similarity_graph(sentences) -> np.ndarray:
    """The symmetric (n, n) matrix of :func:`overlap_similarity` between sentences, 0 on the diagonal
    (chapter 3)."""
    _check_sentences(sentences, allow_empty_sentence=False)
    n = len(sentences)
    W = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            W[i, j] = W[j, i] = overlap_similarity(sentences[i], sentences[j])
    return W


def summarize(sentences, k: int = 3, damping: float = 0.85) -> list[int]:
    """The indices of the ``k`` sentences with the highest PageRank on the similarity graph, in document order
    (ties broken by position) (chapter 3)."""
    _check_summary(sentences, k, damping)
    scores = pagerank(similarity_graph(sentences), damping=damping, tol=1e-12).scores
    return sorted(np.argsort(-scores, kind="stable")[:k].tolist())


# ----- argument checks ---------------------------------------------------------------------------------

def _check_sentences(sentences, allow_empty_sentence: bool = True) -> None:
    validate.sequence("sentences", sentences, what="sentences, each a list of tokens")
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise TypeError(f"sentences[{i}] must be a list of tokens, got the str {sentence[:30]!r}; split it first")
        validate.strings(f"sentences[{i}]", sentence, empty=allow_empty_sentence)


def _check_keep(keep, sentences) -> None:
    if not callable(keep):
        raise TypeError(f"keep must be a function from a list of tokens to a list of bools, got "
                        f"{validate.describe(keep)}")
    for sentence in sentences:  # a wrong filter fails here, with its name in the message
        flags = keep(sentence)
        if not isinstance(flags, (list, tuple)) or len(flags) != len(sentence) or not all(
                isinstance(f, (bool, np.bool_)) for f in flags):
            raise ValueError(f"keep must return one bool per token ({len(sentence)} here), got "
                             f"{validate.describe(flags)}")


def _check_keywords(sentences, window, keep, top=1, damping=0.85, span="candidates") -> None:
    _check_sentences(sentences)
    validate.integer("window", window, low=2)  # 2 joins neighbours
    validate.choice("span", span, ("candidates", "tokens"))
    _check_keep(keep, sentences)
    validate.integer("top", top)
    validate.number("damping", damping, low=0, high=1, high_open=True)


def _check_keyphrases(sentences, words) -> None:
    _check_sentences(sentences)
    if isinstance(words, (str, bytes)) or not isinstance(words, (list, tuple, set, frozenset)):
        raise TypeError(f"words must be a list or set of words, got {validate.describe(words)}")
    for word in words:
        validate.string("words", word)


def _check_pair(a, b) -> None:
    for name, tokens in (("a", a), ("b", b)):
        validate.strings(name, tokens)


def _check_summary(sentences, k, damping) -> None:
    _check_sentences(sentences, allow_empty_sentence=False)
    validate.integer("k", k)
    validate.number("damping", damping, low=0, high=1, high_open=True)
