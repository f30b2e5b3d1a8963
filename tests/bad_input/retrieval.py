"""Bad-input cases for lmbook.retrieval (chapter 2): the tokenizer and TF-IDF."""

import scipy.sparse as sp
from lmbook import retrieval
from lmbook.retrieval import TfIdf

from ._case import Case

DOCS = [["the", "cat", "sat"], ["the", "dog", "ran"], ["a", "cat", "ran", "ran"]]


CORPUS_KINDS = ("plain_str", "flat", "str_items", "empty", "non_str_item", "none", "empty_items")  # + all empty


def _docs():
    return [list(d) for d in DOCS]  # a fresh copy for every call


def _counts():
    return sp.csr_matrix([[2.0, 1.0, 0.0], [0.0, 1.0, 3.0]])


def _engine():
    return TfIdf().index(_docs())


CASES = [
    Case("tokenize", lambda: (retrieval.tokenize, {"text": "Café's __init__"}),
         kinds={"text": ("list", "none", "bytes")}),  # any str is a text, the empty one included (no tokens)
    Case("term_frequency", lambda: (retrieval.term_frequency, {"counts": _counts(), "variant": "sublinear"})),
    Case("inverse_document_frequency",
         lambda: (retrieval.inverse_document_frequency, {"df": [1, 2, 3], "n_docs": 3, "variant": "plain"})),
    Case("tf_idf", lambda: (retrieval.tf_idf, {"corpus_tokens": _docs(), "tf": "raw", "idf": "smooth",
                                               "norm": "l2"}), kinds={"corpus_tokens": CORPUS_KINDS}),
    Case("TfIdf", lambda: (TfIdf, {"tf": "log", "idf": "smooth"})),
    Case("TfIdf.index", lambda: (TfIdf().index, {"corpus_tokens": _docs()}), kinds={"corpus_tokens": CORPUS_KINDS}),
    Case("TfIdf.get_scores", lambda: (_engine().get_scores, {"query_tokens": ["cat", "ran"]})),
    Case("TfIdf.search", lambda: (_engine().search, {"query_tokens": ["cat", "ran"], "k": 2})),
]

SKIP = {}
