"""Bad-input cases for lmbook.efficient_attention (chapter 7): sparse masks, linear and flash attention, and the
memory counter."""

import torch
from lmbook import efficient_attention as EA

from ._case import Case


def _qkv(T=10):
    """q (B=2, H=4, T, d=8); k and v with 2 K/V heads (grouped-query attention)."""
    g = torch.Generator().manual_seed(0)
    return {"q": torch.randn(2, 4, T, 8, generator=g), "k": torch.randn(2, 2, T, 8, generator=g),
            "v": torch.randn(2, 2, T, 8, generator=g)}


CASES = [
    Case("sliding_window_mask", lambda: (EA.sliding_window_mask, {"q_len": 3, "k_len": 5, "window": 2,
                                                                  "device": "cpu"})),
    Case("strided_mask", lambda: (EA.strided_mask, {"q_len": 4, "k_len": 4, "stride": 2, "device": "cpu"})),
    Case("linear_attention", lambda: (EA.linear_attention, {**_qkv(), "feature_map": "relu", "is_causal": True,
                                                            "eps": 1e-6, "chunk": 4})),
    Case("flash_attention", lambda: (EA.flash_attention, {**_qkv(), "block_size": 4, "is_causal": True,
                                                          "window": 3})),
    Case("peak_memory", lambda: (EA.peak_memory, {"fn": lambda: torch.zeros(4) + 1})),
]

SKIP = {}


def _mla():
    """q (H=2, d_h=4), latent (T=5, d_c=3), W_uk and W_uv (2, 3, 4), W_o (2, 4, 6)."""
    g = torch.Generator().manual_seed(0)
    return {"q": torch.randn(2, 4, generator=g), "latent": torch.randn(5, 3, generator=g),
            "W_uk": torch.randn(2, 3, 4, generator=g), "W_uv": torch.randn(2, 3, 4, generator=g),
            "W_o": torch.randn(2, 4, 6, generator=g)}


CASES.append(Case("mla_decode", lambda: (EA.mla_decode, {**_mla(), "absorbed": True})))  # chapter 11
