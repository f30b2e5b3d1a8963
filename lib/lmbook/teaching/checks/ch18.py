"""Self-checks for chapter 18 (retrieval-augmented generation, tool calls, constrained decoding)."""

from __future__ import annotations

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_run_until_repeat", "check_rrf_by_hand", "check_parse_json_call", "check_integer_answer_mask"]

function_check("run_until_repeat", lambda: [
    Case((["CALL python: 1 + 1", "ANSWER: 2"], 4), hint="an answer ends the run: stop 'answer'."),
    Case((["CALL python: 1 + 1", "CALL python: 1 + 1", "ANSWER: 2"], 4),
         hint="the second identical call is a repeat: record kind 'repeat' and stop, without reading further."),
    Case((["CALL python: 1 + 1", "CALL search: 1 + 1", "CALL python: 1 + 1"], 4),
         hint="a repeat need not follow its twin; and the same argument with another tool is a different call."),
    Case((["Example.", "Example.", "Example."], 3),
         hint="only calls can repeat: a line that does not parse is a parse_failure every time."),
    Case((["CALL pyhton: 1", "CALL pyhton: 1", "ANSWER: 1"], 4),
         hint="a call the parser rejects (unknown tool) is a malformed_call, never a repeat."),
    Case((["CALL python: 2", "CALL python: 2\n", "ANSWER: 2"], 4),
         hint="compare the parsed calls (tool, argument), not the raw lines: a final newline is not part of the "
              "argument."),
    Case((["CALL python: 1", "Example.", "CALL python: 1", "ANSWER: 1"], 4),
         hint="a line that does not parse in between does not reset the calls seen so far: this is a repeat."),
    Case((["CALL python: 1", "CALL python:  1", "ANSWER: 1"], 2),
         hint="the argument is compared exactly as parsed (' 1' is not '1'); the step limit counts every line."),
])


def check_run_until_repeat(fn) -> None:
    """run_until_repeat(lines, max_steps): {"answer", "stop", "kinds"} of the loop fed ``lines`` that stops at
    an answer, at a call identical to an earlier call, or after max_steps lines."""
    run_check("run_until_repeat", fn)


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
