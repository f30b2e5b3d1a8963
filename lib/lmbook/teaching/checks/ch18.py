"""Self-checks for chapter 18 (retrieval-augmented generation, tool calls, constrained decoding)."""

from __future__ import annotations

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_rrf", "check_rrf_by_hand", "check_parse_json_call", "check_integer_answer_mask"]

function_check("rrf", lambda: [
    Case(([[1, 2, 3], [3, 1]], 60),
         hint="sum 1 / (k + rank) over the rankings that hold a document; ranks start at 1."),
    Case(([[5, 6], [6, 5]], 60), hint="equal scores: the document with the better best single rank first, then the "
                                      "smaller id."),
    Case(([[10, 20], [30, 20]], 1), hint="ranks start at 1: with k = 1 a first place adds 1/2, not 1."),
    Case(([[1, 2], [], [2, 4]], 10), hint="an empty ranking adds nothing; a document missing from a ranking gets 0 "
                                          "from it."),
    Case(([[9, 3], [7, 3]], 0), hint="a three-way tie (1 = 1/2 + 1/2): 9 and 7 were ranked first somewhere, 3 only "
                                     "second, so 3 comes last; between 9 and 7 the smaller id first."),
    Case(([[8, 5, 2, 6], [2, 6, 8, 5], [4]], 2), hint="ties in RRF(d) must be broken by the best single rank first, "
                                                      "then by the smaller id, not by order of appearance."),
])


def check_rrf(fn) -> None:
    """rrf(rankings, k): every document id, best first by RRF(d) = sum_r 1 / (k + rank_r(d))."""
    run_check("rrf", fn)


answer_check("rrf_by_hand", hint="RRF(d) = 1 / (k + r1) + 1 / (k + r2) with ranks counted from 1 and k = 60.")


def check_rrf_by_hand(answer) -> None:
    """The RRF score, k = 60, of a passage ranked 2nd by BM25 and 5th by the dense retriever."""
    check_answer("rrf_by_hand", answer)


function_check("parse_json_call", lambda: [
    Case(('{"tool": "python", "argument": "2 ** 10"}',)),
    Case(('{"tool": "search", "argument": "with statement"}',)),
    Case(('{"tool": "python", "argument": "1 + 1"',), hint="not valid JSON (a missing brace): return None."),
    Case(('{"tool": "shell", "argument": "ls"}',), hint="an unknown tool: return None."),
    Case(('{"tool": "python", "argument": "1", "extra": 0}',), hint="exactly the two keys tool and argument."),
    Case(('{"tool": "python", "argument": 3}',), hint="the argument must be a string."),
    Case(('["python", "1"]',), hint="a JSON list is not a call: return None."),
    Case(('{"tool": "python", "argument": "   "}',), hint="a blank argument: return None."),
    Case(("[" * 3000,), hint="deep nesting makes json.loads raise RecursionError, not ValueError: return None."),
    Case((None,), hint="not a string at all: return None, do not raise."),
])


def check_parse_json_call(fn) -> None:
    """parse_json_call(text): [tool, argument] for a well-formed JSON call, else None."""
    run_check("parse_json_call", fn)


TOKENS = ["A", "ANSWER", ":", ": ", " ", "-", "1", "23", "4\n", "\n", "x", "ANSWER: ", "-5", "0", " 7", "R: 1"]

function_check("integer_answer_mask", lambda: [
    Case(("", TOKENS), hint="at the start only tokens that begin spelling 'ANSWER: ' are allowed."),
    Case(("ANSWER:", TOKENS), hint="after 'ANSWER:' comes a space, then the number."),
    Case(("ANSWER: ", TOKENS), hint="a number may start with '-'; then digits."),
    Case(("ANSWER: -", TOKENS), hint="after '-' a digit must come: '-\\n' is not a number."),
    Case(("ANSWER: 12", TOKENS), hint="after a digit: more digits, or the newline that ends the answer."),
    Case(("ANSWER: 12\n", TOKENS), hint="after the newline the answer is complete: nothing may follow."),
])


def check_integer_answer_mask(fn) -> None:
    """integer_answer_mask(prefix, tokens): the indices of the tokens that keep prefix a valid prefix of
    'ANSWER: ' + an optional '-' + one or more digits + a newline."""
    run_check("integer_answer_mask", fn)
