"""Bad-input cases for lmbook.ngram (chapter 1): counted and neural n-gram language models."""

import numpy as np
import torch
from lmbook.ngram import NeuralNGramLM, NGramLM, interpolation_weights

from ._case import Case

SENTENCES = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "ran"]]


def _sentences():
    return [list(s) for s in SENTENCES]  # a fresh copy: a call may not see another call's changes


def _lm(smoothing="kneser-ney"):
    return NGramLM(2, smoothing=smoothing).fit(_sentences())


def _model():
    return NeuralNGramLM(vocab_size=7, n=3, dim=4, hidden=8)


CONTEXT_OK = {"empty"}  # an empty context is documented: it is padded with <s>
WORD_KINDS = ("unknown", "list", "none", "empty", "bytes")  # the guessed kinds, plus the empty word and bytes
CORPUS_KINDS = ("plain_str", "flat", "str_items", "empty", "non_str_item", "none", "empty_items")

CASES = [
    Case("NGramLM", lambda: (NGramLM, {"n": 2, "smoothing": "kneser-ney", "k": 1.0, "discount": 0.75,
                                       "min_count": 1})),
    Case("NGramLM.fit", lambda: (NGramLM(2).fit, {"sentences": _sentences()}), kinds={"sentences": CORPUS_KINDS}),
    Case("NGramLM.prob", lambda: (_lm().prob, {"word": "cat", "context": ["the"]}),
         kinds={"word": WORD_KINDS},
         ok={"word": {"unknown"},  # an unseen word is documented: it maps to <unk>
             "context": CONTEXT_OK}),
    Case("NGramLM.prob", lambda: (_lm("add-k").prob, {"word": "cat", "context": ["the"]}), label="add-k",
         kinds={"word": WORD_KINDS}, ok={"word": {"unknown"}, "context": CONTEXT_OK}),  # as above
    Case("NGramLM.distribution", lambda: (_lm().distribution, {"context": ["the"]}), ok={"context": CONTEXT_OK}),
    Case("NGramLM.log_likelihood", lambda: (_lm().log_likelihood, {"sentences": _sentences()}),
         kinds={"sentences": CORPUS_KINDS}),
    Case("NGramLM.perplexity", lambda: (_lm().perplexity, {"sentences": _sentences()})),
    Case("NGramLM.generate", lambda: (_lm().generate, {"max_words": 5, "context": ["the"], "seed": 1}),
         ok={"context": CONTEXT_OK,
             "seed": {"zero", "negative"}}),  # any int seeds random.Random
    Case("NGramLM.order_probs", lambda: (_lm("mle").order_probs, {"sentences": _sentences()}),
         kinds={"sentences": CORPUS_KINDS}),
    Case("interpolation_weights", lambda: (interpolation_weights,
                                           {"order_probs": np.array([[0.5, 0.25], [0.5, 1.0]]), "iters": 10})),
    Case("NeuralNGramLM", lambda: (NeuralNGramLM, {"vocab_size": 7, "n": 3, "dim": 4, "hidden": 8})),
    Case("NeuralNGramLM.forward", lambda: (_model(), {"context_ids": torch.tensor([[7, 0], [1, 2]])})),
    Case("NeuralNGramLM.windows", lambda: (NeuralNGramLM.windows, {"lm": _lm(), "sentences": _sentences(), "n": 3})),
]

SKIP = {}
