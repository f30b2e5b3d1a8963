"""Bad-input cases for lmbook.ranking (chapter 2): reciprocal rank fusion and ranking measures."""

from lmbook import ranking

from ._case import Case

RANKED_OK = {
    "empty",  # an empty ranking is documented: the retriever found nothing, and every measure is 0
    "non_str_item",  # any hashable id is a document id (an int index, a topic name, None)
}


def _ranked(**more):
    return {"ranked": ["a", "b", "c"], "relevant": {"a", "c"}, **more}


CASES = [
    Case("reciprocal_rank_fusion",
         lambda: (ranking.reciprocal_rank_fusion, {"rankings": [["a", "b", "c"], ["b", "d"]], "k": 60.0}),
         ok={"rankings": {"non_str_item"},  # any hashable id is a document id
             "k": {"zero"}}),  # k = 0 is documented: RRF(d) = sum of 1 / rank
    Case("precision_at_k", lambda: (ranking.precision_at_k, _ranked(k=2)), ok={"ranked": RANKED_OK}),
    Case("recall_at_k", lambda: (ranking.recall_at_k, _ranked(k=2)), ok={"ranked": RANKED_OK}),
    Case("reciprocal_rank", lambda: (ranking.reciprocal_rank, _ranked()), ok={"ranked": RANKED_OK}),
    Case("manual_queries", lambda: (ranking.manual_queries, {})),
]

SKIP = {}
