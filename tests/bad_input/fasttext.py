"""Bad-input cases for lmbook.fasttext (chapter 6): character n-grams, their hash buckets, the model."""

import torch
from lmbook.fasttext import FastText, char_ngrams, ngram_bucket, ngram_index

from ._case import Case

WORDS = ["list", "lists", "is"]


def _index():
    return ngram_index(WORDS, 50, 3, 4)


CASES = [
    Case("char_ngrams", lambda: (char_ngrams, {"word": "playing", "n_min": 3, "n_max": 6}),
         kinds={"word": ("list", "none", "empty", "bytes")}),  # any other str is a word
    Case("ngram_bucket", lambda: (ngram_bucket, {"ngram": "<pl", "buckets": 1000}),
         kinds={"ngram": ("list", "none", "bytes")}),  # any str hashes; "" is FNV-1a's offset basis (tested)
    Case("ngram_index", lambda: (ngram_index, {"words": list(WORDS), "buckets": 50, "n_min": 3, "n_max": 4})),
    Case("FastText", lambda: (FastText, {"vocab_size": 3, "dim": 4, "buckets": 50, "ngram_index": _index()}),
         ok={"ngram_index": {"negative_id"}}),  # -1 pads a word with fewer n-grams (documented); -2 is refused
    Case("FastText.word_vectors", lambda: (FastText(3, 4, 50, _index()).word_vectors, {"ids": torch.tensor([0, 2])})),
]

SKIP = {}
