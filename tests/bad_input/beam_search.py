"""Bad-input cases for lmbook.beam_search (chapter 10)."""

import functools

import torch
from lmbook.beam_search import beam_search, best_of_n
from lmbook.model import Transformer, TransformerConfig

from ._case import Case


@functools.cache
def _model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, context_length=16)).eval()


CASES = [
    Case("beam_search", lambda: (beam_search, {"model": _model(), "prompt_ids": [1, 2, 3], "max_new_tokens": 3,
                                               "num_beams": 2, "length_penalty": 1.0, "eos_id": 4}),
         ok={"length_penalty": {"negative", "zero"},  # alpha <= 0 is documented: 0 ranks by raw log-probability
             "eos_id": {"zero"}}),  # token id 0 may be the end token
    Case("best_of_n", lambda: (best_of_n, {"model": _model(), "prompt_ids": [1, 2, 3], "n": 2, "max_new_tokens": 3,
                                           "scorer": None, "generator": torch.Generator().manual_seed(0)}),
         kinds={"scorer": ()}),  # None or a function: tests/test_decoding.py drives it by hand
]

SKIP = {}
