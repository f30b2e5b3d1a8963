"""Chapter 18's retrieval-augmented generation: passages, BM25 over passages, fusion, prompts, answer checks,
the labelled questions and the stored runs."""

import random
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
from lmbook import data, rag
from lmbook.bm25 import bm25_scores
from lmbook.ranking import recall_at_k
from lmbook.retrieval import tokenize

DOCS = {"a": "one two three\n\nfour five\n\n" + " ".join(f"w{i}" for i in range(12)), "b": "six seven", "c": ""}


def test_passages_keep_every_word_in_order_and_never_cross_documents():
    passages = rag.split_passages(DOCS, max_words=5)
    for title, text in DOCS.items():
        words = [w for p in passages if p.title == title for w in p.text.split()]
        assert words == text.split()
    assert all(len(p.text.split()) <= 5 for p in passages)
    assert [p.text for p in passages if p.title == "a"][:2] == ["one two three four five", "w0 w1 w2 w3 w4"]


def test_paragraphs_are_merged_greedily_up_to_the_limit():
    passages = rag.split_passages({"t": "a b\n\nc d\n\ne f g"}, max_words=4)
    assert [p.text for p in passages] == ["a b c d", "e f g"]


def test_the_manual_passages_cover_the_manual():
    passages = rag.manual_passages()
    assert len(passages) == 850
    assert sum(len(p.text.split()) for p in passages) == sum(len(t.split()) for t in data.documents().values())
    assert max(len(p.text.split()) for p in passages) <= rag.MAX_WORDS


def test_passage_search_ranks_by_chapter_2s_readable_bm25():
    passages = rag.manual_passages()[:200]
    search = rag.PassageSearch(passages)
    corpus = [tokenize(f"{p.title} {p.text}") for p in passages]
    for query in ("which exception is raised for a missing key", "__len__ built-in len", "yield generator"):
        scores = bm25_scores(corpus, tokenize(query))
        matching = [i for i in range(len(passages)) if set(corpus[i]) & set(tokenize(query))]
        order = sorted(matching, key=lambda i: (-scores[i], i))
        assert search.rank(query, 10) == order[:10]


def test_passage_search_matches_rank_bm25():
    rank_bm25 = pytest.importorskip("rank_bm25")
    passages = rag.manual_passages()[:300]
    corpus = [tokenize(f"{p.title} {p.text}") for p in passages]
    oracle = rank_bm25.BM25Okapi(corpus, k1=1.5, b=0.75, epsilon=0.25)
    query = "special method called to implement truth value testing"
    np.testing.assert_allclose(rag.PassageSearch(passages).bm25.get_scores(tokenize(query)),
                               oracle.get_scores(tokenize(query)), rtol=1e-10)


def _naive_rrf(rankings, k):
    """Exact fractions, accumulated ranking by ranking; ties by best rank, then id."""
    score, best = defaultdict(Fraction), {}
    for ranking in rankings:
        for position, doc in enumerate(ranking):
            score[doc] += Fraction(1, k + position + 1)
            best[doc] = min(best.get(doc, 10**9), position)
    return sorted(score, key=lambda d: (-score[d], best[d], d))


def test_fuse_matches_a_naive_reciprocal_rank_fusion():
    rng = random.Random(0)
    for _ in range(200):
        rankings = [rng.sample(range(30), rng.randint(0, 15)) for _ in range(rng.randint(1, 4))]
        if not any(rankings):
            continue
        assert rag.fuse(rankings, k=60, top=10) == _naive_rrf(rankings, 60)[:10]


def test_rag_prompt_numbers_the_passages_inside_the_chat_template():
    passages = [rag.Passage("try", "The finally clause runs."), rag.Passage("for", "Loops have else.")]
    prompt = rag.rag_prompt("Which clause always runs?", passages)
    assert prompt.startswith("<|im_start|>system\n" + rag.RAG_SYSTEM + "<|im_end|>\n<|im_start|>user\n")
    assert "[1] (try) The finally clause runs.\n\n[2] (for) Loops have else." in prompt
    assert prompt.endswith("Question: Which clause always runs?\nAnswer with a short phrase.<|im_end|>\n"
                           "<|im_start|>assistant\n")
    assert "Passages" not in rag.closed_book_prompt("Which clause always runs?")


@pytest.mark.parametrize("answer, accepted, expected", [
    ("KeyError", ["KeyError"], True),
    ('The "KeyError" exception.', ["KeyError"], True),
    ("object.__len__(self)", ["__len__"], True),
    ("key error", ["KeyError"], False),
    ("A KeyErrorish thing", ["KeyError"], False),
    ("\n\nIt is the finally clause\nnot else", ["finally"], True),
    ("It is not on the first line\nfinally", ["finally"], False),
    ("one two three four five six seven eight nine ten eleven twelve finally", ["finally"], False),
    ("Ellipsis or ...", ["Ellipsis", "..."], True),
])
def test_answer_correct(answer, accepted, expected):
    assert rag.answer_correct(answer, accepted) is expected


