"""Bad-input cases for lmbook.textrank (chapter 3): TextRank keywords, keyphrases and summaries."""

from lmbook import textrank as tr

from ._case import Case

SENTENCES = [["the", "graph", "ranks", "every", "node"], ["a", "node", "links", "to", "the", "graph"]]
CORPUS_KINDS = ("plain_str", "flat", "str_items", "empty", "non_str_item", "none")


def _sentences():
    return [list(s) for s in SENTENCES]


CASES = [
    Case("content_words", lambda: (tr.content_words, {"tokens": ["the", "graph", "ranks"]}),
         ok={"tokens": {"empty"}}),  # documented: no tokens, no flags
    Case("cooccurrence_graph", lambda: (tr.cooccurrence_graph, {"sentences": _sentences(), "window": 3,
                                                                "keep": tr.content_words, "span": "tokens"}),
         kinds={"sentences": CORPUS_KINDS}),
    Case("keywords", lambda: (tr.keywords, {"sentences": _sentences(), "top": 3, "window": 2,
                                            "keep": tr.content_words, "damping": 0.85,
                                            "span": "candidates"}),
         kinds={"sentences": CORPUS_KINDS}, ok={"damping": {"zero"}}),  # documented: 0 is pure teleport
    Case("keyphrases", lambda: (tr.keyphrases, {"sentences": _sentences(), "words": ["graph", "node"]}),
         kinds={"sentences": CORPUS_KINDS},
         ok={"words": {"empty"}}),  # documented: no chosen words, no phrases
    Case("overlap_similarity", lambda: (tr.overlap_similarity, {"a": ["graph", "node"], "b": ["node", "link"]})),
    Case("similarity_graph", lambda: (tr.similarity_graph, {"sentences": _sentences()}),
         kinds={"sentences": CORPUS_KINDS}),
    Case("summarize", lambda: (tr.summarize, {"sentences": _sentences(), "k": 1, "damping": 0.85}),
         kinds={"sentences": CORPUS_KINDS}, ok={"damping": {"zero"}}),  # documented: 0 is pure teleport
]

SKIP = {}
