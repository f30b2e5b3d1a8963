"""Bad-input cases for lmbook.metrics (chapter 1): scoring a language model."""

import numpy as np
import torch
from lmbook import metrics

from ._case import Case


def _scored(**more):
    """Logits (B=2, T=3, V=5), the targets they score, and the ignore_index."""
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    return {"logits": logits, "targets": torch.tensor([[0, 1, 2], [3, 4, 0]]), "ignore_index": -100, **more}


IGNORE_INDEX_OK = {"zero"}  # any int may mark the positions not to score (0 is a common pad id)
DISTRIBUTION_OK = {
    "not_array",  # array-like: a list of probabilities is documented input
    "extra_dim",  # works along the last axis: a batch of distributions is documented input
}

CASES = [
    Case("cross_entropy", lambda: (metrics.cross_entropy, _scored()), ok={"ignore_index": IGNORE_INDEX_OK}),
    Case("perplexity", lambda: (metrics.perplexity, _scored()), ok={"ignore_index": IGNORE_INDEX_OK}),
    Case("perplexity_from_probs", lambda: (metrics.perplexity_from_probs, {"token_probs": [0.5, 0.25, 0.125]})),
    Case("entropy", lambda: (metrics.entropy, {"p": np.array([0.5, 0.25, 0.25]), "base": 2.0}),
         ok={"p": DISTRIBUTION_OK}),
    Case("kl_divergence",
         lambda: (metrics.kl_divergence, {"p": np.array([0.5, 0.25, 0.25]), "q": np.array([0.25, 0.5, 0.25]),
                                          "base": 2.0}),
         ok={"p": DISTRIBUTION_OK, "q": DISTRIBUTION_OK}),
    Case("smoothed_targets",
         lambda: (metrics.smoothed_targets, {"targets": torch.tensor([0, 2, 1]), "num_classes": 4, "epsilon": 0.1,
                                             "dtype": torch.float64}),
         ok={"targets": {"extra_dim"},  # targets of any shape (...) give (..., K)
             "epsilon": {"zero"}}),  # eps = 0 gives the one-hot targets (documented range [0, 1])
    Case("label_smoothed_cross_entropy",
         lambda: (metrics.label_smoothed_cross_entropy, _scored(epsilon=0.1)),
         ok={"epsilon": {"zero"},  # eps = 0 is plain cross-entropy (documented range [0, 1])
             "ignore_index": IGNORE_INDEX_OK}),
    Case("precision_recall_f1", lambda: (metrics.precision_recall_f1, {"tp": 3, "fp": 1, "fn": 2}),
         ok={"tp": {"zero"}, "fp": {"zero"}, "fn": {"zero"}}),  # zero counts are documented: a ratio 0/0 is 0
]

SKIP = {}
