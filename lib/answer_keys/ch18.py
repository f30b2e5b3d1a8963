"""Answer keys for chapter 18 (retrieval-augmented generation, tool calls, constrained decoding)."""

from __future__ import annotations

import json
import re

from lmbook.teaching.checks import Case
from lmbook.teaching.checks.ch18 import TOKENS

from . import Key


def rrf(rankings, k):
    scores, best = {}, {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
    return sorted(scores, key=lambda d: (-scores[d], best[d], d))


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


def _hidden_rrf():
    return [Case(([[3, 1, 2], [2, 3], [1]], 60)), Case(([[10, 20, 30, 40], [40, 30, 20, 10]], 1)),
            Case(([[4, 5, 6], [7, 5]], 2)), Case(([[1]], 60)), Case(([[9, 8, 7, 6, 5], [5, 6, 7, 8, 9], [7]], 5)),
            Case(([[6, 1], [5, 1]], 0)), Case(([[3, 9, 2], [2, 4, 9], [1]], 1))]


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
    "rrf": Key(rrf, _hidden_rrf, giveaways=("reciprocal_rank_fusion", "fuse")),
    "rrf_by_hand": Key(answer=1 / 62 + 1 / 65),
    "parse_json_call": Key(parse_json_call, _hidden_json),
    "integer_answer_mask": Key(integer_answer_mask, _hidden_mask),
}
