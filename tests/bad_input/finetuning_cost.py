"""Bad-input cases for lmbook.finetuning_cost (chapter 15): counting parameters and the bytes of training."""

import torch
from lmbook import finetuning_cost as cost

from ._case import Case
from ._models import lora_model as _model

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
