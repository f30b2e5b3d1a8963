"""Chapter 18: retrieval-augmented generation (RAG) over the Python manual, and checking answers by code.

- :func:`split_passages`: the manual cut into passages of at most ``max_words`` words, each keeping its
  document's title (the rule is in the docstring), the unit that retrieval returns and the prompt holds;
- :class:`PassageSearch`: chapter 2's BM25 (:class:`lmbook.bm25.BM25`) over passages;
  :func:`fuse`: chapter 2's reciprocal-rank fusion of a BM25 ranking with a dense one (chapter 6's mean-pooled
  SmolLM2 states, :mod:`lmbook.dense_retrieval`, computed by ``lmbook.experiments.agent_runs``);
- :func:`rag_prompt` and :func:`closed_book_prompt`: the question, with or without passages, in SmolLM2-Instruct's
  chat template (:func:`lmbook.pretrained.smollm2_chat`);
- :func:`normalise` and :func:`answer_correct`: the rule that marks a generated answer right or wrong;
- :func:`manual_questions`: the chapter's labelled questions (answers and oracle passages).

Left out on purpose: re-ranking, query rewriting, passage overlap (sliding windows), citations in the answer,
and judging answers with another model (the check here is a string rule anyone can audit).
"""

from __future__ import annotations

import gzip
import json
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import validate
from .bm25 import BM25
from .pretrained import smollm2_chat
from .ranking import reciprocal_rank_fusion
from .retrieval import tokenize

__all__ = ["Passage", "split_passages", "manual_passages", "PassageSearch", "fuse", "RAG_SYSTEM", "rag_prompt",
           "closed_book_prompt", "normalise", "answer_correct", "manual_questions", "expression_questions",
           "load_runs", "QUESTIONS_PATH"]

QUESTIONS_PATH = Path(__file__).parent / "data" / "manual_questions.json"
MAX_WORDS = 100  # about 150 SmolLM2 tokens: three passages and a question fit in well under 1,000 tokens


@dataclass(frozen=True)
class Passage:
    title: str   # the manual topic it comes from, e.g. "exceptions"
    text: str    # at most max_words whitespace-separated words

    def __post_init__(self):
        validate.string("title", self.title)
        validate.string("text", self.text)


def split_passages(documents: dict, max_words: int = MAX_WORDS) -> list[Passage]:
    """Cut each document into passages, in order. The rule: split the text at blank lines into paragraphs;
    cut a paragraph longer than ``max_words`` words into runs of ``max_words`` words; then merge consecutive
    pieces greedily while the merged passage has at most ``max_words`` words. Words are whitespace-separated;
    a passage never spans two documents and keeps its document's title."""
    _check_split(documents, max_words)
    out = []
    for title, text in documents.items():
        pieces = []
        for paragraph in re.split(r"\n\s*\n", text):
            words = paragraph.split()
            pieces += [words[i:i + max_words] for i in range(0, len(words), max_words)]
        current: list[str] = []
        for piece in pieces:
            if current and len(current) + len(piece) > max_words:
                out.append(Passage(title, " ".join(current)))
                current = []
            current = current + piece
        if current:
            out.append(Passage(title, " ".join(current)))
    return out


@lru_cache(maxsize=1)
def manual_passages() -> tuple[Passage, ...]:
    """The book's passage collection: :func:`split_passages` of ``lmbook.data.documents()``, 100 words."""
    from . import data

    return tuple(split_passages(data.documents()))


class PassageSearch:
    """Okapi BM25 (chapter 2) over passages; each passage is indexed as its title followed by its text."""

    def __init__(self, passages, k1: float = 1.5, b: float = 0.75):
        _check_passages(passages)
        self.passages = list(passages)
        self.bm25 = BM25(k1=k1, b=b).index([tokenize(f"{p.title} {p.text}") for p in self.passages])

    def rank(self, query: str, k: int = 10) -> list[int]:
        """The indices of the top ``k`` passages for ``query``, best first (fewer if fewer match a term)."""
        validate.string("query", query)
        return [i for i, _ in self.bm25.search(tokenize(query), k)]


def fuse(rankings, k: int = 60, top: int = 10) -> list[int]:
    """Reciprocal-rank fusion (Cormack et al. 2009), RRF(d) = sum_r 1 / (k + rank_r(d)): the ``top``
    passages, best first, from several rankings of passage indices (chapter 2's implementation)."""
    _check_fuse(k, top)
    return [doc for doc, _ in reciprocal_rank_fusion(rankings, k)][:top]


