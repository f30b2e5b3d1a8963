"""Chapter 6: the word2vec models and their training examples.

- **Skip-gram with negative sampling (SGNS)**: predict each context word c from the centre word w. For
  one (w, c) pair and K negatives n_1..n_K drawn from the unigram distribution raised to the 3/4 power,
  maximise  log s(u_c . v_w) + sum_k log s(-u_{n_k} . v_w)  (s = sigmoid): a *sum* of log-sigmoids, one
  binary classification per word, not a product. :func:`sgns_loss` is its negative, averaged over a batch;
  :class:`SkipGram` holds the two tables v (centre) and u (context).
- **CBOW**: predict the centre word from the mean of its context vectors, with a full softmax (:class:`CBOW`).
- SGNS as matrix factorisation: with enough dimensions its optimum has u_c . v_w = PMI(w, c) - log K
  (Levy & Goldberg 2014); :func:`fit_sgns_to_counts` optimises the expected objective on a count matrix.
- The examples: the vocabulary (:func:`build_vocab`), (centre, context) pairs (:func:`skipgram_pairs`) and
  CBOW's (context window, centre) rows (:func:`cbow_examples`), inside sentences of word ids.

Conventions: windows do not cross sentences; the window size is fixed (word2vec samples it per word); a
negative that happens to equal the positive word is kept. Training loops, subsampling and the trained
vectors are in :mod:`lmbook.embeddings`, fastText in :mod:`lmbook.fasttext`, the hierarchical softmax in
:mod:`lmbook.hierarchical_softmax`. Left out on purpose: GloVe, hogwild multi-threaded SGD.
"""

from __future__ import annotations

import math
from collections import Counter
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import validate

__all__ = ["build_vocab", "skipgram_pairs", "cbow_examples", "sgns_loss", "SkipGram", "CBOW", "fit_sgns_to_counts"]


def build_vocab(sentences: list[list[str]], min_count: int = 5) -> tuple[list[str], np.ndarray]:
    """Words seen at least ``min_count`` times, most frequent first (ties alphabetical), and their counts (V,).

    ``sentences`` is a list of sentences, each a list of words (chapter 6).
    """
    _check_sentences(sentences, min_count)
    counts = Counter(w for s in sentences for w in s)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    _check_vocab_not_empty(words, min_count)
    return words, np.array([counts[w] for w in words], dtype=np.int64)


def skipgram_pairs(sentences_ids: list[np.ndarray], window: int) -> np.ndarray:
    """All (centre, context) id pairs with 0 < |i - j| <= window inside each sentence: shape (N, 2).

    ``sentences_ids`` is a list of 1-D integer arrays of word ids (chapter 6).
    """
    _check_sentences_ids(sentences_ids, window)
    pairs = []
    for ids in sentences_ids:
        for offset in range(1, window + 1):
            if offset < len(ids):
                pairs.append(np.stack([ids[:-offset], ids[offset:]], 1))  # (n, 2): context to the right
                pairs.append(np.stack([ids[offset:], ids[:-offset]], 1))  # (n, 2): context to the left
    return np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)


def cbow_examples(sentences_ids: list[np.ndarray], window: int) -> tuple[np.ndarray, np.ndarray]:
    """CBOW examples: contexts (N, 2 window) padded with -1 where the sentence ends, and centres (N,).

    ``sentences_ids`` is a list of 1-D integer arrays of word ids (chapter 6).
    """
    _check_sentences_ids(sentences_ids, window)
    contexts, centres = [], []
    for ids in sentences_ids:
        padded = np.concatenate([np.full(window, -1), ids, np.full(window, -1)])
        for i in range(len(ids)):
            ctx = np.concatenate([padded[i:i + window], padded[i + window + 1:i + 2 * window + 1]])
            contexts.append(ctx)
            centres.append(ids[i])
    return np.array(contexts, dtype=np.int64).reshape(-1, 2 * window), np.array(centres, dtype=np.int64)


