"""Bad-input cases for lmbook.word2vec (chapter 6): the skip-gram and CBOW models and their examples."""

import numpy as np
import torch
from lmbook.word2vec import CBOW, SkipGram, build_vocab, cbow_examples, fit_sgns_to_counts, sgns_loss, skipgram_pairs

from ._case import Case

SENTENCES = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "ran"]]


def _sentences():
    return [list(s) for s in SENTENCES]


def _ids():
    return [np.array([0, 1, 2]), np.array([0, 3, 2, 1])]


def _vectors(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


CASES = [
    Case("build_vocab", lambda: (build_vocab, {"sentences": _sentences(), "min_count": 1})),
    Case("skipgram_pairs", lambda: (skipgram_pairs, {"sentences_ids": _ids(), "window": 2}),
         ok={"sentences_ids": {"empty"}}),  # no sentences give no pairs: an empty (0, 2) array
    Case("cbow_examples", lambda: (cbow_examples, {"sentences_ids": _ids(), "window": 2}),
         ok={"sentences_ids": {"empty"}}),  # no sentences give no examples
    Case("sgns_loss", lambda: (sgns_loss, {"center": _vectors(3, 4), "positive": _vectors(3, 4),
                                           "negatives": _vectors(3, 2, 4)})),
    Case("SkipGram", lambda: (SkipGram, {"vocab_size": 10, "dim": 4})),
    Case("SkipGram.word_vectors", lambda: (SkipGram(10, 4).word_vectors, {"ids": torch.tensor([1, 2, 2])})),
    Case("SkipGram.forward", lambda: (SkipGram(10, 4), {"center": torch.tensor([1, 2]), "context": torch.tensor([3, 4]),
                                                        "negatives": torch.tensor([[5, 6], [7, 8]])})),
    Case("CBOW", lambda: (CBOW, {"vocab_size": 6, "dim": 3})),
    Case("CBOW.forward", lambda: (CBOW(6, 3), {"contexts": torch.tensor([[1, 2, -1, 4], [0, -1, -1, 5]]),
                                               "centres": torch.tensor([3, 5])}),
         ok={"contexts": {"negative_id"}}),  # -1 pads a short context (documented); -2 and below are refused
    Case("fit_sgns_to_counts", lambda: (fit_sgns_to_counts, {"counts": np.array([[3, 1, 0], [1, 2, 4], [0, 5, 1]]),
                                                             "dim": 2, "negatives": 5, "steps": 5, "lr": 0.05,
                                                             "seed": 0}),
         kinds={"counts": ("not_array", "float_dtype", "negative_id", "extra_dim", "missing_dim", "none", "empty")},
         ok={"counts": {"float_dtype"}}),  # real-valued counts (weighted co-occurrences) are allowed
]

SKIP = {}
