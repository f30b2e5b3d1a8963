"""Answer keys for chapter 18 (retrieval-augmented generation, tool calls, constrained decoding)."""

from __future__ import annotations

import json
import re

from lmbook.agents import Answer, ToolCallError, parse_step
from lmbook.teaching.checks import Case
from lmbook.teaching.checks.ch18 import TOKENS

from . import Key


def run_until_repeat(lines, max_steps):
    answer, stop, kinds, seen = None, "limit", [], set()
    for line in lines[:max_steps]:
        try:
            step = parse_step(line)
        except ToolCallError:
            kinds.append("malformed_call" if line.startswith("CALL") else "parse_failure")
            continue
        if isinstance(step, Answer):
            answer, stop = step.text, "answer"
            kinds.append("answer")
            break
        if step in seen:
            stop = "repeat"
            kinds.append("repeat")
            break
        seen.add(step)
        kinds.append("call")
    return {"answer": answer, "stop": stop, "kinds": kinds}


def parse_json_call(text):
    try:
        call = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(call, dict) or set(call) != {"tool", "argument"}:
        return None
    tool, argument = call["tool"], call["argument"]
    if tool not in ("python", "search") or not isinstance(argument, str) or not argument.strip():
        return None
    return [tool, argument]


_COMPLETE = re.compile(r"ANSWER: -?[0-9]+\n")
_OPEN = re.compile(r"ANSWER: -?[0-9]*")


def _valid_prefix(s):
    return "ANSWER: ".startswith(s) or bool(_OPEN.fullmatch(s)) or bool(_COMPLETE.fullmatch(s))


def integer_answer_mask(prefix, tokens):
    return [i for i, t in enumerate(tokens) if t and _valid_prefix(prefix + t)]


def _hidden_repeat():
    return [Case((["ANSWER: 3", "CALL python: 3"], 1)), Case((["CALL python: 3"], 0)),
            Case((["CALL search: with", "CALL python: 1", "CALL search: with", "ANSWER: x"], 5)),
            Case((["CALL python: 1", "ANSWER: 1"], 1)), Case((["Example.", "ANSWER: 1", "ANSWER: 2"], 3)),
            Case((["CALL python:1", "CALL python:1", "CALL python: 1", "CALL python: 1"], 4)),
            Case((["CALL search: a b", "CALL search: a  b", "CALL search: a b"], 3)),
            Case((["CALL python: 1", "CALL python: 2", "CALL python: 3"], 3))]


def _hidden_json():
    texts = ['{"argument": "x", "tool": "search"}', ' {"tool": "python", "argument": "[1, 2][0]"} ',
             '{"tool": "python"}', '{"tool": "Python", "argument": "1"}', "CALL python: 1", "", "null",
             '{"tool": "python", "argument": ""}', '{"tool": ["python"], "argument": "1"}',
             '{"tool": "python", "argument": ' * 1500 + '"1"' + "}" * 1500, 12]
    return [Case((t,)) for t in texts]


def _hidden_mask():
    more = ["ANS", "WER", "WER: ", "9", "99\n", "-0", "--", "1-", "\n\n", "ANSWER: 1\n", "a", "5 "]
    return [Case((p, TOKENS + more)) for p in ("", "ANS", "ANSWER: 7", "ANSWER: -3", "ANSWER", "ANSWER: -12\n")]


KEYS = {
    "run_until_repeat": Key(run_until_repeat, _hidden_repeat),
    "rrf_by_hand": Key(answer=1 / 62 + 1 / 65),
    "parse_json_call": Key(parse_json_call, _hidden_json),
    "integer_answer_mask": Key(integer_answer_mask, _hidden_mask),
}
