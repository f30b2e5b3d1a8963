"""Bad-input cases for lmbook.normalization (chapter 9): LayerNorm and RMSNorm."""

import torch
from lmbook import normalization as N

from ._case import Case


def _x():
    return torch.randn(8, generator=torch.Generator().manual_seed(0))  # one token's features (d,)


# Norms act on the last axis of x (..., d): leading axes are documented input. NaN and inf are not looked for: a
# norm runs twice per block, and a pass over its input at every decoding step would cost more than the norm.
X_OK = {"extra_dim", "nan", "inf"}

CASES = [
    Case("LayerNorm", lambda: (N.LayerNorm, {"d": 8, "eps": 1e-5, "bias": True})),
    Case("LayerNorm.forward", lambda: (N.LayerNorm(8), {"x": _x()}), ok={"x": X_OK}),
    Case("RMSNorm", lambda: (N.RMSNorm, {"d": 8, "eps": 1e-5})),
    Case("RMSNorm.forward", lambda: (N.RMSNorm(8), {"x": _x()}), ok={"x": X_OK}),
]

SKIP = {}
