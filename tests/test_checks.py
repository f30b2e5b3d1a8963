"""Every self-check accepts the reference answer and rejects plausible wrong answers with a helpful message,
without raising into the student's face."""

import math

import pytest
from check_helpers import verdict
from lmbook import checks


def test_ppl_by_hand(capsys):
    ok, out = verdict(capsys, checks.check_ppl_by_hand, (0.2 * 0.5 * 0.1 * 0.4) ** -0.25, "ppl_by_hand")
    assert ok and "✓" in out
    ok, out = verdict(capsys, checks.check_ppl_by_hand, (0.2 * 0.5 * 0.1 * 0.4) ** -1, "ppl_by_hand")
    assert not ok and "hint" in out  # forgot the 1/N
    ok, out = verdict(capsys, checks.check_ppl_by_hand, None, "ppl_by_hand")
    assert not ok and "not answered" in out
    ok, out = verdict(capsys, checks.check_ppl_by_hand, "five", "ppl_by_hand")
    assert not ok and "expected a number" in out


def test_add_k(capsys):
    good = lambda c_hw, c_h, V, k: (c_hw + k) / (c_h + k * V)  # noqa: E731
    assert verdict(capsys, checks.check_add_k, good, "add_k")[0]
    no_kv = lambda c_hw, c_h, V, k: (c_hw + k) / (c_h + V)  # noqa: E731  (Laplace denominator with any k)
    ok, out = verdict(capsys, checks.check_add_k, no_kv, "add_k")
    assert not ok and "expected" in out and "got" in out and "input" in out


def test_corpus_perplexity(capsys):
    good = lambda ps: math.exp(-sum(math.log(p) for s in ps for p in s) / sum(map(len, ps)))  # noqa: E731
    assert verdict(capsys, checks.check_corpus_perplexity, good, "corpus_perplexity")[0]

    def mean_of_ppl(ps):
        return sum(math.prod(s) ** (-1 / len(s)) for s in ps) / len(ps)

    ok, out = verdict(capsys, checks.check_corpus_perplexity, mean_of_ppl, "corpus_perplexity")
    assert not ok and "pool all tokens" in out


def test_optimal_logit_gap(capsys):
    def good(K, eps):
        return math.inf if eps == 0 else math.log((1 - eps + eps / K) / (eps / K))

    assert verdict(capsys, checks.check_optimal_logit_gap, good, "optimal_logit_gap")[0]

    def forgets_true_class_share(K, eps):  # uses eps/(K-1) on the wrong classes and 1-eps on the true one
        return math.inf if eps == 0 else math.log((1 - eps) / (eps / (K - 1)))

    ok, out = verdict(capsys, checks.check_optimal_logit_gap, forgets_true_class_share, "optimal_logit_gap")
    assert not ok and "differs" in out


def test_bits_per_char(capsys):
    good = lambda ppl, n_tok, n_chr: n_tok * math.log2(ppl) / n_chr  # noqa: E731
    assert verdict(capsys, checks.check_bits_per_char, good, "bits_per_char")[0]
    nats = lambda ppl, n_tok, n_chr: n_tok * math.log(ppl) / n_chr  # noqa: E731
    ok, out = verdict(capsys, checks.check_bits_per_char, nats, "bits_per_char")
    assert not ok and "base 2" in out


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
