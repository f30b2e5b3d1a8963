"""Bad-input cases for lmbook.positional (chapters 9 and 12): sinusoids, RoPE, ALiBi, T5's buckets."""

import torch
from lmbook import positional

from ._case import Case

T, D = 3, 4  # three positions, a head of four features (two RoPE planes)


def _x():
    return torch.randn(T, D, generator=torch.Generator().manual_seed(0))


def _cos_sin():
    return positional.rope_cos_sin(torch.arange(T), positional.rope_inv_freq(D))  # each (T, D/2)


LEADING_AXES_OK = {"extra_dim"}  # x is (..., T, d): any leading batch and head axes are documented
ANY_POSITION_OK = {"huge_id"}  # any position >= 0 is valid; chapter 12's probe reads positions up to 65,536

CASES = [
    Case("sinusoidal_encoding", lambda: (positional.sinusoidal_encoding,
                                         {"n_positions": 5, "d_model": 8, "base": 10000.0})),
    Case("rope_inv_freq", lambda: (positional.rope_inv_freq,
                                   {"head_dim": 8, "base": 10000.0, "scaling": {"type": "linear", "factor": 2.0}})),
    Case("apply_rope", lambda: (positional.apply_rope, {"x": _x(), "positions": torch.arange(T),
                                                        "inv_freq": positional.rope_inv_freq(D), "pairing": "half"}),
         ok={"x": LEADING_AXES_OK, "positions": ANY_POSITION_OK}),
    Case("rope_cos_sin", lambda: (positional.rope_cos_sin, {"positions": torch.arange(T),
                                                            "inv_freq": positional.rope_inv_freq(D),
                                                            "dtype": torch.float64}),
         ok={"positions": {"extra_dim", *ANY_POSITION_OK}}),  # positions of any shape: (T,) or (B, T) in a model
    Case("rotate_pairs", lambda: (positional.rotate_pairs, {"x": _x(), "cos": _cos_sin()[0], "sin": _cos_sin()[1],
                                                            "pairing": "interleaved"}),
         # Runs in every attention layer: shapes are checked, values are not (a NaN scan syncs a GPU).
         ok={"x": LEADING_AXES_OK | {"nan", "inf"}, "cos": {"nan", "inf"}, "sin": {"nan", "inf"}}),
    Case("alibi_slopes", lambda: (positional.alibi_slopes, {"n_heads": 6})),
    Case("alibi_bias", lambda: (positional.alibi_bias, {"n_heads": 4, "q_len": 2, "k_len": 3, "device": "cpu"})),
    Case("relative_position_bucket",
         lambda: (positional.relative_position_bucket, {"relative_position": torch.arange(-40, 41).reshape(3, 27),
                                                        "bidirectional": True, "num_buckets": 32,
                                                        "max_distance": 128}),
         # j - i of any sign, size and shape is documented: negative = key before the query, far = last bucket
         ok={"relative_position": {"negative_id", "huge_id", "extra_dim", "missing_dim"}}),
]

SKIP = {}
