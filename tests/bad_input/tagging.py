"""Bad-input cases for lmbook.tagging (chapter 4): the most-frequent-tag baseline, the HMM, Viterbi and
forward-backward."""

import numpy as np
from lmbook import tagging

from ._case import Case

TAGGED = [(["the", "dog", "runs"], ["DET", "NOUN", "VERB"]), (["a", "dog", "barks"], ["DET", "NOUN", "VERB"]),
          (["dogs", "run", "fast"], ["NOUN", "VERB", "ADV"])]
WORDS = ["the", "dog", "barks"]


def _tagged():
    return [(list(w), list(t)) for w, t in TAGGED]  # a fresh copy for every call


def _hmm():
    return tagging.fit_hmm(_tagged())


def _arrays():
    rng = np.random.default_rng(0)
    return {"log_start": np.log(rng.dirichlet(np.ones(3))), "log_trans": np.log(rng.dirichlet(np.ones(3), size=3)),
            "log_emit": np.log(rng.uniform(0.1, 1.0, size=(4, 3)))}



CASES = [
    Case("word_shape", lambda: (tagging.word_shape, {"word": "Tokenizing"}),
         kinds={"word": ("list", "none", "empty", "bytes")}),  # any other str is a word to classify
    Case("MostFrequentTag.fit", lambda: (tagging.MostFrequentTag().fit, {"tagged": _tagged()})),
    Case("MostFrequentTag.tag", lambda: (tagging.MostFrequentTag().fit(_tagged()).tag, {"words": list(WORDS)})),
    Case("fit_hmm", lambda: (tagging.fit_hmm, {"tagged": _tagged(), "alpha_transition": 0.1,
                                               "alpha_emission": 0.01, "min_count": 2})),
    Case("HMM.symbol", lambda: (_hmm().symbol, {"word": "dog"}),
         kinds={"word": ("list", "none", "empty", "bytes")}),  # any other str is a word (unknown ones get a shape)
    Case("HMM.emission_scores", lambda: (_hmm().emission_scores, {"words": list(WORDS)})),
    Case("HMM.tag", lambda: (_hmm().tag, {"words": list(WORDS)})),
    Case("HMM.posteriors", lambda: (_hmm().posteriors, {"words": list(WORDS)})),
    Case("viterbi", lambda: (tagging.viterbi, _arrays())),
    Case("forward_backward", lambda: (tagging.forward_backward, _arrays())),
]

SKIP = {"MostFrequentTag": "takes no arguments",
        "HMM": "a record of arrays that fit_hmm builds from checked input; it validates nothing itself",
        "ViterbiResult": "a named tuple that viterbi returns; it is never built from user input"}
