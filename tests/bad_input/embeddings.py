"""Bad-input cases for lmbook.embeddings (chapter 6): training word vectors and querying them."""

import functools

from lmbook.embeddings import Word2VecConfig, WordVectors, train_word2vec

from ._case import Case

SENTENCES = [s.split() for s in ["the list holds items", "an iterator returns items from a list",
                                 "raise an exception when the list is empty"]] * 3
TINY = {"dim": 4, "epochs": 1, "min_count": 1, "batch_size": 16, "buckets": 20}


@functools.cache
def _trained(model: str = "skipgram") -> WordVectors:
    return train_word2vec(SENTENCES, model=model, **TINY)


def _fields(model: str = "skipgram") -> dict:
    wv = _trained(model)
    return {"words": list(wv.words), "vectors": wv.vectors.copy(), "counts": wv.counts.copy(),
            "losses": [float(x) for x in wv.losses], "held_out_losses": [0.5],
            "ngram_vectors": None if wv.ngram_vectors is None
            else wv.ngram_vectors.copy(), "config": wv.config}


COUNTS = ("not_array", "float_dtype", "negative_id", "extra_dim", "none")  # counts, not ids: no upper bound
WORD = ("unknown", "list", "none", "empty", "bytes")  # "unknown" is a word out of the vocabulary

CASES = [
    Case("Word2VecConfig", lambda: (Word2VecConfig, {"model": "fasttext", "dim": 50, "window": 4, "negatives": 5,
                                                     "power": 0.75, "min_count": 5, "subsample": 1e-3, "epochs": 5,
                                                     "batch_size": 4096, "lr": 0.02, "n_min": 3, "n_max": 5,
                                                     "buckets": 20000, "seed": 0}),
         ok={"power": {"zero"},  # power 0 draws negatives uniformly, a documented variant
             "subsample": {"zero"}}),  # documented: 0 turns subsampling off
    Case("WordVectors", lambda: (WordVectors, _fields()), kinds={"counts": COUNTS, "ngram_vectors": ()},  # None:
         # word2vec has no n-gram vectors; the fastText case below drives them
         ok={"losses": {"empty"}, "held_out_losses": {"empty"}}),  # vectors not trained here have no losses
    Case("WordVectors", lambda: (WordVectors, _fields("fasttext")), kinds={"counts": COUNTS}, label="fasttext",
         ok={"losses": {"empty"}, "held_out_losses": {"empty"}}),  # as above
    Case("WordVectors.vector", lambda: (_trained().vector, {"word": "list"}),
         kinds={"word": WORD}),
    Case("WordVectors.similarity", lambda: (_trained().similarity, {"a": "list", "b": "items"}),
         kinds={"a": WORD, "b": WORD}),
    Case("WordVectors.nearest", lambda: (_trained().nearest, {"word": "list", "k": 3}),
         kinds={"word": WORD}),
    Case("train_word2vec", lambda: (train_word2vec, {"sentences": [list(s) for s in SENTENCES],
                                                     "config": Word2VecConfig(**TINY), "device": "cpu"}),
         kinds={"held_out": ()}),  # held_out is driven by the CBOW case below, the only model that measures it
    Case("train_word2vec", lambda: (train_word2vec, {"sentences": [list(s) for s in SENTENCES],
                                                     "config": Word2VecConfig(**TINY, model="cbow"),
                                                     "held_out": [list(s) for s in SENTENCES[:2]], "device": "cpu"}),
         label="cbow"),
]

SKIP = {}
