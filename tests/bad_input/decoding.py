"""Bad-input cases for lmbook.decoding (chapter 10): logits filters, sampling, generation and its measures."""

import functools

import torch
from lmbook import decoding
from lmbook.kv_cache import KVCache
from lmbook.model import Transformer, TransformerConfig

from ._case import Case

V = 11  # the tiny model's vocabulary


@functools.cache
def _model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=V, d_model=8, n_layers=1, n_heads=2, context_length=16)).eval()


def _logits():
    return torch.randn(2, V, generator=torch.Generator().manual_seed(0)) * 2


def _generator():
    return torch.Generator().manual_seed(0)


# -inf in logits is a removed token (every filter's output is documented input of the next); +inf and NaN are
# rejected (tests/test_decoding.py checks +inf, which this kind draws only half of the time)
LOGITS_OK = {"inf"}
EOS_OK = {"zero"}  # token id 0 may be the end token

CASES = [
    Case("greedy", lambda: (decoding.greedy, {"logits": _logits()}), ok={"logits": LOGITS_OK}),
    Case("apply_temperature", lambda: (decoding.apply_temperature, {"logits": _logits(), "temperature": 0.7}),
         ok={"logits": LOGITS_OK}),
    Case("top_k_filter", lambda: (decoding.top_k_filter, {"logits": _logits(), "k": 3}), ok={"logits": LOGITS_OK}),
    Case("top_p_filter", lambda: (decoding.top_p_filter, {"logits": _logits(), "p": 0.9}), ok={"logits": LOGITS_OK}),
    Case("min_p_filter", lambda: (decoding.min_p_filter, {"logits": _logits(), "p_min": 0.1}),
         ok={"logits": LOGITS_OK, "p_min": {"zero"}}),  # p_min = 0 keeps every token (documented range [0, 1])
    Case("apply_repetition_penalty",
         lambda: (decoding.apply_repetition_penalty, {"logits": _logits(), "previous_ids": torch.tensor(
             [[1, 2, 2], [0, 5, 10]]), "penalty": 1.3}),
         ok={"logits": LOGITS_OK}),
    Case("sample", lambda: (decoding.sample, {"logits": _logits(), "generator": _generator()}),
         ok={"logits": LOGITS_OK}),
    Case("next_token",
         lambda: (decoding.next_token, {"logits": _logits(), "previous_ids": torch.tensor([[1, 2, 2], [0, 5, 10]]),
                                        "do_sample": True, "temperature": 0.8, "top_k": 5, "top_p": 0.9,
                                        "min_p": 0.05, "repetition_penalty": 1.2, "generator": _generator()}),
         ok={"logits": LOGITS_OK, "min_p": {"zero"}}),  # min_p = 0 keeps every token (documented range [0, 1])
    Case("generate",
         lambda: (decoding.generate, {"model": _model(), "prompt_ids": [1, 2, 3], "max_new_tokens": 3,
                                      "do_sample": True, "temperature": 0.8, "top_k": 5, "top_p": 0.9,
                                      "min_p": 0.05, "repetition_penalty": 1.2, "eos_id": 4,
                                      "generator": _generator(), "cache": KVCache.for_model(_model(), max_len=8),
                                      "use_cache": False}),
         ok={"min_p": {"zero"}, "eos_id": EOS_OK}),
    Case("distinct_n", lambda: (decoding.distinct_n, {"sequences": [[1, 2, 3, 1], [2, 3]], "n": 2})),
    Case("sequence_logprob", lambda: (decoding.sequence_logprob, {"model": _model(), "ids": torch.tensor(
        [[1, 2, 3, 4, 5]]), "prompt_len": 2}),
         ok={"ids": {"not_tensor", "missing_dim"}}),  # a list of ids, and (T,) for one sequence: documented
    Case("compare_strategies",
         lambda: (decoding.compare_strategies, {"model": _model(), "prompt_ids": [1, 2, 3],
                                                "strategies": {"greedy": {}, "hot": {"do_sample": True,
                                                                                     "temperature": 1.5}},
                                                "max_new_tokens": 3, "n_samples": 2, "eos_id": 4, "seed": 1}),
         ok={"eos_id": EOS_OK, "seed": {"zero"}}),  # seed 0 is a seed like any other
]

SKIP = {}
