"""Chapter 6: word embeddings learned from co-occurrence: training word2vec and fastText, and using the vectors.

- :func:`train_word2vec` trains skip-gram with negative sampling, CBOW or fastText (the models are in
  :mod:`lmbook.word2vec` and :mod:`lmbook.fasttext`) on sentences of words, after subsampling frequent
  words: word w is kept with probability min(1, sqrt(t / f(w))) (Mikolov et al. 2013b), f = relative
  frequency. Negatives are drawn from the counts raised to ``power`` (3/4).
- :class:`WordVectors` holds the result and answers cosine-similarity queries; fastText vectors also cover
  words never seen in training.
- Evaluating the vectors (analogies, the association test) is in :mod:`lmbook.embedding_eval`; re-exported here.
- :func:`fit_sgns_to_counts` (SGNS's optimum is shifted PMI) lives in :mod:`lmbook.word2vec`; re-exported here.

Conventions: words are lowercased tokens of ``lmbook.data.sentences`` made of letters, digits and
underscores. Word vectors are the centre ("input") vectors; cosine similarity compares them.

Left out on purpose: GloVe, hogwild multi-threaded SGD, learning-rate decay, phrase detection.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np
import torch

from . import validate
from .embedding_eval import analogy, weat_scores, weat_test  # noqa: F401
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

__all__ = ["Word2VecConfig", "WordVectors", "train_word2vec"]

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
    held_out_losses: list[float] = field(default_factory=list)  # CBOW: held-out cross-entropy after each epoch

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
                   held_out: list[list[str]] | None = None, **overrides) -> WordVectors:
    """Train skip-gram (SGNS), CBOW or fastText vectors on ``sentences`` (lists of words), chapter 6.

    ``train_word2vec(sents, model="cbow", epochs=2)`` overrides fields of :class:`Word2VecConfig`.
    ``held_out`` (CBOW only): sentences whose mean cross-entropy, on one fixed subsample, is measured after
    every epoch into ``held_out_losses``. Deterministic for a given seed on a given device (one CPU thread).
    """
    _check_train_word2vec(sentences, config, device, overrides)
    config = replace(config or Word2VecConfig(), **overrides)  # a copy: the caller's config is left as it was
    _check_held_out(held_out, config)
    with _one_thread():
        return _train(sentences, config, torch.device(device or "cpu"), held_out)


def _train(sentences, config: Word2VecConfig, device: torch.device, held_out=None) -> WordVectors:
    words, counts = build_vocab(sentences, config.min_count)
    index = {w: i for i, w in enumerate(words)}
    rng = np.random.default_rng(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)
    model = _build_model(config, words).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    noise = torch.tensor(counts, dtype=torch.float64) ** config.power  # (V,)
    noise /= noise.sum()
    losses, held_losses = [], []
    held = held_out and _to_ids(held_out, index, counts, config.subsample, np.random.default_rng(config.seed + 1))
    for _ in progress(range(config.epochs), desc=config.model):
        ids = _to_ids(sentences, index, counts, config.subsample, rng)  # a fresh subsample each epoch
        losses.append(_epoch(model, optimizer, ids, noise, gen, config, device))
        if held:
            with torch.no_grad():
                ctx, tgt = cbow_examples(held, config.window)
                held_losses.append(model(torch.from_numpy(ctx).to(device), torch.from_numpy(tgt).to(device)).item())
    with torch.no_grad():
        vectors = model.center.weight[:len(words)].detach() if config.model == "cbow" else model.word_vectors(
            torch.arange(len(words), device=device))
        ngram_vectors = model.ngrams.weight[:-1].detach().cpu().numpy() if config.model == "fasttext" else None
    return WordVectors(words, vectors.cpu().numpy(), counts, losses, ngram_vectors, config, held_losses)


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


def _check_held_out(held_out, config) -> None:
    if held_out is not None:
        try:
            _check_sentences(held_out, 1)
        except (TypeError, ValueError) as err:  # the same rules as for sentences, under this argument's name
            raise type(err)(str(err).replace("sentences", "held_out", 1)) from None
        if config.model != "cbow":
            raise ValueError(f"held_out is measured for model='cbow' only, got model={config.model!r}")


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
    validate.sequence("held_out_losses", wv.held_out_losses, empty=True, what="numbers")
    for i, loss in enumerate(wv.held_out_losses):
        validate.number(f"held_out_losses[{i}]", loss)
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
