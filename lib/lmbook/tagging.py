"""Part-of-speech tagging with counts (chapter 4): a most-frequent-tag baseline and a hidden Markov model.

- :func:`word_shape` maps a word to a coarse class (digits, capitalisation, suffix): the unknown-word rule;
- :class:`MostFrequentTag` tags each word with its most frequent training tag;
- :func:`fit_hmm` estimates a first-order HMM with add-alpha (Lidstone) smoothing; :class:`HMM` tags with it;
- :func:`viterbi` finds the best tag sequence with back-pointers, in log space, in O(T K^2);
- :func:`forward_backward` gives each position's posterior over tags, in log space.

Left out on purpose: second-order (trigram) transitions, suffix tries for unknown words (TnT), and unsupervised
training with Baum-Welch. The neural tagger is in :mod:`lmbook.neural_tagger`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from . import validate

__all__ = ["word_shape", "MostFrequentTag", "HMM", "fit_hmm", "viterbi", "ViterbiResult", "forward_backward"]

SUFFIXES = ("ness", "ment", "able", "tion", "ing", "ity", "ous", "ive", "ful", "est", "ize", "ed", "ly", "al",
            "er", "ic", "s")  # longest first, so "ness" wins over "s"


def word_shape(word: str) -> str:
    """A coarse class of ``word`` for unknown words: ``<num>``, ``<punct>``, or case plus a known suffix,
    e.g. ``word_shape("Tokenizing") == "<Cap-ing>"`` and ``word_shape("quickly") == "<low-ly>"``."""
    validate.string("word", word)
    if any(c.isdigit() for c in word):
        return "<num>"
    if not any(c.isalpha() for c in word):
        return "<punct>"
    case = "CAPS" if word.isupper() and len(word) > 1 else "Cap" if word[0].isupper() else "low"
    suffix = next((s for s in SUFFIXES if word.lower().endswith(s) and len(word) > len(s) + 2), "")
    return f"<{case}-{suffix}>" if suffix else f"<{case}>"


class MostFrequentTag:
    """Tag each known word with its most frequent training tag; tag an unknown word with the most frequent tag of
    the *rare* training words (seen once) that share its :func:`word_shape`."""

    def fit(self, tagged) -> MostFrequentTag:
        pairs = _check_tagged(tagged)
        by_word = defaultdict(Counter)
        for words, tags in pairs:
            for w, t in zip(words, tags, strict=True):
                by_word[w][t] += 1
        self.best = {w: c.most_common(1)[0][0] for w, c in by_word.items()}
        by_shape, everything = defaultdict(Counter), Counter()
        for w, c in by_word.items():
            if sum(c.values()) == 1:  # hapax legomena stand in for the unknown words of new text
                by_shape[word_shape(w)].update(c)
                everything.update(c)
        self.default = everything.most_common(1)[0][0]
        self.by_shape = {s: c.most_common(1)[0][0] for s, c in by_shape.items()}
        return self

    def tag(self, words) -> list[str]:
        validate.strings("words", words)
        return [self.best.get(w) or self.by_shape.get(word_shape(w), self.default) for w in words]


@dataclass
class HMM:
    """A first-order HMM over tags: ``log_start`` (K,), ``log_trans`` (K, K) with rows the previous tag, and
    ``log_emit`` (K, V + 1) whose last column scores symbols never seen in training."""

    tags: tuple[str, ...]
    vocab: dict[str, int]
    log_start: np.ndarray
    log_trans: np.ndarray
    log_emit: np.ndarray

    def symbol(self, word: str) -> str:
        """The word itself if it was frequent enough in training, else its :func:`word_shape`."""
        validate.string("word", word)
        return word if word in self.vocab else word_shape(word)

    def emission_scores(self, words) -> np.ndarray:
        """log P(word_t | tag) for each position: (T, K)."""
        validate.strings("words", words)
        unseen = self.log_emit.shape[1] - 1
        ids = [self.vocab.get(self.symbol(w), unseen) for w in words]
        return self.log_emit[:, ids].T  # (T, K)

    def tag(self, words) -> list[str]:
        return [self.tags[k] for k in viterbi(self.log_start, self.log_trans, self.emission_scores(words)).path]

    def posteriors(self, words) -> np.ndarray:
        """P(tag_t = k | words) for each position: (T, K)."""
        return forward_backward(self.log_start, self.log_trans, self.emission_scores(words))[0]


def fit_hmm(tagged, alpha_transition: float = 0.1, alpha_emission: float = 0.01, min_count: int = 2) -> HMM:
    """Estimate an HMM from (words, tags) pairs with add-alpha smoothing:

    P(t | t') = (C(t', t) + a_T) / (C(t', .) + a_T K),   P(w | t) = (C(t, w) + a_E) / (C(t) + a_E (V + 1)),

    where words seen fewer than ``min_count`` times are replaced by their :func:`word_shape` first, and the extra
    emission bin is for symbols never seen at all. P(t) at the start of a sentence is smoothed like a transition.
    """
    pairs = _check_fit(tagged, alpha_transition, alpha_emission, min_count)
    counts = Counter(w for words, _ in pairs for w in words)
    symbols = [[w if counts[w] >= min_count else word_shape(w) for w in words] for words, _ in pairs]
    tags = tuple(sorted({t for _, ts in pairs for t in ts}))
    vocab = {s: i for i, s in enumerate(sorted({s for sent in symbols for s in sent}))}
    K, V = len(tags), len(vocab)
    tag_id = {t: k for k, t in enumerate(tags)}
    ks = [[tag_id[t] for t in ts] for _, ts in pairs]
    prev, nxt = [k for s in ks for k in s[:-1]], [k for s in ks for k in s[1:]]  # every adjacent tag pair
    start, trans, emit = np.zeros(K), np.zeros((K, K)), np.zeros((K, V + 1))
    np.add.at(start, [s[0] for s in ks], 1)  # C(t) at the start of a sentence
    np.add.at(trans, (prev, nxt), 1)  # C(t', t): rows the previous tag
    np.add.at(emit, ([k for s in ks for k in s], [vocab[w] for sent in symbols for w in sent]), 1)  # C(t, w)
    log_start = np.log((start + alpha_transition) / (start.sum() + alpha_transition * K))
    log_trans = np.log((trans + alpha_transition) / (trans.sum(1, keepdims=True) + alpha_transition * K))
    log_emit = np.log((emit + alpha_emission) / (emit.sum(1, keepdims=True) + alpha_emission * (V + 1)))
    return HMM(tags, vocab, log_start, log_trans, log_emit)


class ViterbiResult(NamedTuple):
    path: list[int]  # the best state sequence, (T,)
    log_prob: float  # log P(best path, observations)
    scores: np.ndarray  # delta[t, k]: best log score of a path ending in state k at time t, (T, K)
    backpointers: np.ndarray  # psi[t, k]: the previous state on that path, (T, K); row 0 unused


def viterbi(log_start, log_trans, log_emit) -> ViterbiResult:
    """The most probable state sequence: delta[t, k] = max_j (delta[t-1, j] + log A[j, k]) + log B[t, k].

    ``log_start`` (K,), ``log_trans`` (K, K), ``log_emit`` (T, K) for one sequence. Time O(T K^2).
    """
    _check_hmm(log_start, log_trans, log_emit)
    T, K = log_emit.shape
    delta, psi = np.empty((T, K)), np.zeros((T, K), dtype=np.int64)
    delta[0] = log_start + log_emit[0]
    for t in range(1, T):
        candidates = delta[t - 1][:, None] + log_trans  # (K_prev, K): extend every path by one step
        psi[t] = candidates.argmax(axis=0)
        delta[t] = candidates.max(axis=0) + log_emit[t]
    path = [int(delta[-1].argmax())]
    for t in range(T - 1, 0, -1):  # follow the back-pointers from the best final state
        path.append(int(psi[t, path[-1]]))
    return ViterbiResult(path[::-1], float(delta[-1].max()), delta, psi)


def forward_backward(log_start, log_trans, log_emit) -> tuple[np.ndarray, float]:
    """Posteriors P(z_t = k | x) = alpha[t, k] beta[t, k] / P(x), and log P(x), all computed in log space.

    alpha[t, k] = P(x_1..t, z_t = k);  beta[t, k] = P(x_t+1..T | z_t = k). Shapes as for :func:`viterbi`.
    """
    _check_hmm(log_start, log_trans, log_emit)
    T, K = log_emit.shape
    log_alpha, log_beta = np.empty((T, K)), np.zeros((T, K))
    log_alpha[0] = log_start + log_emit[0]
    for t in range(1, T):
        log_alpha[t] = logsumexp(log_alpha[t - 1][:, None] + log_trans, axis=0) + log_emit[t]
    for t in range(T - 2, -1, -1):
        log_beta[t] = logsumexp(log_trans + (log_emit[t + 1] + log_beta[t + 1])[None, :], axis=1)
    log_px = float(logsumexp(log_alpha[-1]))
    return np.exp(log_alpha + log_beta - log_px), log_px  # (T, K), a scalar


def _pairs(tagged) -> list[tuple]:
    validate.sequence("tagged", tagged, what="(words, tags) pairs")
    return [(item.words, item.tags) if hasattr(item, "tags") else item for item in tagged]


def _check_tagged(tagged) -> list[tuple]:
    pairs = _pairs(tagged)
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"tagged[{i}] must be a (words, tags) pair, got {validate.describe(pair)}")
        validate.strings(f"tagged[{i}] words", pair[0])
        validate.strings(f"tagged[{i}] tags", pair[1])
        if len(pair[0]) != len(pair[1]):
            raise ValueError(f"tagged[{i}] has {len(pair[0])} words but {len(pair[1])} tags")
    return pairs


def _check_fit(tagged, alpha_transition, alpha_emission, min_count) -> list[tuple]:
    validate.number("alpha_transition", alpha_transition, low=0, low_open=True)
    validate.number("alpha_emission", alpha_emission, low=0, low_open=True)
    validate.integer("min_count", min_count)
    return _check_tagged(tagged)


def _check_hmm(log_start, log_trans, log_emit) -> None:
    for name, value, ndim in (("log_start", log_start, 1), ("log_trans", log_trans, 2), ("log_emit", log_emit, 2)):
        if not isinstance(value, np.ndarray) or value.ndim != ndim or value.size == 0:
            raise TypeError(f"{name} must be a non-empty {ndim}-D numpy array, got {validate.describe(value)}")
        if not np.issubdtype(value.dtype, np.floating) or np.isnan(value).any() or (value == np.inf).any():
            raise ValueError(f"{name} must hold log-probabilities (floats, no NaN or +inf), got "
                             f"{validate.describe(value)}")
    K = log_start.shape[0]
    if log_trans.shape != (K, K) or log_emit.shape[1] != K:
        raise ValueError(f"log_trans must be (K, K) and log_emit (T, K) with K = len(log_start) = {K}, got "
                         f"log_trans {log_trans.shape} and log_emit {log_emit.shape}")
