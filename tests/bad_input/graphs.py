"""Bad-input cases for lmbook.graphs (chapter 3): PageRank, the Google matrix, the manual's cross-references."""

import numpy as np
import scipy.sparse as sp
from lmbook import graphs

from ._case import Case

# a -> b, b -> a, b -> c; c is dangling
LINKS = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
WEIGHTS = {"personalization": [1.0, 2.0, 1.0], "dangling": [0.0, 1.0, 1.0]}
# documented: link weights may be counts (an int array), and damping 0 is pure teleport (the scores are v)
OK = {"adjacency": {"int_dtype"}, "damping": {"zero"}}
DOCS = {"a": "Alpha\n*****\n\nSee section Beta.\n", "b": "Beta\n****\n\nText.\n"}

CASES = [
    Case("transition_matrix", lambda: (graphs.transition_matrix, {"adjacency": LINKS.copy()}),
         ok={"adjacency": {"int_dtype"}}),  # documented: link weights may be counts (an int array)
    Case("transition_matrix", lambda: (graphs.transition_matrix, {"adjacency": sp.csr_matrix(LINKS)}),
         label="sparse"),
    Case("google_matrix", lambda: (graphs.google_matrix, {"adjacency": LINKS.copy(), "damping": 0.85, **WEIGHTS}),
         ok=OK),
    Case("pagerank", lambda: (graphs.pagerank, {"adjacency": LINKS.copy(), "damping": 0.85, "tol": 1e-8,
                                                "max_iter": 100, **WEIGHTS}), ok=OK),
    Case("headings", lambda: (graphs.headings, {"text": DOCS["a"]}),
         kinds={"text": ("list", "none", "bytes")}),  # any str is a text, the empty one included
    Case("cross_references", lambda: (graphs.cross_references, {"documents": dict(DOCS)})),
]

SKIP = {"PageRankResult": "a NamedTuple record that pagerank returns; it is never built from user input"}
