"""Chapter 18's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import json
import re

import pytest
from answer_keys.ch18 import integer_answer_mask, parse_json_call, run_until_repeat
from lmbook import agents, checks
from lmbook.checks import RESULTS


def _kind(line):
    try:
        return agents.parse_step(line)
    except agents.ToolCallError:
        return "malformed_call" if line.startswith("CALL") else "parse_failure"


def repeat_of_previous_only(lines, max_steps):  # catches only a call identical to the one just before
    kinds, last = [], None
    for line in lines[:max_steps]:
        step = _kind(line)
        if isinstance(step, agents.Answer):
            return {"answer": step.text, "stop": "answer", "kinds": kinds + ["answer"]}
        if isinstance(step, agents.ToolCall) and step == last:
            return {"answer": None, "stop": "repeat", "kinds": kinds + ["repeat"]}
        kinds.append("call" if isinstance(step, agents.ToolCall) else step)
        last = step if isinstance(step, agents.ToolCall) else last
    return {"answer": None, "stop": "limit", "kinds": kinds}


def repeat_of_raw_lines(lines, max_steps):  # any identical line repeats, compared as text
    kinds, seen = [], set()
    for line in lines[:max_steps]:
        if line in seen:
            return {"answer": None, "stop": "repeat", "kinds": kinds + ["repeat"]}
        seen.add(line)
        step = _kind(line)
        if isinstance(step, agents.Answer):
            return {"answer": step.text, "stop": "answer", "kinds": kinds + ["answer"]}
        kinds.append("call" if isinstance(step, agents.ToolCall) else step)
    return {"answer": None, "stop": "limit", "kinds": kinds}


def repeat_forgetting_after_failures(lines, max_steps):  # a line that does not parse resets the calls seen
    kinds, seen = [], set()
    for line in lines[:max_steps]:
        step = _kind(line)
        if isinstance(step, agents.Answer):
            return {"answer": step.text, "stop": "answer", "kinds": kinds + ["answer"]}
        if isinstance(step, agents.ToolCall) and step in seen:
            return {"answer": None, "stop": "repeat", "kinds": kinds + ["repeat"]}
        seen = seen | {step} if isinstance(step, agents.ToolCall) else set()
        kinds.append("call" if isinstance(step, agents.ToolCall) else step)
    return {"answer": None, "stop": "limit", "kinds": kinds}


def repeat_without_step_limit(lines, max_steps):  # the right rule, reading every line
    return run_until_repeat(lines, len(lines))


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
    (checks.check_run_until_repeat, run_until_repeat, [repeat_of_previous_only, repeat_of_raw_lines,
                                                       repeat_without_step_limit, repeat_forgetting_after_failures]),
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
    checks.check_run_until_repeat(stub)
    assert "not attempted" in capsys.readouterr().out
