"""Bad-input cases for lmbook.neural_tagger (chapter 4): the BiLSTM tagger, its batches and its training."""

import torch
from lmbook import neural_tagger as nt

from ._case import Case

TAGGED = [(["the", "dog", "runs"], ["DET", "NOUN", "VERB"]), (["a", "dog", "barks"], ["DET", "NOUN", "VERB"])]
SMALL = dict(word_dim=4, char_dim=3, char_channels=5, hidden=4, dropout=0.1, word_dropout=0.05)


def _tagged():
    return [(list(w), list(t)) for w, t in TAGGED]


def _vocab():
    return nt.TaggerVocab.build(_tagged(), min_count=1)


def _model():
    torch.manual_seed(0)
    return nt.BiLSTMTagger(_vocab(), nt.TaggerConfig(**SMALL))


def _batch():
    words, chars, lengths = nt.encode_batch(_vocab(), [["the", "dog"], ["a", "dog", "barks"]])
    return {"word_ids": words, "char_ids": chars, "lengths": lengths}


CASES = [
    Case("TaggerConfig", lambda: (nt.TaggerConfig, dict(SMALL)),
         ok={"dropout": {"zero"}, "word_dropout": {"zero"}}),  # 0 turns dropout off: documented range [0, 1)
    Case("TaggerVocab", lambda: (nt.TaggerVocab, {"words": ["<pad>", "<unk>", "dog"], "chars": ["<pad>", "<unk>", "d"],
                                                  "tags": ["NOUN"]})),
    Case("TaggerVocab.build", lambda: (nt.TaggerVocab.build, {"tagged": _tagged(), "min_count": 1})),
    Case("BiLSTMTagger", lambda: (nt.BiLSTMTagger, {"vocab": _vocab(), "config": nt.TaggerConfig(**SMALL)})),
    Case("BiLSTMTagger.forward", lambda: (_model(), _batch())),
    Case("encode_batch", lambda: (nt.encode_batch, {"vocab": _vocab(), "sentences": [["the", "dog"], ["a"]]}),
         kinds={"sentences": ("plain_str", "flat", "str_items", "empty", "non_str_item", "none")}),
    Case("train_tagger", lambda: (nt.train_tagger, {"model": _model(), "tagged": _tagged(), "epochs": 1,
                                                    "batch_size": 2, "lr": 0.01, "seed": 0, "log_every": 1}),
         ok={"seed": {"negative"}, "log_every": {"zero"}}),  # any int seeds; log_every 0 logs nothing
    Case("predict_tags", lambda: (nt.predict_tags, {"model": _model(), "sentences": [["the", "dog"]],
                                                    "batch_size": 4}),
         kinds={"sentences": ("plain_str", "flat", "str_items", "empty", "non_str_item", "none")}),
]

SKIP = {}
