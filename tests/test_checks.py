"""Every self-check accepts the reference answer and rejects plausible wrong answers with a helpful message,
without raising into the student's face."""

import math

import pytest
from check_helpers import verdict
from lmbook import checks


def test_student_errors_are_shown_as_theirs_and_stubs_are_polite(capsys):
    def buggy(c_hw, c_h, V, k):
        return c_hw / 0

    ok, out = verdict(capsys, checks.check_add_k, buggy, "add_k")
    assert not ok and "ZeroDivisionError" in out and "c_hw / 0" in out and "_core.py" not in out

    def stub(c_hw, c_h, V, k):
        raise NotImplementedError

    ok, out = verdict(capsys, checks.check_add_k, stub, "add_k")
    assert not ok and "not attempted yet" in out

    ok, out = verdict(capsys, checks.check_add_k, 0.5, "add_k")
    assert not ok and "Pass the function" in out


@pytest.mark.parametrize("expected,got,same", [
    (1.0, 1.0 + 1e-9, True), (1.0, 1.1, False), ([1, 2], [1, 2, 3], False), (math.inf, math.inf, True),
    ("a", "a", True), ({"x": 1.0}, {"x": 1.0}, True), ({"x": 1.0}, {"y": 1.0}, False), (None, 0, False),
])
def test_close(expected, got, same):
    assert checks.close(expected, got) is same


def test_every_check_used_by_the_book_exists_and_is_tested_with_a_wrong_answer():
    import json
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    used = set()
    for nb in (root / "notebooks").glob("*.ipynb"):
        for cell in json.loads(nb.read_text())["cells"]:
            used |= set(re.findall(r"checks\.(check_\w+)\(", "".join(cell["source"])))
    tests = "\n".join(p.read_text() for p in (root / "tests").glob("test_checks*.py"))
    for name in sorted(used):
        assert callable(getattr(checks, name, None)), f"the book calls lmbook.checks.{name}, which does not exist"
        short = name.removeprefix("check_")
        assert re.search(rf"\b{name}\b|[\"']{short}[\"']", tests), f"{name} has no test with a wrong answer"


def test_hand_answers_accept_every_four_figure_value_in_the_tolerance_and_call_three_figures_coarse():
    from lmbook.teaching.checks._core import _too_coarse, answer_digests, answer_matches, coarse_digest

    answer = 0.397400  # every 4-figure value from 0.3972 to 0.3976 is right; none outside is
    digests = answer_digests("demo", answer)
    assert all(answer_matches("demo", v, digests) for v in (0.3972, 0.3973, 0.3974, 0.3975, 0.3976))
    assert not any(answer_matches("demo", v, digests) for v in (0.3970, 0.3971, 0.3977, 0.397, 0.4))
    entry = {"digests": digests, "coarse": coarse_digest("demo", answer)}
    assert _too_coarse("demo", 0.397, entry) and not _too_coarse("demo", 0.398, entry)
    assert not _too_coarse("demo", 0.3971, entry)  # four figures, wrong: not "coarse"
    assert answer_matches("demo", 9.9995, answer_digests("demo", 9.998))  # across a power of ten
    assert answer_matches("demo", 10.0, answer_digests("demo", 9.998))


def test_a_whole_number_answer_must_be_exact():
    from lmbook.teaching.checks._core import CHECKS, answer_check, answer_digests, answer_matches

    answer_check("demo_whole", whole=True)
    try:
        digests = answer_digests("demo_whole", 12461)
        assert answer_matches("demo_whole", 12461, digests) and answer_matches("demo_whole", 12461.0, digests)
        assert not any(answer_matches("demo_whole", v, digests) for v in (12460, 12462, 12461.1, 12455, 12470))
    finally:
        del CHECKS["demo_whole"]
