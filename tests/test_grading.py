"""The autograder on synthetic submissions: correct, partly wrong, broken at import, looping forever,
with deleted cells, and not a notebook at all. The batch survives all of them."""

import csv
import json

import pytest
from lmbook.teaching.grading import exercises_of, grade_all


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text):
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": [], "execution_count": None}


def exercise(label, solution, check):
    return [md(f"```{{exercise-start}} {label}\n:label: {label}\n```\nTask.\n```{{exercise-end}}\n```"),
            md(f"```{{solution-start}} {label}\n:class: dropdown\n```"), code(solution),
            md("```{solution-end}\n```"), code(check)]


ADD_K = "def add_k_prob(c_hw, c_h, V, k):\n    ### BEGIN SOLUTION\n    return (c_hw + k) / (c_h + k * V)\n" \
        "    ### END SOLUTION"
CORPUS = ("import math\ndef corpus_perplexity(ps):\n    ### BEGIN SOLUTION\n"
          "    logs = [math.log(p) for s in ps for p in s]\n    return math.exp(-sum(logs) / len(logs))\n"
          "    ### END SOLUTION")
BY_HAND = "### BEGIN SOLUTION\nanswer = (0.2 * 0.5 * 0.1 * 0.4) ** -0.25\n### END SOLUTION"


def notebook(setup="import lmbook", add_k=ADD_K, corpus=CORPUS, by_hand=BY_HAND, extra=()):
    cells = [md("# Demo chapter"), code(setup), *extra]
    cells += exercise("ch00-add-k", add_k, "lmbook.checks.check_add_k(add_k_prob)")
    cells += exercise("ch00-corpus", corpus, "lmbook.checks.check_corpus_perplexity(corpus_perplexity)")
    cells += exercise("ch00-by-hand", by_hand, "lmbook.checks.check_ppl_by_hand(answer)")
    cells += exercise("ch00-written", "", "")[:2] + [md("A written answer."), md("```{solution-end}\n```")]
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("grading")
    (root / "reference").mkdir()
    (root / "reference" / "00_demo.ipynb").write_text(json.dumps(notebook()))
    (root / "reference" / "points.json").write_text(json.dumps({"ch00-corpus": 2}))
    subs = {
        "correct": notebook(),
        "partly_wrong": notebook(add_k=ADD_K.replace("k * V", "V"), by_hand="answer = 4"),
        "broken_import": notebook(setup="import lmbook\nimport numpy_that_does_not_exist"),
        "loops_forever": notebook(add_k="def add_k_prob(c_hw, c_h, V, k):\n    while True:\n        pass"),
        "deleted_cells": {**notebook(), "cells": notebook()["cells"][:2]},
    }
    for student, nb in subs.items():
        (root / "subs" / student).mkdir(parents=True)
        (root / "subs" / student / "00_demo.ipynb").write_text(json.dumps(nb))
    (root / "subs" / "not_json").mkdir()
    (root / "subs" / "not_json" / "00_demo.ipynb").write_text("{ this is not json")
    path = grade_all(root / "subs", root / "out", root / "reference", cell_timeout=5, total_timeout=120)
    rows = list(csv.DictReader(path.open()))
    return root, {(r["student"], r["exercise"]): r for r in rows}


def score(rows, student):
    return sum(float(r["points"]) for (s, _), r in rows.items() if s == student)


def test_exercises_are_read_from_the_reference():
    exs = exercises_of(notebook(), {"ch00-corpus": 2})
    assert [e.label for e in exs] == ["ch00-add-k", "ch00-corpus", "ch00-by-hand", "ch00-written"]
    assert [e.check_name for e in exs] == ["add_k", "corpus_perplexity", "ppl_by_hand", None]
    assert exs[1].points == 2


def test_correct_submission_gets_full_marks(graded):
    _, rows = graded
    assert score(rows, "correct") == 4  # 1 + 2 + 1; the written exercise is graded by hand
    assert all(rows["correct", e]["reason"] == "passed" for e in ("ch00-add-k", "ch00-corpus", "ch00-by-hand"))


def test_partly_wrong_submission_gets_partial_marks_and_feedback(graded):
    root, rows = graded
    assert score(rows, "partly_wrong") == 2
    assert rows["partly_wrong", "ch00-add-k"]["passed"] == "False"
    text = (root / "out" / "feedback" / "partly_wrong.md").read_text()
    assert "expected" in text and "got" in text and "✓ check_corpus_perplexity" in text


def test_broken_submissions_get_zero_with_a_reason_and_the_batch_goes_on(graded):
    _, rows = graded
    assert score(rows, "broken_import") == 0
    assert "numpy_that_does_not_exist" in rows["broken_import", "ch00-add-k"]["reason"]
    assert rows["loops_forever", "ch00-add-k"]["reason"].startswith("interrupted after the cell time limit")
    assert score(rows, "loops_forever") == 3  # the other exercises are still graded
    assert score(rows, "deleted_cells") == 0
    assert "could not be checked" in rows["deleted_cells", "ch00-corpus"]["reason"]
    assert "not a readable notebook" in rows["not_json", "ch00-add-k"]["reason"]
