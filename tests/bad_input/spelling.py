"""Bad-input cases for lmbook.spelling (chapter 13): the spelling-correction task's data, training and scoring."""

import random

import torch
from lmbook import seq2seq as S
from lmbook import spelling as sp

from ._case import Case


def _model(n_encoder_layers=1):
    torch.manual_seed(0)
    return S.Seq2Seq(S.Seq2SeqConfig(vocab_size=sp.VOCAB_SIZE, context_length=16, d_model=8, n_heads=2,
                                     n_encoder_layers=n_encoder_layers, n_decoder_layers=1)).eval()


WORDS_KINDS = ("plain_str", "empty", "non_str_item", "none")

CASES = [
    Case("manual_words", lambda: (sp.manual_words, {"min_len": 4, "max_len": 12})),
    Case("split_by_type", lambda: (sp.split_by_type, {"words": ["abc", "de", "fgh"], "test_fraction": 0.3,
                                                      "seed": 0})),
    Case("add_noise", lambda: (sp.add_noise, {"word": "lambda", "n_edits": 2, "rng": random.Random(0)}),
         ok={"n_edits": {"zero"}},  # 0 edits: the word itself, documented
         kinds={"word": ("list", "none", "empty", "bytes")}),  # a free word, not a choice: no "unknown" value
    Case("encode", lambda: (sp.encode, {"words": ["def", "yield"], "bos": True, "eos": True})),
    Case("decode", lambda: (sp.decode, {"ids": torch.tensor([[5, 6, 2, 0]])})),
    Case("make_batch", lambda: (sp.make_batch, {"words": ["def", "yield"], "rng": random.Random(0), "noise": (0, 1),
                                                "decoder_only": False}),
         kinds={"noise": ("plain_str", "empty", "none")}),
    Case("train", lambda: (sp.train, {"model": _model(), "words": ["def", "yield"], "steps": 1, "batch_size": 2,
                                      "lr": 1e-3, "seed": 0, "double_softmax": False})),
    Case("correct", lambda: (sp.correct, {"model": _model(), "noisy": ["dfe", "yeild"], "max_len": 4})),
    Case("wilson_interval", lambda: (sp.wilson_interval, {"successes": 3, "n": 10, "z": 1.96}),
         ok={"successes": {"zero"}}),  # no successes is a valid count
]