def test_every_question_has_its_answer_and_evidence_in_each_oracle_passage():
    passages = rag.manual_passages()
    questions = rag.manual_questions()
    assert len(questions) >= 60
    for q in questions:
        assert 1 <= len(q["oracle"]) <= 4, q["question"]
        for i in q["oracle"]:
            text = passages[i].text.lower()
            assert any(a.lower() in text for a in q["accepted"]), q["question"]
            assert all(e.lower() in text for e in q["evidence"]), q["question"]
        others = [i for i, p in enumerate(passages) if i not in q["oracle"]
                  and all(e.lower() in p.text.lower() for e in q["evidence"])
                  and any(a.lower() in p.text.lower() for a in q["accepted"])]
        assert others == [], q["question"]  # the oracle set is every passage that holds the answer


def test_expression_labels_are_what_python_computes():
    questions = rag.expression_questions()
    assert len(questions) >= 40
    for q in questions:  # trusted expressions written for the book: evaluated here in-process, as an oracle
        assert repr(eval(q["expression"], {})) == q["value"], q["expression"]  # noqa: S307


def _runs():
    try:
        return rag.load_runs()
    except FileNotFoundError:
        pytest.skip("data/agent_runs.json.gz has not been made (make agent-runs)")


def test_stored_summary_agrees_with_the_stored_answers():
    runs = _runs()
    questions = rag.manual_questions()
    for condition, accuracy in runs["summary"]["accuracy"].items():
        again = [rag.answer_correct(m["answers"][condition]["answer"], q["accepted"])
                 for m, q in zip(runs["manual"], questions, strict=True)]
        assert np.mean(again) == pytest.approx(accuracy)
    for retriever, by_k in runs["summary"]["recall"].items():
        for k, value in by_k.items():
            naive = np.mean([len(set(m["rankings"][retriever][:int(k)]) & set(q["oracle"])) / len(q["oracle"])
                             for m, q in zip(runs["manual"], questions, strict=True)])
            chapter_2 = np.mean([recall_at_k(m["rankings"][retriever], set(q["oracle"]), int(k))
                                 for m, q in zip(runs["manual"], questions, strict=True)])
            assert naive == pytest.approx(value) == pytest.approx(chapter_2)


def test_stored_bm25_rankings_are_reproduced():
    runs = _runs()
    search = rag.PassageSearch(rag.manual_passages())
    for m, q in list(zip(runs["manual"], rag.manual_questions(), strict=True))[:10]:
        assert search.rank(q["question"], len(m["rankings"]["bm25"])) == m["rankings"]["bm25"]


def test_stored_expression_answers_are_checked_by_value():
    runs = _runs()
    from lmbook.agents import value_correct
    for t, q in zip(runs["tools"], rag.expression_questions(), strict=True):
        assert t["no_tools"]["correct"] == value_correct(t["no_tools"]["answer"], q["value"])
        for name in ("agent", "agent_constrained", "agent_answer_only", "agent_python_first"):
            answer = t[name]["answer"]
            assert t[name]["correct"] == (answer is not None and value_correct(answer, q["value"]))


def test_stored_controls_keep_to_their_grammars():
    runs = _runs()
    for t in runs["tools"]:
        assert [s["kind"] for s in t["agent_answer_only"]["steps"]] == ["answer"]  # no tool, one answer
        assert t["agent_python_first"]["steps"][0]["line"].startswith("CALL python: ")
        if t["agent_constrained"]["steps"][0]["kind"] == "answer":  # greedy: a narrower mask keeps the argmax
            assert t["agent_answer_only"]["steps"][0]["line"] == t["agent_constrained"]["steps"][0]["line"]
    again = {c: np.mean([t[c]["correct"] for t in runs["tools"]]) for c in runs["summary"]["tools"]}
    assert again == pytest.approx({c: s["accuracy"] for c, s in runs["summary"]["tools"].items()})


def test_the_control_masks_allow_only_their_heads():
    from types import SimpleNamespace

    from lmbook.experiments.agent_runs import ARMS, _step_masks
    vocab = {0: b"A", 1: b"C", 2: b"CALL python: ", 3: b"ANSWER: ", 4: b"CALL search: ", 5: b"x", 6: b"\n", 7: b"<s>"}
    masks = _step_masks(SimpleNamespace(vocab=vocab), {7})
    assert set(masks) == set(ARMS) - {"no_tools"}

    def allowed(mask):
        return set(mask.allowed(mask.grammar.start()).nonzero()[:, 0].tolist())
    assert masks["agent"] == (None, None)
    assert allowed(masks["agent_constrained"][0]) == {0, 1, 2, 3, 4}
    assert allowed(masks["agent_answer_only"][0]) == allowed(masks["agent_answer_only"][1]) == {0, 3}
    assert allowed(masks["agent_python_first"][0]) == {1, 2}
    assert allowed(masks["agent_python_first"][1]) == {0, 1, 2, 3, 4}