def sgns_loss(center: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
    """Skip-gram negative-sampling loss, averaged over the batch (chapter 6).

    loss = -mean_b [ log s(u_+ . v) + sum_k log s(-u_k . v) ],  s = sigmoid.
    Shapes: center v (B, d), positive u_+ (B, d), negatives u_k (B, K, d). ``F.logsigmoid`` keeps it
    finite for large scores, where log(sigmoid(x)) would give log(0).
    """
    _check_sgns(center, positive, negatives)
    pos = (center * positive).sum(-1)  # (B,)
    neg = torch.einsum("bkd,bd->bk", negatives, center)  # (B, K)
    return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()


class SkipGram(nn.Module):
    """Skip-gram: two tables, centre vectors v (the word vectors) and context vectors u, both (V, d).

    Initialised as in word2vec: v uniform in [-0.5/d, 0.5/d], u zero. Chapter 6; fastText
    (:class:`lmbook.fasttext.FastText`) changes only :meth:`word_vectors`.
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        _check_sizes(vocab_size=vocab_size, dim=dim)
        self.vocab_size = vocab_size
        self.center = nn.Embedding(vocab_size, dim)
        self.context = nn.Embedding(vocab_size, dim)
        nn.init.uniform_(self.center.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.context.weight)

    def word_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        """Centre vectors v of the word ids (B,) -> (B, d)."""
        validate.token_ids("ids", ids, self.vocab_size, ndim=1)
        return self.center(ids)

    def forward(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """The SGNS loss for centre ids (B,), context ids (B,) and negative ids (B, K)."""
        _check_skipgram_ids(center, context, negatives, self.vocab_size)
        return sgns_loss(self.word_vectors(center), self.context(context), self.context(negatives))


class CBOW(nn.Module):
    """Continuous bag of words: h = mean of the context vectors, scores u = W' h, softmax over V.

    loss = -log softmax(W' h)[centre], averaged over the batch. Word order inside the window is ignored.
    Chapter 6.
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        _check_sizes(vocab_size=vocab_size, dim=dim)
        self.center = nn.Embedding(vocab_size + 1, dim, padding_idx=vocab_size)  # row V pads short contexts
        self.output = nn.Linear(dim, vocab_size, bias=False)
        nn.init.uniform_(self.center.weight, -0.5 / dim, 0.5 / dim)
        with torch.no_grad():
            self.center.weight[vocab_size].zero_()
        nn.init.zeros_(self.output.weight)

    def forward(self, contexts: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
        """contexts (B, C) with -1 for padding, centres (B,) -> mean cross-entropy."""
        _check_cbow_ids(contexts, centres, self.center.padding_idx)
        pad = self.center.padding_idx
        ids = torch.where(contexts < 0, torch.full_like(contexts, pad), contexts)
        n = (contexts >= 0).sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
        h = self.center(ids).sum(1) / n  # (B, d)
        return F.cross_entropy(self.output(h), centres)


@contextmanager
def _one_thread():
    """Run torch on one CPU thread, then restore the setting. Word2vec's batches are tiny: a second thread
    only adds synchronisation (and on a busy machine, much more), and the result stops depending on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def fit_sgns_to_counts(counts, dim: int, negatives: int = 5, steps: int = 2000, lr: float = 0.05,
                       seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimise the expected SGNS loss on a pair-count matrix (V, V') by full-batch Adam (chapter 6).

    loss(W, C) = -sum_{w,c} [ #(w,c) log s(W_w . C_c) + K #(w) #(c) / |D| log s(-W_w . C_c) ]
    with #(w), #(c) the row and column sums and |D| the total (negatives drawn from the context
    marginal, power 1). Its optimum, where the dimension allows, is W_w . C_c = PMI(w, c) - log K.
    Returns W (V, dim) and C (V', dim), in float64.
    """
    _check_fit_sgns(counts, dim, negatives, steps, lr, seed)
    counts = torch.as_tensor(np.asarray(counts), dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    W = (torch.randn(counts.shape[0], dim, generator=g, dtype=torch.float64) * 0.1).requires_grad_()
    C = (torch.randn(counts.shape[1], dim, generator=g, dtype=torch.float64) * 0.1).requires_grad_()
    expected_negatives = negatives * torch.outer(counts.sum(1), counts.sum(0)) / counts.sum()  # (V, V')
    optimizer = torch.optim.Adam([W, C], lr=lr)
    # A cosine decay to 0: at a constant rate Adam keeps moving by up to lr as the gradient vanishes, in
    # directions set by rounding, so the end point would differ between CPUs.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / steps)))
    with _one_thread():
        for _ in range(steps):
            x = W @ C.T  # (V, V')
            loss = -(counts * F.logsigmoid(x) + expected_negatives * F.logsigmoid(-x)).sum() / counts.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    return W.detach(), C.detach()


def _shifted_pmi(counts, negatives: int) -> np.ndarray:
    """PMI(w, c) - log K from a count matrix, -inf where the count is 0 (used by the tests)."""
    counts = np.asarray(counts, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(counts * counts.sum() / np.outer(counts.sum(1), counts.sum(0))) - math.log(negatives)


# ----- checks ------------------------------------------------------------------------------------------

def _check_sentences(sentences, min_count) -> None:
    """A list of sentences, each a list of str words; a str is never read as a list of characters."""
    if isinstance(sentences, str):
        raise TypeError(f"sentences must be a list of sentences (lists of words), got the str {sentences[:40]!r}: "
                        "split it into sentences of words first (lmbook.data.sentences does)")
    validate.sequence("sentences", sentences, what="sentences (lists of words)")
    for k, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise TypeError(f"sentences[{k}] must be a list of words, got the str {sentence[:40]!r}: "
                            "split it into words first (lmbook.data.sentences does)")
        validate.strings(f"sentences[{k}]", sentence, empty=True)
    validate.integer("min_count", min_count, low=1)


def _check_vocab_not_empty(words, min_count) -> None:
    if not words:
        raise ValueError(f"no word occurs min_count={min_count} times; lower min_count or give more text")


def _check_sentences_ids(sentences_ids, window) -> None:
    validate.sequence("sentences_ids", sentences_ids, empty=True, what="1-D integer arrays of word ids")
    for k, ids in enumerate(sentences_ids):
        if not isinstance(ids, np.ndarray) or ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise TypeError(f"sentences_ids[{k}] must be a 1-D integer numpy array of word ids, "
                            f"got {validate.describe(ids)}")
        if ids.size and ids.min() < 0:
            raise ValueError(f"sentences_ids[{k}] must hold word ids >= 0, found {ids.min()}")
    validate.integer("window", window, low=1)


def _check_sizes(**sizes) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be a positive int, got {validate.describe(value)}")
        if value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_sgns(center, positive, negatives) -> None:
    for name, value in (("center", center), ("positive", positive), ("negatives", negatives)):
        validate.tensor(name, value, finite=False)
        if not _all_finite(value):
            raise ValueError(f"{name} must be finite, but it holds NaN or inf")
    if center.dim() != 2 or positive.shape != center.shape:
        raise ValueError(f"center and positive must both be (B, d), got {tuple(center.shape)} and "
                         f"{tuple(positive.shape)}")
    if negatives.dim() != 3 or negatives.shape[0] != center.shape[0] or negatives.shape[2] != center.shape[1]:
        raise ValueError(f"negatives must be (B, K, d) = ({center.shape[0]}, K, {center.shape[1]}), "
                         f"got {tuple(negatives.shape)}")
    if not center.shape[0] or not negatives.shape[1]:
        raise ValueError(f"center must hold B >= 1 rows and negatives K >= 1 per row, got shapes "
                         f"{tuple(center.shape)} and {tuple(negatives.shape)}")
    if not center.dtype == positive.dtype == negatives.dtype:
        raise TypeError(f"center, positive and negatives must share one dtype, got {center.dtype}, "
                        f"{positive.dtype} and {negatives.dtype}")


def _all_finite(x: torch.Tensor) -> bool:
    """Whether every entry is finite. A finite sum proves it in one pass (a NaN or inf makes the sum NaN or
    inf); only a sum that is not finite, NaN or an overflow, needs the exact test. Called once per batch."""
    return bool(torch.isfinite(x.detach().sum())) or bool(torch.isfinite(x).all())


def _check_skipgram_ids(center, context, negatives, vocab_size) -> None:
    validate.token_ids("center", center, vocab_size, ndim=1)
    validate.token_ids("context", context, vocab_size, ndim=1)
    validate.token_ids("negatives", negatives, vocab_size, ndim=2)
    if not len(center) == len(context) == len(negatives):
        raise ValueError(f"center (B,), context (B,) and negatives (B, K) must share B, got "
                         f"{tuple(center.shape)}, {tuple(context.shape)} and {tuple(negatives.shape)}")


def _check_cbow_ids(contexts, centres, vocab_size) -> None:
    validate.tensor("contexts", contexts, ndim=2, kind="int")
    if contexts.numel() and (contexts.min() < -1 or contexts.max() >= vocab_size):
        raise ValueError(f"contexts must hold word ids in [0, {vocab_size - 1}] or -1 for padding, found "
                         f"{contexts[(contexts < -1) | (contexts >= vocab_size)][0].item()}")
    validate.token_ids("centres", centres, vocab_size, ndim=1)
    if len(centres) != len(contexts) or not len(centres):
        raise ValueError(f"contexts (B, C) and centres (B,) must share B >= 1, got {tuple(contexts.shape)} "
                         f"and {tuple(centres.shape)}")


def _check_fit_sgns(counts, dim, negatives, steps, lr, seed) -> None:
    array = counts.numpy(force=True) if isinstance(counts, torch.Tensor) else counts
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "iuf":
        raise TypeError(f"counts must be a 2-D numpy array or tensor of pair counts, got {validate.describe(counts)}")
    if array.ndim != 2 or not array.size:
        raise ValueError(f"counts must be a non-empty 2-D matrix (V, V'), got shape {array.shape}")
    if not np.isfinite(array).all() or (array < 0).any() or array.sum() == 0:
        raise ValueError("counts must be finite and >= 0, with at least one pair")
    for name, value in (("dim", dim), ("negatives", negatives), ("steps", steps)):
        validate.integer(name, value, low=1)
    validate.number("lr", lr, low=0, low_open=True)
    validate.integer("seed", seed, low=0)
