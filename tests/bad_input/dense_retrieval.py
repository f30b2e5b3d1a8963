"""Bad-input cases for lmbook.dense_retrieval (chapter 6): text vectors, cosine ranking and ranking measures."""

import numpy as np
import torch
from lmbook.dense_retrieval import (
    average_precision,
    cosine_rank,
    evaluate,
    hidden_states,
    mean_pooled_states,
    mean_vector,
)
from lmbook.model import Transformer, TransformerConfig

from ._case import Case


def _model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=20, context_length=16, d_model=8, n_layers=2, n_heads=2,
                                         dropout=0.0)).eval()


CASES = [
    Case("mean_vector", lambda: (mean_vector, {"tokens": ["a", "b"], "vectors": np.ones((3, 4)),
                                               "index": {"a": 0, "b": 2}}),
         ok={"tokens": {"empty"}}),  # documented: no known token gives the zero vector
    Case("hidden_states", lambda: (hidden_states, {"model": _model(), "ids": torch.tensor([1, 2, 3])})),
    Case("mean_pooled_states", lambda: (mean_pooled_states, {"model": _model(), "ids": torch.tensor([1, 2, 3]),
                                                             "layers": [0, 2]})),
    Case("cosine_rank", lambda: (cosine_rank, {"queries": np.ones((2, 4)), "docs": np.ones((5, 4))})),
    Case("average_precision", lambda: (average_precision, {"ranked": ["a", "b"], "relevant": {"a"}}),
         ok={"ranked": {"non_str_item", "empty"}}),  # as in lmbook.ranking: any hashable ids; [] retrieves nothing
    Case("evaluate", lambda: (evaluate, {"rankings": [["a", "b"]], "relevant_sets": [{"a"}]}),
         ok={"rankings": {"non_str_item"}}),  # documented: any hashable document ids, ints and str alike
]
