"""Bad-input cases for lmbook.unigram (chapter 5): WordPiece's merge score and the Unigram language model."""

import math

from lmbook.unigram import (
    unigram_em,
    unigram_expected_counts,
    unigram_forward_backward,
    unigram_prune,
    unigram_viterbi,
    wordpiece_likelihood_gain,
    wordpiece_score,
)

from ._case import Case

WORD_COUNTS = {"list": 3, "lists": 2, "is": 4}
PIECES = ["l", "i", "s", "t", "li", "st", "is", "list"]


def _logp():
    return {p: -math.log(len(PIECES)) for p in PIECES}


CASES = [
    Case("wordpiece_score", lambda: (wordpiece_score, {"pair_count": 4.0, "left_count": 50.0, "right_count": 20.0,
                                                       "total": 1000.0})),
    Case("wordpiece_likelihood_gain", lambda: (wordpiece_likelihood_gain, {"pair_count": 4.0, "left_count": 50.0,
                                                                           "right_count": 20.0, "total": 1000.0})),
    Case("unigram_forward_backward", lambda: (unigram_forward_backward, {"word": "lists", "logp": _logp()}),
         kinds={"word": ("list", "none", "empty", "bytes")}),  # any other str is a word (maybe unsegmentable)
    Case("unigram_expected_counts", lambda: (unigram_expected_counts, {"word": "lists", "logp": _logp()}),
         kinds={"word": ("list", "none", "empty", "bytes")}),
    Case("unigram_viterbi", lambda: (unigram_viterbi, {"word": "lists", "logp": _logp()}),
         kinds={"word": ("list", "none", "empty", "bytes")}),  # any other str is a word (maybe unsegmentable)
    Case("unigram_em", lambda: (unigram_em, {"word_counts": dict(WORD_COUNTS), "vocab": list(PIECES), "n_iter": 2})),
    Case("unigram_em", lambda: (unigram_em, {"word_counts": dict(WORD_COUNTS), "vocab": _logp(), "n_iter": 1}),
         label="logp", ok={"vocab": {"list"}}),  # documented: a list of pieces is the other form of vocab
    Case("unigram_prune", lambda: (unigram_prune, {"word_counts": dict(WORD_COUNTS), "logp": _logp(), "keep": 6,
                                                   "n_iter": 1})),
]

SKIP = {}
