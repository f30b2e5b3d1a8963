"""Chapter 18's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import json
import re

import pytest
from answer_keys.ch18 import integer_answer_mask, parse_json_call, rrf
from lmbook import checks
from lmbook.checks import RESULTS


def rrf_ranks_from_zero(rankings, k):
    scores = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            scores[doc] = scores.get(doc, 0.0) + 1 / (k + rank)
    return sorted(scores, key=lambda d: (-scores[d], d))


def rrf_ties_by_id_only(rankings, k):
    scores = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1 / (k + rank)
    return sorted(scores, key=lambda d: (-scores[d], -d))  # ties by the larger id


def rrf_without_best_rank(rankings, k):
    scores = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1 / (k + rank)
    return sorted(scores, key=lambda d: (-scores[d], d))  # ties by id only, the best rank ignored


def rrf_insertion_order(rankings, k):
    scores = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1 / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])  # ties left in order of first appearance


def parse_json_call_lenient(text):
    try:
        call = json.loads(text)
    except ValueError:
        return None
    if not isinstance(call, dict):
        return None
    return [call.get("tool"), call.get("argument")]  # accepts extra keys, unknown tools and non-str arguments


def parse_json_call_strict_but_narrow(text):  # right on every well-typed input, but catches only ValueError
    try:
        json.loads(text)
    except ValueError:
        return None
    return parse_json_call(text)


def integer_mask_allows_empty_number(prefix, tokens):
    def ok(s):
        return "ANSWER: ".startswith(s) or bool(re.fullmatch(r"ANSWER: -?[0-9]*\n?", s))
    return [i for i, t in enumerate(tokens) if ok(prefix + t)]


def integer_mask_per_character(prefix, tokens):  # looks only at the token's first character
    def ok(s):
        return "ANSWER: ".startswith(s) or bool(re.fullmatch(r"ANSWER: -?[0-9]*\n?", s))
    return [i for i, t in enumerate(tokens) if ok(prefix + t[:1])]


@pytest.mark.parametrize("check, right, wrongs", [
    (checks.check_rrf, rrf, [rrf_ranks_from_zero, rrf_ties_by_id_only, rrf_without_best_rank,
                             rrf_insertion_order]),
    (checks.check_parse_json_call, parse_json_call, [parse_json_call_lenient, parse_json_call_strict_but_narrow]),
    (checks.check_integer_answer_mask, integer_answer_mask, [integer_mask_allows_empty_number,
                                                            integer_mask_per_character]),
])
def test_function_checks(check, right, wrongs, capsys):
    name = check.__name__.removeprefix("check_")
    check(right)
    assert RESULTS[name] is True, capsys.readouterr().out
    for wrong in wrongs:
        check(wrong)
        out = capsys.readouterr().out
        assert RESULTS[name] is False and "✗" in out and ("hint" in out or "expected" in out or "raised" in out), out


def test_answer_check(capsys):
    checks.check_rrf_by_hand(1 / 62 + 1 / 65)
    assert RESULTS["rrf_by_hand"] is True
    for wrong in (1 / 61 + 1 / 64, 1 / 2 + 1 / 5, 1 / 62 * 1 / 65):  # ranks from 0; k forgotten; a product
        checks.check_rrf_by_hand(wrong)
        assert RESULTS["rrf_by_hand"] is False
    capsys.readouterr()


def test_stub_is_reported_politely(capsys):
    def stub(*args):
        raise NotImplementedError
    checks.check_rrf(stub)
    assert "not attempted" in capsys.readouterr().out
