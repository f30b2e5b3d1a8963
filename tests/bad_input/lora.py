"""Bad-input cases for lmbook.lora (chapter 15): the LoRA layer, adding, merging, saving and disabling adapters."""

import copy
import functools

import torch
from lmbook import lora
from lmbook.model import Transformer, TransformerConfig
from torch import nn

from ._case import Case


@functools.cache
def _base_model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, context_length=16))


def _model():
    return copy.deepcopy(_base_model())


def _adapted():
    return lora.add_lora(_model(), ["q_proj", "v_proj"], r=2, alpha=4.0, seed=0)


def _layer():
    torch.manual_seed(0)
    return lora.LoRALinear(nn.Linear(8, 6), r=2, alpha=4.0)


CASES = [
    Case("LoRALinear", lambda: (lora.LoRALinear, {"base": nn.Linear(8, 6), "r": 2, "alpha": 4.0, "dropout": 0.0,
                                                  "rslora": False})),
    Case("LoRALinear.forward", lambda: (_layer(), {"x": torch.randn(3, 8)}),
         ok={"x": {"extra_dim", "missing_dim"}}),  # x is (..., in): any number of leading dims, as nn.Linear
    Case("add_lora", lambda: (lora.add_lora, {"model": _model(), "target_modules": ["q_proj", "v_proj"], "r": 2,
                                              "alpha": 4.0, "dropout": 0.0, "rslora": True, "seed": 0})),
    Case("lora_layers", lambda: (lora.lora_layers, {"model": _adapted()})),
    Case("merge_lora", lambda: (lora.merge_lora, {"model": _adapted(), "unload": False})),
    Case("remove_lora", lambda: (lora.remove_lora, {"model": _adapted()})),
    Case("lora_state_dict", lambda: (lora.lora_state_dict, {"model": _adapted()})),
    Case("load_lora", lambda: (lora.load_lora, {"model": _adapted(), "state": lora.lora_state_dict(_adapted())})),
    Case("disabled", lambda: (lora.disabled, {"model": _adapted()})),
    Case("energy_kept", lambda: (lora.energy_kept, {"singular_values": torch.tensor([3.0, 2.0, 0.5])})),
]

SKIP = {
    "LoRALinear.delta_weight": "takes no arguments",
    "LoRALinear.merge": "takes no arguments (merging twice is refused: tests/test_lora.py)",
    "LoRALinear.unmerge": "takes no arguments (unmerging an unmerged layer is refused: tests/test_lora.py)",
    "LoRALinear.extra_repr": "takes no arguments",
}
