"""A tiny LoRA-adapted model shared by the case files: built once, copied for every call that may change it."""

import copy
import functools

import torch
from lmbook import lora
from lmbook.model import Transformer, TransformerConfig


@functools.cache
def _lora_model():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, context_length=16))
    return lora.add_lora(model, ["q_proj", "v_proj"], r=2, alpha=4.0, seed=0)


def lora_model():
    return copy.deepcopy(_lora_model())
