"""Chapter 1: n-gram language models estimated by counting.

P(w_1..w_N) = prod_i P(w_i | w_{i-n+1} .. w_{i-1}), with every sentence padded by n-1 start symbols <s>
and closed by an end symbol </s> (so the model also decides where a sentence stops).

Smoothing, selected by name:
- ``"mle"``: c(h, w) / c(h). Unseen n-grams get probability 0, so one unseen n-gram makes perplexity infinite.
- ``"add-k"``: (c(h, w) + k) / (c(h) + k V); k = 1 is Laplace smoothing.
- ``"kneser-ney"``: interpolated Kneser-Ney with absolute discount D (Chen & Goodman 1999): the highest order
  uses counts, lower orders use continuation counts N1+(. h w), and the unigram level is interpolated with the
  uniform distribution so that every word in the vocabulary has non-zero probability.

Simple linear interpolation (Jelinek & Mercer 1980) mixes the MLEs of every order with fixed weights,
P(w | h) = sum_m lambda_m P_ML(w | last m-1 words of h), the weights fitted on held-out text by EM:
:meth:`NGramLM.order_probs` gives the per-order probabilities of each token, :func:`interpolation_weights`
the weights.

:class:`NeuralNGramLM` keeps the same Markov assumption but replaces counting by a small network
(Bengio et al. 2003): embed the n-1 context words, concatenate, one tanh layer, logits over V.
Similar words get similar embeddings, so it shares statistics between contexts that counting keeps apart.

Words seen fewer than ``min_count`` times in training, and every word unseen in training, map to <unk>.
The vocabulary V the model predicts over is the training words, </s> and <unk> (never <s>).

Left out on purpose: modified KN with three discounts, backoff (Katz) models, and pruning.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import numpy as np
import torch
from torch import nn

from . import validate

__all__ = ["NGramLM", "NeuralNGramLM", "interpolation_weights", "BOS", "EOS", "UNK", "SMOOTHINGS"]

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
SMOOTHINGS = ("mle", "add-k", "kneser-ney")


class NGramLM:
    """An n-gram model: ``NGramLM(3, smoothing="kneser-ney").fit(sentences).perplexity(other_sentences)``."""

    def __init__(self, n: int, smoothing: str = "kneser-ney", k: float = 1.0, discount: float = 0.75,
                 min_count: int = 1):
        _check_config(n, smoothing, k, discount, min_count)
        self.n, self.smoothing, self.k, self.discount, self.min_count = n, smoothing, k, discount, min_count
        self.vocab: list[str] = []

    # ----- training -------------------------------------------------------------------------------
    def fit(self, sentences) -> NGramLM:
        """Count n-grams of every order 1..n in ``sentences`` (a list of lists of words)."""
        _check_sentences(sentences)
        freq = Counter(w for s in sentences for w in s)
        known = {w for w, c in freq.items() if c >= self.min_count and w not in (BOS, EOS, UNK)}
        self.vocab = sorted(known) + [EOS, UNK]
        self._known = known
        # counts[m][h][w] = c(h, w) for contexts h of length m-1
        self.counts = {m: defaultdict(Counter) for m in range(1, self.n + 1)}
        for sent in sentences:
            padded = [BOS] * (self.n - 1) + [self._map(w) for w in sent] + [EOS]
            for i in range(self.n - 1, len(padded)):
                for m in range(1, self.n + 1):
                    self.counts[m][tuple(padded[i - m + 1:i])][padded[i]] += 1
        # continuation counts for Kneser-Ney's lower orders: cont[m][h][w] = |{x : c(x, h, w) > 0}|
        self.cont = {m: defaultdict(Counter) for m in range(1, self.n)}
        for m in range(2, self.n + 1):
            for h, followers in self.counts[m].items():
                for w in followers:
                    self.cont[m - 1][h[1:]][w] += 1
        return self

    def _map(self, word: str) -> str:
        return word if word in self._known or word == EOS else UNK

    # ----- probabilities ---------------------------------------------------------------------------
    def prob(self, word: str, context=()) -> float:
        """P(word | context) with the model's smoothing (chapter 1).

        Only the last n-1 words of ``context`` (a list of words) matter; a short context is padded with <s>.
        """
        _check_query(self, word=word, context=context)
        h = tuple(self._map(w) if w != BOS else BOS for w in context)
        h = ((BOS,) * (self.n - 1) + h)[len(h):] if self.n > 1 else ()  # the last n-1 words
        w = self._map(word)
        if self.smoothing == "kneser-ney":
            return self._kneser_ney(w, h, self.n)
        followers = self.counts[self.n].get(h, {})
        total = sum(followers.values())
        if self.smoothing == "mle":
            return followers.get(w, 0) / total if total else 0.0  # MLE is undefined for unseen contexts: 0
        return (followers.get(w, 0) + self.k) / (total + self.k * len(self.vocab))

    def _kneser_ney(self, w: str, h: tuple, m: int) -> float:
        """Interpolated KN at order m: max(c(h,w) - D, 0)/c(h) + D * N1+(h .)/c(h) * P_KN(w | h[1:]).

        Lower orders use continuation counts, also for contexts starting with <s> (a simplification: Chen and
        Goodman and KenLM keep raw counts there). The recursion ends in the uniform 1/|V|.
        """
        table = self.counts[m] if m == self.n else self.cont[m]  # counts at the top, continuations below
        followers = table.get(h, {})
        total = sum(followers.values())
        lower = self._kneser_ney(w, h[1:], m - 1) if m > 1 else 1.0 / len(self.vocab)
        if total == 0:  # unseen context: all weight on the lower order
            return lower
        D = self.discount
        return max(followers.get(w, 0) - D, 0.0) / total + D * len(followers) / total * lower

    def distribution(self, context=()) -> dict[str, float]:
        """The whole next-word distribution P(. | context) over the vocabulary; it sums to 1."""
        _check_query(self, context=context)
        return {w: self.prob(w, context) for w in self.vocab}

    # ----- evaluation and sampling -----------------------------------------------------------------
    def log_likelihood(self, sentences) -> tuple[float, int]:
        """(sum of ln P over every word and every </s>, number of predicted tokens)."""
        _check_scoring(self, sentences)
        total, count = 0.0, 0
        for sent in sentences:
            for i, w in enumerate(list(sent) + [EOS]):
                p = self.prob(w, sent[max(0, i - self.n + 1):i])
                total += math.log(p) if p > 0 else -math.inf
                count += 1
        return total, count

    def perplexity(self, sentences) -> float:
        """exp(-(1/N) sum ln P) over all N tokens of all sentences (token-weighted, </s> included)."""
        total, count = self.log_likelihood(sentences)
        return math.exp(-total / count) if total > -math.inf else math.inf

    def order_probs(self, sentences) -> np.ndarray:
        """(N, n+1) array: column 0 is 1/|V|, column m the MLE P_ML(w | last m-1 words), for all N tokens.

        A context never seen at order m leaves that order undefined, so column m then repeats column m-1:
        every column is a proper distribution, and so is any mixture of them.
        """
        _check_scoring(self, sentences)
        rows = []
        for sent in sentences:
            padded = [BOS] * (self.n - 1) + [self._map(w) for w in sent] + [EOS]
            for i in range(self.n - 1, len(padded)):
                row = [1.0 / len(self.vocab)]  # order 0: uniform
                for m in range(1, self.n + 1):
                    followers = self.counts[m].get(tuple(padded[i - m + 1:i]), {})
                    total = sum(followers.values())
                    row.append(followers.get(padded[i], 0) / total if total else row[-1])
                rows.append(row)
        return np.array(rows)  # (N, n+1)

    def generate(self, max_words: int = 30, context=(), seed: int | None = None) -> list[str]:
        """Sample words one at a time from P(. | last n-1 words) until </s> or ``max_words``."""
        _check_generate(self, max_words, context, seed)
        rng = random.Random(seed)
        out = list(context)
        for _ in range(max_words):
            dist = self.distribution(out[len(out) - self.n + 1:] if self.n > 1 else ())
            w = rng.choices(list(dist), weights=list(dist.values()))[0]
            if w == EOS:
                break
            out.append(w)
        return out[len(context):]

    def __repr__(self) -> str:
        size = f", |V|={len(self.vocab)}" if self.vocab else ", untrained"
        return f"NGramLM(n={self.n}, smoothing={self.smoothing!r}{size})"


class NeuralNGramLM(nn.Module):
    """Bengio et al. (2003)'s fixed-window model: logits = W2 tanh(W1 [e(w_{t-n+1}); ...; e(w_{t-1})]) + b.

    ``forward(context_ids)`` maps (B, n-1) word ids to (B, V) logits; train it with ``metrics.cross_entropy``.
    ``windows(lm, sentences)`` turns sentences into (context ids, target ids) with an ``NGramLM``'s vocabulary.
    """

    def __init__(self, vocab_size: int, n: int = 4, dim: int = 32, hidden: int = 128):
        super().__init__()
        _check_sizes(vocab_size=vocab_size, n=n, dim=dim, hidden=hidden)
        self.n = n
        self.embed = nn.Embedding(vocab_size + 1, dim)  # the extra row is <s>
        self.hidden = nn.Linear((n - 1) * dim, hidden)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, context_ids: torch.Tensor) -> torch.Tensor:
        """logits = W2 tanh(W1 x + b1) + b2, x the n-1 context embeddings side by side. (B, n-1) -> (B, V)."""
        _check_context_ids(context_ids, self.embed.num_embeddings, self.n)
        x = self.embed(context_ids).flatten(1)  # (B, (n-1) * dim)
        return self.out(torch.tanh(self.hidden(x)))  # (B, V)

    @staticmethod
    def windows(lm: NGramLM, sentences, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """All (context, next word) pairs of ``sentences`` as id tensors, </s> included, <s> = id V."""
        _check_windows(lm, sentences, n)
        index = {w: i for i, w in enumerate(lm.vocab)}
        bos = len(lm.vocab)
        contexts, targets = [], []
        for sent in sentences:
            ids = [bos] * (n - 1) + [index[lm._map(w)] for w in sent] + [index[EOS]]
            for i in range(n - 1, len(ids)):
                contexts.append(ids[i - n + 1:i])
                targets.append(ids[i])
        return torch.tensor(contexts), torch.tensor(targets)


def interpolation_weights(order_probs, iters: int = 100) -> np.ndarray:
    """EM for the mixture weights lambda that maximise sum_t log sum_m lambda_m p_tm on held-out tokens.

    ``order_probs`` is (N, M), e.g. from :meth:`NGramLM.order_probs`. E-step: the share of each order in each
    token's probability; M-step: lambda_m = the mean share of order m. Each step raises the held-out likelihood,
    which is concave in lambda, so EM climbs to its maximum (chapter 1).
    """
    p = _check_order_probs(order_probs, iters)
    lambdas = np.full(p.shape[1], 1.0 / p.shape[1])  # (M,) start uniform
    for _ in range(iters):
        share = p * lambdas  # (N, M): lambda_m p_tm
        share /= share.sum(axis=1, keepdims=True)  # E-step: posterior of each order, per token
        lambdas = share.mean(axis=0)  # M-step
    return lambdas


# ----- argument checks ---------------------------------------------------------------------------------

def _check_config(n, smoothing, k, discount, min_count) -> None:
    validate.integer("n", n)
    validate.choice("smoothing", smoothing, SMOOTHINGS)
    validate.number("k", k, low=0.0, low_open=True)
    validate.number("discount", discount, low=0.0, high=1.0, low_open=True, high_open=True)
    validate.integer("min_count", min_count)


def _check_words(name: str, words) -> None:
    if isinstance(words, str):
        raise TypeError(f"{name} must be a list of words, not a str; split it first, e.g. {words.split()[:3]}")
    validate.strings(name, words, empty=True)


def _check_sentences(sentences, name: str = "sentences") -> None:
    validate.sequence(name, sentences, what="sentences (each a list of words)")
    for i, sentence in enumerate(sentences):
        _check_words(f"{name}[{i}]", sentence)
    if not any(sentences):
        raise ValueError(f"{name} is empty: an n-gram model needs at least one non-empty sentence")


def _check_query(lm, **words) -> None:
    if not lm.vocab:
        raise ValueError("the model is not trained yet: call fit(sentences) first")
    if "word" in words:
        validate.string("word", words["word"])
    if "context" in words:
        _check_words("context", words["context"])


def _check_scoring(lm, sentences) -> None:
    _check_query(lm)
    _check_sentences(sentences)


def _check_generate(lm, max_words, context, seed) -> None:
    validate.integer("max_words", max_words)
    _check_query(lm, context=context)
    if seed is not None:
        validate.integer("seed", seed, low=None)


def _check_sizes(**sizes) -> None:
    for name, value in sizes.items():
        validate.integer(name, value, low=2 if name == "n" else 1)


def _check_context_ids(context_ids, n_ids, n) -> None:
    validate.token_ids("context_ids", context_ids, n_ids, ndim=2)
    if context_ids.shape[1] != n - 1:
        raise ValueError(f"context_ids must have shape (B, {n - 1}), got {tuple(context_ids.shape)}")


def _check_windows(lm, sentences, n) -> None:
    if not isinstance(lm, NGramLM):
        raise TypeError(f"lm must be a fitted NGramLM (it gives the vocabulary), got {validate.describe(lm)}")
    if not lm.vocab:
        raise ValueError("lm is not trained yet: call lm.fit(sentences) first")
    _check_sentences(sentences)
    validate.integer("n", n, low=2)


def _check_order_probs(order_probs, iters) -> np.ndarray:
    validate.integer("iters", iters)
    if not isinstance(order_probs, np.ndarray) or order_probs.dtype.kind not in "fiu":
        raise TypeError(f"order_probs must be an (N, M) numpy array of probabilities, "
                        f"got {validate.describe(order_probs)}")
    p = order_probs.astype(np.float64)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"order_probs must be a non-empty (N, M) array, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise ValueError("order_probs must hold probabilities in [0, 1]")
    if np.any(p.sum(axis=1) == 0):
        raise ValueError("order_probs has a token that every order gives probability 0: add a uniform column")
    return p
