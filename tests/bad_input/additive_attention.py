"""Bad-input cases for lmbook.additive_attention (chapter 7): Bahdanau's additive scores and attention."""

import torch
from lmbook import additive_attention as AA

from ._case import Case


def _t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _args():
    """q (B=2, T_q=3, d_q=4), k (2, T_k=5, d_k=6), W_q (4, d_a=7), W_k (6, 7), v_a (7,)."""
    return {"q": _t(2, 3, 4, seed=1), "k": _t(2, 5, 6, seed=2), "W_q": _t(4, 7, seed=3), "W_k": _t(6, 7, seed=4),
            "v_a": _t(7, seed=5)}


CASES = [
    Case("additive_scores", lambda: (AA.additive_scores, _args()),
         ok={"q": {"extra_dim", "missing_dim"}, "k": {"extra_dim", "missing_dim"}}),  # leading axes broadcast
    Case("additive_attention",
         lambda: (AA.additive_attention, {**_args(), "values": _t(2, 5, 3, seed=6),
                                          "mask": torch.ones(2, 1, 5, dtype=torch.bool)}),
         ok={"q": {"extra_dim", "missing_dim"}, "k": {"extra_dim", "missing_dim"},
             "values": {"extra_dim", "missing_dim"},
             "mask": {"missing_dim", "extra_dim"}}),  # broadcasting leading axes is documented
]

SKIP = {}
