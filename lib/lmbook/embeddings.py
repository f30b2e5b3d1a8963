"""Chapter 6: word embeddings learned from co-occurrence: training word2vec and fastText, and using the vectors.

- :func:`train_word2vec` trains skip-gram with negative sampling, CBOW or fastText (the models are in
  :mod:`lmbook.word2vec` and :mod:`lmbook.fasttext`) on sentences of words, after subsampling frequent
  words: word w is kept with probability min(1, sqrt(t / f(w))) (Mikolov et al. 2013b), f = relative
  frequency. Negatives are drawn from the counts raised to ``power`` (3/4).
- :class:`WordVectors` holds the result and answers cosine-similarity queries; fastText vectors also cover
  words never seen in training.
- Evaluating vectors: :func:`analogy` (a : b :: c : ?, by 3CosAdd) and the word-embedding association test
  (:func:`weat_scores`, :func:`weat_test`: effect size and permutation p-value, Caliskan et al. 2017).
- :func:`fit_sgns_to_counts` (SGNS's optimum is shifted PMI) lives in :mod:`lmbook.word2vec`; re-exported here.

Conventions: words are lowercased tokens of ``lmbook.data.sentences`` made of letters, digits and
underscores. Word vectors are the centre ("input") vectors; cosine similarity compares them.

Left out on purpose: GloVe, hogwild multi-threaded SGD, learning-rate decay, phrase detection.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, replace

import numpy as np
import torch

from . import validate
from .fasttext import FastText, char_ngrams, ngram_bucket, ngram_index
from .utils import progress
from .word2vec import (  # noqa: F401
    CBOW,
    SkipGram,
    _check_sentences,
    _one_thread,
    _shifted_pmi,
    build_vocab,
    cbow_examples,
    fit_sgns_to_counts,
    skipgram_pairs,
)

__all__ = ["Word2VecConfig", "WordVectors", "train_word2vec", "analogy", "weat_scores", "weat_test"]

MODELS = ("skipgram", "cbow", "fasttext")


@dataclass
class Word2VecConfig:
    model: str = "skipgram"  # "skipgram" (negative sampling), "cbow" (full softmax) or "fasttext"
    dim: int = 50  # embedding size d
    window: int = 4  # context words on each side
    negatives: int = 5  # K negatives per positive pair (skip-gram, fastText)
    power: float = 0.75  # negatives ~ count^power
    min_count: int = 5  # rarer words are dropped from the vocabulary
    subsample: float = 1e-3  # t of frequent-word subsampling; 0 turns it off
    epochs: int = 5
    batch_size: int = 4096
    lr: float = 0.02  # Adam
    n_min: int = 3  # fastText n-gram lengths
    n_max: int = 5
    buckets: int = 20000  # fastText hash buckets (fastText's default is 2,000,000)
    seed: int = 0

    def __post_init__(self):
        _check_config(self)


@dataclass
class WordVectors:
    """Trained word vectors: ``vectors[i]`` is the vector of ``words[i]`` (chapter 6)."""

    words: list[str]
    vectors: np.ndarray  # (V, d)
    counts: np.ndarray  # (V,)
    losses: list[float] = field(default_factory=list)  # mean training loss per epoch
    ngram_vectors: np.ndarray | None = None  # fastText: (buckets, d)
    config: Word2VecConfig | None = None

    def __post_init__(self):
        _check_word_vectors(self)
        self.index = {w: i for i, w in enumerate(self.words)}
        norms = np.linalg.norm(self.vectors, axis=1, keepdims=True)
        self._unit = self.vectors / np.maximum(norms, 1e-12)

    def vector(self, word: str) -> np.ndarray:
        """The vector of ``word``; for fastText also of an unseen word (the mean of its n-gram vectors)."""
        _check_known(self, word)
        if word in self.index:
            return self.vectors[self.index[word]]
        c = self.config
        grams = [ngram_bucket(g, c.buckets) for g in char_ngrams(word, c.n_min, c.n_max)]
        return self.ngram_vectors[grams].mean(0)

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity a . b / (|a| |b|) of two words' vectors."""
        _check_known(self, a, "a"), _check_known(self, b, "b")
        va, vb = self.vector(a), self.vector(b)
        return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb) + 1e-12))

    def nearest(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` vocabulary words most cosine-similar to ``word`` (itself excluded), best first."""
        _check_k(k)
        v = self.vector(word)
        sims = self._unit @ (v / (np.linalg.norm(v) + 1e-12))  # (V,)
        order = [i for i in np.argsort(-sims, kind="stable") if self.words[i] != word]
        return [(self.words[i], round(float(sims[i]), 6)) for i in order[:k]]


def train_word2vec(sentences: list[list[str]], config: Word2VecConfig | None = None, device=None,
                   **overrides) -> WordVectors:
    """Train skip-gram (SGNS), CBOW or fastText vectors on ``sentences`` (lists of words), chapter 6.

    ``train_word2vec(sents, model="cbow", epochs=2)`` overrides fields of :class:`Word2VecConfig`.
    Deterministic for a given seed on a given device (on the CPU it runs on one thread).
    """
    _check_train_word2vec(sentences, config, device, overrides)
    config = replace(config or Word2VecConfig(), **overrides)  # a copy: the caller's config is left as it was
    with _one_thread():
        return _train(sentences, config, torch.device(device or "cpu"))


def _train(sentences, config: Word2VecConfig, device: torch.device) -> WordVectors:
    words, counts = build_vocab(sentences, config.min_count)
    index = {w: i for i, w in enumerate(words)}
    rng = np.random.default_rng(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)
    model = _build_model(config, words).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    noise = torch.tensor(counts, dtype=torch.float64) ** config.power  # (V,)
    noise /= noise.sum()
    losses = []
    for _ in progress(range(config.epochs), desc=config.model):
        ids = _to_ids(sentences, index, counts, config.subsample, rng)  # a fresh subsample each epoch
        losses.append(_epoch(model, optimizer, ids, noise, gen, config, device))
    with torch.no_grad():
        vectors = model.center.weight[:len(words)].detach() if config.model == "cbow" else model.word_vectors(
            torch.arange(len(words), device=device))
        ngram_vectors = model.ngrams.weight[:-1].detach().cpu().numpy() if config.model == "fasttext" else None
    return WordVectors(words, vectors.cpu().numpy(), counts, losses, ngram_vectors, config)


def _build_model(config: Word2VecConfig, words: list[str]):
    if config.model == "cbow":
        return CBOW(len(words), config.dim)
    if config.model == "fasttext":
        grams = ngram_index(words, config.buckets, config.n_min, config.n_max)  # (V, M)
        return FastText(len(words), config.dim, config.buckets, grams)
    return SkipGram(len(words), config.dim)


def _to_ids(sentences, index: dict[str, int], counts: np.ndarray, subsample: float, rng) -> list[np.ndarray]:
    """Sentences as id arrays; out-of-vocabulary words are dropped, frequent words randomly discarded with
    probability 1 - sqrt(t / f(w)) (Mikolov et al. 2013b), f = relative frequency, t = ``subsample``."""
    keep_prob = np.ones(len(counts))
    if subsample > 0:
        freq = counts / counts.sum()
        keep_prob = np.minimum(1.0, np.sqrt(subsample / freq))
    out = []
    for s in sentences:
        ids = np.array([index[w] for w in s if w in index], dtype=np.int64)
        if subsample > 0 and len(ids):
            ids = ids[rng.random(len(ids)) < keep_prob[ids]]
        if len(ids) >= 2:
            out.append(ids)
    return out


def _epoch(model, optimizer, ids: list[np.ndarray], noise, gen, config: Word2VecConfig, device) -> float:
    """One pass over the examples of ``ids`` in random order, with fresh negatives; the mean loss."""
    if config.model == "cbow":
        ctx, tgt = cbow_examples(ids, config.window)
        data = (torch.from_numpy(ctx), torch.from_numpy(tgt))
    else:
        pairs = torch.from_numpy(skipgram_pairs(ids, config.window))  # (N, 2)
        data = (pairs[:, 0], pairs[:, 1])
    _check_examples(len(data[0]))
    order = torch.randperm(len(data[0]), generator=gen)
    total, n = 0.0, 0
    for start in range(0, len(order), config.batch_size):
        batch = order[start:start + config.batch_size]
        if config.model == "cbow":
            loss = model(data[0][batch].to(device), data[1][batch].to(device))
        else:
            neg = torch.multinomial(noise, len(batch) * config.negatives, replacement=True, generator=gen)
            loss = model(data[0][batch].to(device), data[1][batch].to(device),
                         neg.view(len(batch), config.negatives).to(device))  # (B, K)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total, n = total + loss.item() * len(batch), n + len(batch)
    return total / n


def analogy(vectors: np.ndarray, a: int, b: int, c: int, k: int = 1) -> list[int]:
    """a : b :: c : ?  by 3CosAdd (Mikolov et al. 2013c): the k rows x of ``vectors`` (V, d) with the largest
    cos(x, b - a + c) on unit vectors, a, b and c themselves excluded (as is usual), best first (chapter 6)."""
    _check_analogy(vectors, a, b, c, k)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # (V, d)
    scores = unit @ (unit[b] - unit[a] + unit[c])  # (V,): cos up to the query's norm, which ranks the same
    scores[[a, b, c]] = -np.inf
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def weat_scores(targets: np.ndarray, attr_a: np.ndarray, attr_b: np.ndarray) -> np.ndarray:
    """s(w) = mean_a cos(w, a) - mean_b cos(w, b) for each row w of targets (n, d): how much closer w is to
    attribute set A (m, d) than to B (m', d) (Caliskan et al. 2017). Float64, shape (n,)."""
    _check_weat(targets, attr_a, attr_b)
    unit = [np.asarray(m, np.float64) / np.linalg.norm(m, axis=1, keepdims=True) for m in (targets, attr_a, attr_b)]
    return (unit[0] @ unit[1].T).mean(1) - (unit[0] @ unit[2].T).mean(1)  # (n,)


def weat_test(x: np.ndarray, y: np.ndarray, attr_a: np.ndarray, attr_b: np.ndarray) -> tuple[float, float]:
    """WEAT: effect size d = (mean_X s - mean_Y s) / std_{X u Y} s (sample std), and the one-sided
    permutation p-value: the share of the equal-size splits (X', Y') of X u Y whose sum_X' s - sum_Y' s is
    at least the observed one (all splits enumerated: keep |X u Y| small, at most 20)."""
    _check_weat_sets(x, y)
    s = weat_scores(np.concatenate([x, y]), attr_a, attr_b)  # (n_x + n_y,)
    n_x, total = len(x), s.sum()
    effect = (s[:n_x].mean() - s[n_x:].mean()) / s.std(ddof=1)
    observed = 2 * s[:n_x].sum() - total  # sum_X s - sum_Y s
    stats = [2 * s[list(split)].sum() - total for split in itertools.combinations(range(len(s)), n_x)]
    p_value = np.mean(np.array(stats) >= observed - 1e-12)
    return float(effect), float(p_value)

# ----- checks ------------------------------------------------------------------------------------------

def _check_config(c: Word2VecConfig) -> None:
    validate.choice("model", c.model, MODELS)
    for name in ("dim", "window", "negatives", "min_count", "epochs", "batch_size", "n_min", "n_max", "buckets"):
        validate.integer(name, getattr(c, name), low=1)
    validate.integer("seed", c.seed, low=0)
    validate.number("power", c.power, low=0)
    validate.number("subsample", c.subsample, low=0, high=1)
    validate.number("lr", c.lr, low=0, low_open=True)
    if c.n_min > c.n_max:
        raise ValueError(f"n_min must be <= n_max, got n_min={c.n_min}, n_max={c.n_max}")


def _check_train_word2vec(sentences, config, device, overrides) -> None:
    _check_sentences(sentences, 1)
    if config is not None and not isinstance(config, Word2VecConfig):
        raise TypeError(f"config must be a Word2VecConfig or None, got {validate.describe(config)}")
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a str such as 'cpu', a torch.device or None, got {validate.describe(device)}")
    if isinstance(device, str):
        try:
            torch.device(device)
        except RuntimeError:
            raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}") from None
    names = [f.name for f in fields(Word2VecConfig)]
    for name in overrides:
        if name not in names:
            raise ValueError(f"unknown option {name!r}; Word2VecConfig has {names}")


def _check_examples(n: int) -> None:
    if n == 0:
        raise ValueError("sentences give no training examples: after dropping rare words (min_count) and "
                         "subsampling, no sentence has 2 vocabulary words; give longer sentences or more text")


def _check_array(name: str, value, ndim: int, kinds: str) -> None:
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype.kind not in kinds:
        what = "floating-point" if kinds == "f" else "integer"
        raise TypeError(f"{name} must be a {ndim}-D {what} numpy array, got {validate.describe(value)}")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise ValueError(f"{name} must be finite, but it holds NaN or inf")


def _check_word_vectors(wv: WordVectors) -> None:
    validate.strings("words", wv.words)
    if len(set(wv.words)) != len(wv.words):
        raise ValueError("words must be distinct, but a word occurs twice")
    _check_array("vectors", wv.vectors, 2, "f")
    _check_array("counts", wv.counts, 1, "iu")
    if not wv.vectors.shape[1] or (wv.counts < 0).any():
        raise ValueError(f"vectors must have d >= 1 columns and counts must be >= 0, got vectors of shape "
                         f"{wv.vectors.shape} and counts from {wv.counts.min(initial=0)}")
    if len(wv.vectors) != len(wv.words) or len(wv.counts) != len(wv.words):
        raise ValueError(f"vectors (V, d) and counts (V,) must have one row per word (V = {len(wv.words)}), "
                         f"got {wv.vectors.shape} and {wv.counts.shape}")
    validate.sequence("losses", wv.losses, empty=True, what="numbers")
    for i, loss in enumerate(wv.losses):
        validate.number(f"losses[{i}]", loss)
    if wv.config is not None and not isinstance(wv.config, Word2VecConfig):
        raise TypeError(f"config must be a Word2VecConfig or None, got {validate.describe(wv.config)}")
    if wv.ngram_vectors is not None:
        _check_array("ngram_vectors", wv.ngram_vectors, 2, "f")
        if wv.config is None or wv.ngram_vectors.shape != (wv.config.buckets, wv.vectors.shape[1]):
            raise ValueError(f"ngram_vectors must be (config.buckets, d) and come with its config, got "
                             f"{wv.ngram_vectors.shape} with config {wv.config}")


def _check_known(wv: WordVectors, word, name: str = "word") -> None:
    validate.string(name, word)
    if word in wv.index:
        return
    if wv.ngram_vectors is None:
        raise ValueError(f"{name}={word!r} is not in the vocabulary of {len(wv.words)} words (min_count="
                         f"{wv.config.min_count if wv.config else '?'}); fastText vectors cover OOV words")
    if not char_ngrams(word, wv.config.n_min, wv.config.n_max):
        raise ValueError(f"{name}={word!r} is not in the vocabulary and has no character n-grams of length "
                         f"{wv.config.n_min}..{wv.config.n_max}, so fastText has no vector for it")


def _check_k(k) -> None:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be a positive int, got {validate.describe(k)}")
    if k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


def _check_analogy(vectors, a, b, c, k) -> None:
    _check_array("vectors", vectors, 2, "f")
    if not vectors.size:
        raise ValueError(f"vectors must be a non-empty (V, d) array, got shape {vectors.shape}")
    for name, value in (("a", a), ("b", b), ("c", c)):
        validate.integer(name, value, low=0, high=len(vectors) - 1)
    if len({a, b, c}) < 3:
        raise ValueError(f"a, b and c must be three different rows (a : b :: c : ?), got a={a}, b={b}, c={c}")
    validate.integer("k", k, low=1, high=max(1, len(vectors) - 3))


def _check_weat(targets, attr_a, attr_b) -> None:
    for name, value in (("targets", targets), ("attr_a", attr_a), ("attr_b", attr_b)):
        _check_array(name, value, 2, "f")
        if not len(value) or (np.linalg.norm(value, axis=1) == 0).any():
            raise ValueError(f"{name} must hold at least one non-zero vector per row, got shape {value.shape}")
    if not targets.shape[1] == attr_a.shape[1] == attr_b.shape[1]:
        raise ValueError(f"targets, attr_a and attr_b must share the width d, got {targets.shape[1]}, "
                         f"{attr_a.shape[1]} and {attr_b.shape[1]}")


def _check_weat_sets(x, y) -> None:
    for name, value in (("x", x), ("y", y)):
        _check_array(name, value, 2, "f")
        if not value.shape[1]:
            raise ValueError(f"{name} must hold vectors of width d >= 1, got shape {value.shape}")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must share the width d, got {x.shape[1]} and {y.shape[1]}")
    if len(x) < 2 or len(y) < 2 or len(x) + len(y) > 20:
        raise ValueError(f"x and y must hold at least 2 vectors each and at most 20 together (every split is "
                         f"enumerated), got {len(x)} and {len(y)}")
