"""Bad-input cases for lmbook.rag (chapter 18): passages, BM25 over passages, fusion, prompts, answer checks."""

import functools

from lmbook import rag

from ._case import Case

TEXT = ("list", "none", "empty", "bytes")  # free text: the misspelt-choice kind does not apply

PASSAGES = [rag.Passage("try", "The finally clause always runs."), rag.Passage("for", "A loop may have an else.")]


@functools.cache
def _search():
    return rag.PassageSearch(PASSAGES)


CASES = [
    Case("Passage", lambda: (rag.Passage, {"title": "try", "text": "The finally clause."}),
         kinds={"title": TEXT, "text": TEXT}),
    Case("split_passages", lambda: (rag.split_passages, {"documents": {"a": "one two\n\nthree"}, "max_words": 5})),
    Case("PassageSearch", lambda: (rag.PassageSearch, {"passages": PASSAGES, "k1": 1.5, "b": 0.75}),
         ok={"k1": {"zero"}, "b": {"zero"}}),  # chapter 2's BM25: k1 = 0 is binary tf, b = 0 no length norm
    Case("PassageSearch.rank", lambda: (_search().rank, {"query": "finally clause", "k": 2}), kinds={"query": TEXT}),
    Case("fuse", lambda: (rag.fuse, {"rankings": [[1, 2, 3], [3, 1]], "k": 60.0, "top": 2}),
         ok={"k": {"zero"},  # as in chapter 2's reciprocal_rank_fusion: k = 0 is documented
             "rankings": {"negative_item"}}),  # as in chapter 2: any hashable id is a document id
    Case("rag_prompt", lambda: (rag.rag_prompt, {"question": "Which clause runs?", "passages": PASSAGES}),
         kinds={"question": TEXT}),
    Case("closed_book_prompt", lambda: (rag.closed_book_prompt, {"question": "Which clause runs?"}),
         kinds={"question": TEXT}),
    Case("normalise", lambda: (rag.normalise, {"text": "The KeyError."}),
         kinds={"text": ("list", "none", "bytes")}),  # documented: the empty text normalises to ""
    Case("answer_correct", lambda: (rag.answer_correct, {"answer": "KeyError", "accepted": ["KeyError"],
                                                         "max_words": 12}),
         kinds={"answer": ("list", "none", "bytes")}),  # an empty answer is simply wrong
    Case("load_runs", lambda: (rag.load_runs, {"path": str(rag.QUESTIONS_PATH.parent / "agent_runs.json.gz")}),
         kinds={"path": ("list", "none", "empty", "unknown")}),  # None is the default: the stored file
]

SKIP = {"manual_passages": "takes no arguments", "manual_questions": "takes no arguments",
        "expression_questions": "takes no arguments"}
