"""Bad-input cases for lmbook.attention_fast (chapter 7): the fast paths of dense attention."""

import torch
from lmbook import attention_fast

from ._case import Case
from .attention import MASK_OK, _qkv

CASES = [
    Case("fast_attention",  # the decoding-step path: one query, no mask
         lambda: (attention_fast.fast_attention, {**_qkv(q_len=1, k_len=6), "is_causal": True, "scale": 0.5}),
         kinds={"mask": ()}, label="decoding step"),  # the mask is driven by the "slices" case
    Case("fast_attention",  # the path by slices: several heads, >= 2^16 scores each
         lambda: (attention_fast.fast_attention,
                  {**_qkv(q_len=256, k_len=256), "mask": torch.ones(256, 256, dtype=torch.bool).tril(),
                   "is_causal": False, "scale": 0.5}),
         ok={"mask": MASK_OK}, label="slices"),
]

SKIP = {}