RAG_SYSTEM = "You answer questions about Python with a short phrase, using the passages the user gives."


def rag_prompt(question: str, passages) -> str:
    """The chat prompt: numbered passages, each with its topic, then the question (chapter 18)."""
    _check_prompt(question, passages)
    context = "\n\n".join(f"[{i}] ({p.title}) {p.text}" for i, p in enumerate(passages, start=1))
    message = f"Passages:\n{context}\n\nQuestion: {question}\nAnswer with a short phrase."
    return smollm2_chat(message, system=RAG_SYSTEM)


def closed_book_prompt(question: str) -> str:
    """The same question with no passages: what the model knows from pre-training alone."""
    _check_question(question)
    return smollm2_chat(f"Question: {question}\nAnswer with a short phrase.", system=RAG_SYSTEM)


def normalise(text: str) -> str:
    """NFKC, case-folded, quotes, backticks and asterisks removed, then split into runs of word characters and
    runs of other non-space characters, joined by one space: ``'The "KeyError".'`` -> ``'the keyerror .'``,
    ``'object.__len__()'`` -> ``'object . __len__ ()'``, ``'a // b'`` -> ``'a // b'``."""
    validate.string("text", text, empty=True)
    text = re.sub(r"[\"'`‘’“”*]", "", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(re.findall(r"\w+|[^\w\s]+", text))


def answer_correct(answer: str, accepted, max_words: int = 12) -> bool:
    """True when the words of one of the ``accepted`` strings occur, in a row, among the first ``max_words``
    words of the first non-empty line of ``answer``, all :func:`normalise`-d. The cut stops an answer that
    copies a whole passage from passing because the right word is somewhere in it."""
    _check_answer(answer, accepted, max_words)
    lines = [line for line in answer.splitlines() if line.strip()] or [""]
    head = normalise(lines[0]).split()[:max_words]
    for a in accepted:
        want = normalise(a).split()
        if any(head[i:i + len(want)] == want for i in range(len(head) - len(want) + 1)):
            return True
    return False


def manual_questions() -> list[dict]:
    """The chapter's labelled questions: dicts with ``question``, ``accepted`` (answer strings), ``topic``
    and ``oracle`` (indices into :func:`manual_passages` of the passages that hold the answer)."""
    with open(QUESTIONS_PATH, encoding="utf-8") as f:
        return json.load(f)["manual"]


def expression_questions() -> list[dict]:
    """The chapter's "what does this expression evaluate to" questions: ``expression`` and ``value`` (its
    repr, labelled by running it in :func:`lmbook.sandbox.run_python`)."""
    with open(QUESTIONS_PATH, encoding="utf-8") as f:
        return json.load(f)["expressions"]


def load_runs(path: Path | None = None) -> dict:
    """The stored results of ``python -m lmbook.experiments.agent_runs`` (``data/agent_runs.json.gz``)."""
    if path is not None and not (isinstance(path, (str, Path)) and Path(path).is_file()):
        raise ValueError(f"path must name an existing agent_runs.json.gz file, got {validate.describe(path)}")
    path = Path(__file__).parent / "data" / "agent_runs.json.gz" if path is None else Path(path)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


# ----- argument checks ---------------------------------------------------------------------------------

def _check_split(documents, max_words) -> None:
    if not isinstance(documents, dict) or not documents:
        raise TypeError(f"documents must be a non-empty dict from title to text, got {validate.describe(documents)}")
    for title, text in documents.items():
        validate.string("a document title", title)
        validate.string(f"documents[{title!r}]", text, empty=True)
    validate.integer("max_words", max_words)


def _check_passages(passages) -> None:
    validate.sequence("passages", passages, what="Passage objects")
    for i, p in enumerate(passages):
        if not isinstance(p, Passage):
            raise TypeError(f"passages[{i}] must be a Passage, got {validate.describe(p)}")


def _check_question(question) -> None:
    validate.string("question", question)


def _check_prompt(question, passages) -> None:
    _check_question(question)
    _check_passages(passages)


def _check_fuse(k, top) -> None:
    validate.number("k", k, low=0)
    validate.integer("top", top)


def _check_answer(answer, accepted, max_words) -> None:
    validate.string("answer", answer, empty=True)
    validate.strings("accepted", accepted)
    if not all(normalise(a) for a in accepted):
        raise ValueError(f"accepted must hold strings with something besides quotes and spaces, got {accepted!r}")
    validate.integer("max_words", max_words)
