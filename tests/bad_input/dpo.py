"""Bad-input cases for lmbook.dpo (chapter 16): completion log-probabilities, preference batches, training."""

import torch
from lmbook import dpo as D

from ._case import Case
from ._models import lora_model as _model

PAIRS = [([1, 2, 3], [4, 5], [6]), ([7, 8], [9], [10, 4, 5])]


def _batch():
    return D.completion_batch([tuple(list(ids) for ids in pair) for pair in PAIRS])


def _sequences():
    batch = _batch()
    return {"model": _model(), "input_ids": batch["input_ids"], "completion_mask": batch["completion_mask"]}


def _training():
    return {"model": _model(), "batch": _batch(), "ref_chosen_logps": torch.tensor([-5.0, -4.0]),
            "ref_rejected_logps": torch.tensor([-3.0, -6.0]), "beta": 0.1, "loss_type": "sigmoid",
            "label_smoothing": 0.0, "steps": 2, "batch_size": 2, "lr": 1e-2, "seed": 0,
            "callback": lambda step, model: {}}


CASES = [
    Case("sequence_logprobs", lambda: (D.sequence_logprobs, _sequences())),
    Case("rule_pairs", lambda: (D.rule_pairs, {"labels": [[True, False], [False, True, True]], "max_per_prompt": 2})),
    Case("completion_batch", lambda: (D.completion_batch, {"pairs": [tuple(list(ids) for ids in p) for p in PAIRS],
                                                           "pad_id": 0})),
    Case("pair_logprobs", lambda: (D.pair_logprobs, {"model": _model(), "batch": _batch(), "batch_size": 1})),
    Case("train_dpo", lambda: (D.train_dpo, _training())),
]

SKIP = {}
