"""Bad-input cases for lmbook.embedding_eval (chapter 6): analogies and the word-embedding association test."""

import numpy as np
from lmbook.embedding_eval import analogy, weat_scores, weat_test

from ._case import Case

RNG_VECTORS = np.random.default_rng(0).normal(size=(8, 5))

CASES = [
    Case("analogy", lambda: (analogy, {"vectors": np.eye(6), "a": 0, "b": 1, "c": 2, "k": 2})),
    Case("weat_scores", lambda: (weat_scores, {"targets": np.eye(4)[:2] + 0.1, "attr_a": np.eye(4)[2:] + 0.1,
                                               "attr_b": np.eye(4)[:1] + 0.2})),
    Case("weat_test", lambda: (weat_test, {"x": RNG_VECTORS[:2], "y": RNG_VECTORS[2:4], "attr_a": RNG_VECTORS[4:6],
                                           "attr_b": RNG_VECTORS[6:]})),
]

SKIP = {}
