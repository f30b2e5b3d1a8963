"""Chapter 6: fastText, word vectors built from character n-grams.

The input vector of a word is the mean of the vector of the word itself and of the vectors of its character
n-grams (:func:`char_ngrams`), each hashed into one of a fixed number of buckets (:func:`ngram_bucket`,
fastText's FNV-1a). So a word never seen in training still gets a vector, and inflections share parameters.
The rest is skip-gram with negative sampling: :class:`FastText` is :class:`lmbook.word2vec.SkipGram` with
another :meth:`~FastText.word_vectors`.

Left out on purpose: the paper's sum (lmbook takes the mean, as fastText's code does), subword-only
(no word vector) models, and quantisation.
"""

from __future__ import annotations

import torch
from torch import nn

from . import validate
from .word2vec import SkipGram

__all__ = ["char_ngrams", "ngram_bucket", "ngram_index", "FastText"]


def char_ngrams(word: str, n_min: int = 3, n_max: int = 6) -> list[str]:
    """The character n-grams of ``<word>`` for n_min <= n <= n_max, shortest first; ``<`` and ``>`` mark the
    word's ends, so the prefix "<pl" differs from the inside "pla". The whole word ``<word>`` is a separate
    feature, not one of these (fastText adds it too). "playing", n = 3: <pl pla lay ayi yin ing ng>.
    Chapter 6."""
    _check_char_ngrams(word, n_min, n_max)
    w = f"<{word}>"
    return [w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n + 1) if w[i:i + n] != w]


def ngram_bucket(ngram: str, buckets: int) -> int:
    """fastText's bucket of an n-gram: 32-bit FNV-1a of its UTF-8 bytes, modulo ``buckets`` (chapter 6).

    As in fastText's C++ code, each byte is sign-extended (read as a signed char) before the XOR, which
    differs from textbook FNV-1a for bytes >= 0x80.
    """
    _check_ngram_bucket(ngram, buckets)
    h = 2166136261
    for b in ngram.encode("utf-8"):
        h = (h ^ (b - 256 if b >= 128 else b)) & 0xFFFFFFFF
        h = (h * 16777619) & 0xFFFFFFFF
    return h % buckets


def ngram_index(words: list[str], buckets: int, n_min: int = 3, n_max: int = 6) -> torch.Tensor:
    """The bucket ids of each word's n-grams, as a (V, M) long tensor padded with -1 (M: the most n-grams)."""
    validate.strings("words", words)
    grams = [[ngram_bucket(g, buckets) for g in char_ngrams(w, n_min, n_max)] for w in words]
    index = torch.full((len(words), max(map(len, grams))), -1, dtype=torch.long)  # (V, M)
    for i, g in enumerate(grams):
        index[i, :len(g)] = torch.tensor(g)
    return index


class FastText(SkipGram):
    """Skip-gram whose centre vector of word w is the mean of v[w] and of the vectors of its n-gram buckets.

    ``ngram_index`` (V, M) holds the buckets of each word's n-grams, padded with -1 (see :func:`ngram_index`).
    The bucket vectors are initialised like v. Chapter 6.
    """

    def __init__(self, vocab_size: int, dim: int, buckets: int, ngram_index: torch.Tensor):
        super().__init__(vocab_size, dim)
        _check_fasttext(vocab_size, buckets, ngram_index)
        self.ngrams = nn.EmbeddingBag(buckets + 1, dim, mode="sum", padding_idx=buckets)  # the last row pads
        nn.init.uniform_(self.ngrams.weight, -0.5 / dim, 0.5 / dim)
        with torch.no_grad():
            self.ngrams.weight[buckets].zero_()
        index = ngram_index.clone()
        index[index < 0] = buckets
        self.register_buffer("ngram_index", index)

    def word_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        """(v[w] + sum of w's n-gram vectors) / (1 + number of n-grams), for word ids (B,) -> (B, d)."""
        validate.token_ids("ids", ids, self.vocab_size, ndim=1)
        v = self.center(ids)  # (B, d)
        unique, inverse = torch.unique(ids, return_inverse=True)  # compose each distinct word once
        grams = self.ngram_index[unique]  # (U, M)
        n = 1 + (grams != self.ngrams.padding_idx).sum(-1, keepdim=True)  # (U, 1): the word + its n-grams
        return (v + self.ngrams(grams)[inverse]) / n[inverse]


# ----- checks ------------------------------------------------------------------------------------------

def _check_char_ngrams(word, n_min, n_max) -> None:
    validate.string("word", word)
    validate.integer("n_min", n_min, low=1)
    validate.integer("n_max", n_max, low=1)
    if n_min > n_max:
        raise ValueError(f"need 1 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")


def _check_ngram_bucket(ngram, buckets) -> None:
    validate.string("ngram", ngram, empty=True)
    validate.integer("buckets", buckets, low=1)


def _check_fasttext(vocab_size, buckets, ngram_index) -> None:
    validate.integer("buckets", buckets, low=1)
    validate.tensor("ngram_index", ngram_index, kind="int", shape=(vocab_size, None))
    if ngram_index.numel() and (ngram_index.min() < -1 or ngram_index.max() >= buckets):
        raise ValueError(f"ngram_index must hold bucket ids in [0, {buckets - 1}] or -1 for padding, "
                         f"found {ngram_index.min().item()}..{ngram_index.max().item()}")
