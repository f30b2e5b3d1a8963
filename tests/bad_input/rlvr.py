"""Bad-input cases for lmbook.rlvr (chapter 17): the supervised loss, completions, log-probabilities, GRPO's step."""

import copy
import functools

import torch
from lmbook import reasoning as R
from lmbook import rlvr
from lmbook.model import Transformer, TransformerConfig

from ._case import Case


@functools.cache
def _model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=len(R.VOCAB), d_model=8, n_layers=1, n_heads=2,
                                         context_length=64)).eval()


def _grpo_step():
    policy = copy.deepcopy(_model())
    return (rlvr.grpo_step, {"policy": policy, "reference": copy.deepcopy(_model()),
                             "optimizer": torch.optim.SGD(policy.parameters(), lr=0.1), "problems": [(1, 2), (3, 4)],
                             "fmt": "answer", "config": rlvr.GRPOConfig(group_size=2),
                             "generator": torch.Generator().manual_seed(0)})


CASES = [
    Case("supervised_loss", lambda: (rlvr.supervised_loss, {"model": _model(), "problems": [(1, 2), (30, 4)],
                                                            "fmt": "scratchpad"}),
         kinds={"model": ()}),  # any module that maps ids to logits; the others are checked by encode_examples
    Case("complete", lambda: (rlvr.complete, {"model": _model(), "problems": [(1, 2), (3, 4)], "fmt": "answer",
                                              "n_samples": 2, "temperature": 1.0,
                                              "generator": torch.Generator().manual_seed(0)}),
         ok={"temperature": {"zero"}},  # temperature 0 is greedy (documented)
         kinds={"model": ()}),
    Case("token_logps", lambda: (rlvr.token_logps, {"model": _model(), "ids": torch.tensor([[1, 2, 11, 3, 13]])}),
         kinds={"model": ()}),
    Case("accuracy", lambda: (rlvr.accuracy, {"model": _model(), "problems": [(1, 2), (3, 4)], "fmt": "answer"}),
         kinds={"model": ()}),
    Case("grpo_step", _grpo_step, kinds={"policy": (), "reference": ()}),
]

SKIP = {"GRPOConfig": "a dataclass of settings; grpo_step checks them (config.group_size, config.aggregation, ...)"}
