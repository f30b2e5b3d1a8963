"""Bad-input cases for lmbook.attention (chapter 7): softmax, masks, scaled dot-product attention, heads."""

import torch
from lmbook import attention

from ._case import Case


def _t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _qkv(q_len=5, k_len=5, heads=4, kv_heads=2):
    """q (B=2, H, T_q, d=8); k and v with fewer K/V heads (grouped-query attention)."""
    return {"q": _t(2, heads, q_len, 8, seed=1), "k": _t(2, kv_heads, k_len, 8, seed=2),
            "v": _t(2, kv_heads, k_len, 8, seed=3)}


def _mha():
    torch.manual_seed(0)
    return attention.MultiHeadAttention(8, 2, n_kv_heads=1)


# a mask broadcasts against the scores (..., T_q, T_k), so fewer or more leading axes are documented, and a float
# mask (here of 0s and 1s) is documented too: it is added to the scores
MASK_OK = {"float_dtype", "extra_dim", "missing_dim"}

CASES = [
    Case("softmax", lambda: (attention.softmax, {"x": _t(3, 4), "dim": -1, "temperature": 2.0}),
         ok={"x": {"extra_dim", "missing_dim"}},  # any shape is documented: softmax runs along `dim`
         kinds={"dim": ("float", "bool", "str", "none")}),  # every int in [-x.dim(), x.dim()) is a valid axis
    Case("causal_mask", lambda: (attention.causal_mask, {"q_len": 3, "k_len": 4, "device": "cpu"})),
    Case("padding_mask", lambda: (attention.padding_mask, {"lengths": torch.tensor([3, 1]), "k_len": 4}),
         ),
    Case("repeat_kv", lambda: (attention.repeat_kv, {"x": _t(2, 3, 4), "n_rep": 2}),
         ok={"x": {"extra_dim"}}),  # (..., H_kv, T, d): leading batch axes are documented
    Case("scaled_dot_product_attention",
         lambda: (attention.scaled_dot_product_attention,
                  {**_qkv(), "mask": torch.rand(5, 5, generator=torch.Generator().manual_seed(4)) > 0.3,
                   "is_causal": True, "scale": 0.5, "return_weights": True}),
         ok={"mask": MASK_OK}),
    Case("fast_attention",  # the decoding-step path: one query, no mask
         lambda: (attention.fast_attention, {**_qkv(q_len=1, k_len=6), "is_causal": True, "scale": 0.5}),
         kinds={"mask": ()}, label="decoding step"),  # the mask is driven by the "slices" case
    Case("fast_attention",  # the path by slices: several heads, >= 2^16 scores each
         lambda: (attention.fast_attention,
                  {**_qkv(q_len=256, k_len=256), "mask": torch.ones(256, 256, dtype=torch.bool).tril(),
                   "is_causal": False, "scale": 0.5}),
         ok={"mask": MASK_OK}, label="slices"),
    Case("split_heads", lambda: (attention.split_heads, {"x": _t(2, 3, 8), "n_heads": 2})),
    Case("merge_heads", lambda: (attention.merge_heads, {"x": _t(2, 2, 3, 4)})),
    Case("MultiHeadAttention", lambda: (attention.MultiHeadAttention,
                                        {"d_model": 8, "n_heads": 2, "n_kv_heads": 1, "bias": True})),
    Case("MultiHeadAttention.forward",
         lambda: (_mha(), {"x": _t(2, 3, 8), "kv": _t(2, 4, 8, seed=1),
                           "mask": torch.ones(2, 1, 3, 4, dtype=torch.bool), "is_causal": True,
                           "return_weights": True}),
         ok={"mask": {"float_dtype", "missing_dim"}}),  # a float mask, and one without the batch axis: documented
]

SKIP = {}
