"""Bad-input cases for lmbook.finetuning_cost (chapter 15): counting parameters and the bytes of training."""

import copy
import functools

import torch
from lmbook import finetuning_cost as cost
from lmbook import lora
from lmbook.model import Transformer, TransformerConfig

from ._case import Case


@functools.cache
def _base_model():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, context_length=16))
    return lora.add_lora(model, ["q_proj", "v_proj"], r=2, alpha=4.0, seed=0)


def _model():
    return copy.deepcopy(_base_model())


CASES = [
    Case("count_parameters", lambda: (cost.count_parameters, {"model": _model(), "trainable_only": True})),
    Case("training_memory", lambda: (cost.training_memory, {"model": _model(), "optimizer_states": 2,
                                                            "bytes_per_number": 4}),
         ok={"optimizer_states": {"zero"}}),  # 0 states per number is documented: plain SGD keeps none
    Case("measure_training_step",
         lambda: (cost.measure_training_step, {"model": _model(), "ids": torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]]),
                                               "lr": 0.0})),
]

SKIP = {}
