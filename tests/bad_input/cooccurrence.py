"""Bad-input cases for lmbook.cooccurrence (chapter 2): pair counts, PMI, PPMI, collocations, stopwords."""

from lmbook import cooccurrence as co
from lmbook.cooccurrence import Cooccurrence

from ._case import Case

SENTENCES = [["the", "cat", "sat", "on", "the", "mat"], ["the", "dog", "sat", "on", "the", "mat"]]


CORPUS_KINDS = ("plain_str", "flat", "str_items", "empty", "non_str_item", "none", "empty_items")  # + all empty


def _sentences():
    return [list(s) for s in SENTENCES]  # a fresh copy for every call


def _cooc():
    return co.cooccurrence_counts(_sentences(), window=2)


def _fields():
    c = _cooc()
    return {"vocab": list(c.vocab), "index": dict(c.index), "counts": c.counts.copy(), "unigram": c.unigram.copy(),
            "window": c.window, "symmetric": c.symmetric}


CASES = [
    Case("Cooccurrence", lambda: (Cooccurrence, _fields()),
         ok={"unigram": {"huge_id"}}),  # the entries are counts, not ids: any count >= 0 is possible
    Case("Cooccurrence.count", lambda: (_cooc().count, {"x": "sat", "y": "mat"}),
         ok={"x": {"unknown"}, "y": {"unknown"}}),  # documented: a word that never occurs has count 0
    Case("cooccurrence_counts", lambda: (co.cooccurrence_counts, {"sentences": _sentences(), "window": 3,
                                                                  "symmetric": True}),
         kinds={"sentences": CORPUS_KINDS}),
    Case("pmi", lambda: (co.pmi, {"cooc": _cooc(), "base": 2.0, "marginals": "matrix"})),
    Case("ppmi", lambda: (co.ppmi, {"cooc": _cooc(), "base": 2.0, "marginals": "unigram"})),
    Case("collocations", lambda: (co.collocations, {"cooc": _cooc(), "n": 3, "min_count": 1, "base": 2.0,
                                                    "marginals": "unigram"})),
    Case("remove_stopwords", lambda: (co.remove_stopwords, {"sentences": _sentences(), "stopwords": {"the", "on"}})),
]

SKIP = {}
