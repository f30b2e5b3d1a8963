"""Bad-input cases for lmbook.bm25 (chapter 2): the BM25 formula and its sparse-matrix search engine."""

from lmbook import bm25
from lmbook.bm25 import BM25

from ._case import Case

DOCS = [["the", "cat", "sat"], ["the", "dog", "ran"], ["a", "cat", "ran", "ran"]]
PARAMS = {"k1": 1.2, "b": 0.75, "variant": "bm25+", "delta": 0.5, "epsilon": 0.25}
# A zero is documented for each parameter: k1 = 0 ignores term frequency, b = 0 ignores document length,
# delta = 0 turns bm25l/bm25+ into plain BM25, epsilon = 0 floors a negative okapi idf at 0.
ZERO_OK = {name: {"zero"} for name in ("k1", "b", "delta", "epsilon")}


CORPUS_KINDS = ("plain_str", "flat", "str_items", "empty", "non_str_item", "none", "empty_items")  # + all empty


def _docs():
    return [list(d) for d in DOCS]  # a fresh copy for every call


def _engine():
    return BM25(**PARAMS).index(_docs())


CASES = [
    Case("bm25_idf", lambda: (bm25.bm25_idf, {"df": [1, 2, 3], "n_docs": 3, "variant": "okapi", "epsilon": 0.25}),
         ok={"epsilon": {"zero"}}),  # as in ZERO_OK
    Case("bm25_tf", lambda: (bm25.bm25_tf, {"tf": 2.0, "doc_len": 5.0, "avgdl": 4.0, "k1": 1.2, "b": 0.75,
                                            "variant": "bm25+", "delta": 0.5}),
         ok={"tf": {"zero"},  # tf = 0 is documented: a term absent from the document
             "doc_len": {"zero"},  # an empty document is documented (and |d| is often given relative to avgdl)
             "k1": {"zero"}, "b": {"zero"}, "delta": {"zero"}}),  # as in ZERO_OK
    Case("bm25_scores", lambda: (bm25.bm25_scores, {"corpus_tokens": _docs(), "query_tokens": ["cat", "ran"],
                                                    **PARAMS}), ok=ZERO_OK, kinds={"corpus_tokens": CORPUS_KINDS}),
    Case("BM25", lambda: (BM25, dict(PARAMS)), ok=ZERO_OK),
    Case("BM25.index", lambda: (BM25(**PARAMS).index, {"corpus_tokens": _docs()}),
         kinds={"corpus_tokens": CORPUS_KINDS}),
    Case("BM25.unknown_terms", lambda: (_engine().unknown_terms, {"query_tokens": ["cat", "zebra"]})),
    Case("BM25.get_scores", lambda: (_engine().get_scores, {"query_tokens": ["cat", "ran"]})),
    Case("BM25.search", lambda: (_engine().search, {"query_tokens": ["cat", "ran"], "k": 2})),
]

SKIP = {}
