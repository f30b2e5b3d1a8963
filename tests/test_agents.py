"""Chapter 18's agent: the strict tool-call parser (fuzzed), the grammar and the token mask (against brute
force), constrained decoding with a real model class, the loop, and the sandboxed Python tool (escapes)."""

import os
import random

import pytest
import torch
from lmbook import agents
from lmbook.agents import (
    MAX_ARGUMENT,
    Answer,
    CallGrammar,
    TokenMask,
    ToolCall,
    ToolCallError,
    parse_step,
    run_agent,
    value_correct,
    write_step,
)
from lmbook.model import Transformer, TransformerConfig
from lmbook.sandbox import SandboxLimits, ToolResult, bwrap_available, run_python, sandbox_command

VALID = ["CALL python: sorted([3, 1, 2])[-1]", "CALL search: KeyError dict", "ANSWER: 3", "ANSWER: 'cba'\n",
         "CALL python: CALL python: 1", "CALL python: é + ü", "ANSWER:   x  "]


@pytest.mark.parametrize("line, expected", [
    ("CALL python: 2 ** 10", ToolCall("python", "2 ** 10")),
    ("CALL search: with statement\n", ToolCall("search", "with statement")),
    ("ANSWER: 1024", Answer("1024")),
    ("CALL python: CALL search: x", ToolCall("python", "CALL search: x")),  # nesting is just text
])
def test_parse_step_reads_valid_steps(line, expected):
    assert parse_step(line) == expected


@pytest.mark.parametrize("line, message", [
    ("", "must start with 'CALL ' or 'ANSWER: '"),
    ("The answer is 3", "must start with 'CALL ' or 'ANSWER: '"),
    ("call python: 1", "must start with 'CALL '"),
    ("CALL python 1 + 1", "needs ':' after the tool name"),
    ("CALL pyhton: 1", "unknown tool 'pyhton'"),
    ("CALL  python: 1", "unknown tool ' python'"),
    ("CALL python:1", "one space after"),
    ("CALL python:    ", "is empty"),
    ("ANSWER: ", "the answer is empty"),
    ("ANSWER:3", "must start with"),
    ("CALL python: 1\nANSWER: 1", "more than one line"),
    ("CALL python: 1\n\n", "more than one line"),
    ("CALL python: a\tb", "control character"),
    ("CALL python: " + "x" * (MAX_ARGUMENT + 1), f"more than the {MAX_ARGUMENT} allowed"),
    ("CALL python: " + "é" * (MAX_ARGUMENT // 2 + 1), "bytes, more than"),
    (None, "line must be a str"),
    (b"CALL python: 1", "line must be a str"),
])
def test_parse_step_says_what_is_wrong(line, message):
    with pytest.raises(ToolCallError, match=message.replace("(", r"\(").replace("*", r"\*")):
        parse_step(line)


def _mutations(rng: random.Random, n: int):
    """Malformed candidates: truncations, deletions, insertions, replacements, swaps of valid steps; random
    bytes decoded several ways; nesting and repetition."""
    alphabet = "CALpythonsearchANSWER: \n\t\r\x00\x7f()[]{}\"'\\,.-_=é€🙂\ud800"
    for _ in range(n):
        line = rng.choice(VALID)
        kind = rng.randrange(7)
        if kind == 0:
            yield line[:rng.randrange(len(line) + 1)]
        elif kind == 1:
            chars = list(line)
            for _ in range(rng.randint(1, 4)):
                position = rng.randrange(len(chars) + 1)
                action = rng.randrange(3)
                if action == 0 and chars:
                    del chars[min(position, len(chars) - 1)]
                elif action == 1:
                    chars.insert(position, rng.choice(alphabet))
                elif chars:
                    chars[min(position, len(chars) - 1)] = rng.choice(alphabet)
            yield "".join(chars)
        elif kind == 2:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
            yield raw.decode(rng.choice(["latin-1", "utf-8"]), errors=rng.choice(["replace", "surrogateescape",
                                                                                  "ignore"]))
        elif kind == 3:
            yield rng.choice(VALID).rstrip("\n") + rng.choice(["\n", " ", "\n\n", "\r\n"]) + rng.choice(VALID)
        elif kind == 4:
            yield "CALL python: " * rng.randint(1, 60) + "1"
        elif kind == 5:
            yield line.rstrip("\n") + "x" * rng.randint(150, 250)
        else:
            yield "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))


def test_the_parser_never_raises_anything_but_tool_call_error_on_fuzzed_input():
    rng = random.Random(18)
    parsed = errors = 0
    for line in _mutations(rng, 6000):
        try:
            step = parse_step(line)
        except ToolCallError as err:
            errors += 1
            assert str(err)  # a message saying what was wrong
            continue
        parsed += 1  # accepted: it must be exactly a well-formed step
        text = line[:-1] if line.endswith("\n") else line
        assert text == (f"ANSWER: {step.text}" if isinstance(step, Answer) else f"CALL {step.tool}: {step.argument}")
        assert "\n" not in text and all(ord(c) >= 32 and ord(c) != 127 for c in text)
    assert parsed > 300 and errors > 3000  # the fuzzing reaches both sides


def test_the_grammar_accepts_exactly_what_the_parser_accepts():
    rng = random.Random(1)
    grammar = CallGrammar()
    for line in _mutations(rng, 4000):
        try:
            data = line.encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate: no model can produce it as bytes
        state = grammar.advance(grammar.start(), data.rstrip(b"\n") + b"\n")
        try:
            parse_step(line.rstrip("\n") + "\n")
            ok = True
        except ToolCallError:
            ok = False
        assert (state == "done") == ok, line


SMALL_VOCAB = [b"C", b"A", b"L", b"CALL", b"CALL ", b" ", b"p", b"python", b" python", b":", b": ", b"s",
               b"search", b"ANSWER", b"ANSWER:", b"x", b"1 + 1", b"\n", b"x\n", b"\n\n", b" \n", b"\t",
               b"\x7f", "é".encode(), b"\xc3", b"N", b"S", b"W", b"E", b"R", b"y", b"t", b"h", b"o", b"n",
               b"e", b"a", b"r", b"c", b"AN", b"CA", b"LL", b" x" * 30]


def _valid_prefix_by_parser(data: bytes) -> bool:
    """Brute force: some completion turns ``data`` into a step that parse_step accepts (and ends it)."""
    if data.count(b"\n") > 1 or (b"\n" in data and not data.endswith(b"\n")):
        return False
    heads = [b"CALL python: ", b"CALL search: ", b"ANSWER: "]
    if any(h.startswith(data) for h in heads):
        return True
    if data.endswith(b"\n"):
        completions = [b""]
    else:
        completions = [b"", b"x", b"\n", b"x\n"]
    for c in completions:
        try:
            parse_step((data + c).decode("utf-8", "replace"))
        except ToolCallError:
            continue
        return True
    return False


def test_the_mask_keeps_exactly_the_tokens_that_keep_a_valid_prefix():
    vocab = dict(enumerate(SMALL_VOCAB))
    mask = TokenMask(vocab, CallGrammar(), len(vocab))
    rng = random.Random(2)
    checked = 0
    for _ in range(150):  # random walks through the grammar, checking the mask at every state on the way
        text, state = b"", mask.grammar.start()
        for _ in range(rng.randint(0, 12)):
            allowed = mask.allowed(state)
            for i, token in vocab.items():
                assert bool(allowed[i]) == _valid_prefix_by_parser(text + token), (text, token)
                checked += 1
            choices = [i for i in vocab if allowed[i]]
            if not choices or state == "done":
                break
            token = vocab[rng.choice(choices)]
            text, state = text + token, mask.grammar.advance(state, token)
    assert checked > 10_000


def _tiny_model(vocab_size: int, seed: int) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(vocab_size=vocab_size, d_model=16, n_layers=1, n_heads=2, context_length=256)
    return Transformer(config).eval()


@pytest.mark.parametrize("seed", range(8))
def test_every_constrained_output_parses(seed):
    vocab = dict(enumerate(SMALL_VOCAB))
    model = _tiny_model(len(vocab), seed)
    mask = TokenMask(vocab, CallGrammar(), len(vocab))
    budget = MAX_ARGUMENT + 20  # room for any step, one byte a token
    line = write_step(model, torch.tensor([0, 1, 2]), vocab, set(), max_new_tokens=budget, mask=mask)
    assert isinstance(parse_step(line), (ToolCall, Answer)), line


@pytest.mark.parametrize("seed", range(4))
def test_free_decoding_returns_one_line(seed):
    vocab = {0: b"x", 1: b"\n", 2: b"y", 3: b"z\nw"}
    line = write_step(_tiny_model(4, seed), torch.tensor([0]), vocab, {2}, max_new_tokens=20)
    assert "\n" not in line and "y" not in line


def _script(lines):
    seen = []

    def write(transcript):
        seen.append(transcript)
        return lines[len(seen) - 1]
    return write, seen


def test_the_loop_runs_tools_feeds_results_back_and_stops_at_the_answer():
    write, seen = _script(["CALL double: 21", "ANSWER: 42"])
    run = run_agent(write, {"double": lambda a: str(2 * int(a))}, max_steps=4)
    assert run.answer == "42"
    assert [s.kind for s in run.steps] == ["call", "answer"]
    assert seen[1] == "CALL double: 21\nRESULT: 42\n"


def test_the_loop_records_failures_and_stops_at_the_step_limit():
    write, seen = _script(["I think it is 4", "CALL pyhton: 2 + 2", "CALL double 3"])
    run = run_agent(write, {"double": lambda a: a}, max_steps=3)
    assert run.answer is None
    assert [s.kind for s in run.steps] == ["parse_failure", "malformed_call", "malformed_call"]
    assert "unknown tool 'pyhton'" in seen[2]


@pytest.mark.parametrize("answer, value, expected", [
    ("3", "3", True), ("[1,2]", "[1, 2]", True), ('"cba"', "'cba'", True), ("cba", "'cba'", True),
    ("`(3, 2)`", "(3, 2)", True), ("3.0", "3", False), ("True", "1", False), ("[1, 2", "[1, 2]", False),
    ("", "0", False), ("0b101", "'0b101'", True),
])
def test_value_correct(answer, value, expected):
    assert value_correct(answer, value) is expected


needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot build the sandbox here")

ESCAPES = {
    "read a host file": "open('/etc/passwd').read()",
    "read the book": f"open({str(agents.__file__)!r}).read()",
    "open a socket": "__import__('socket').create_connection(('1.1.1.1', 53), timeout=1)",
    "write outside scratch": "open('/usr/lmbook-was-here', 'w')",
    "fork bomb": "[__import__('os').fork() for _ in range(200)]",
    "infinite loop": "sum(iter(int, 1))",
    "huge memory": "bytearray(10 ** 10)",
    "huge file": "open('/tmp/f', 'wb').write(bytes(10 ** 8))",
    "kill the parent": "__import__('os').kill(1, 9) or 1/0",
}


@needs_bwrap
@pytest.mark.parametrize("what", ESCAPES)
def test_the_sandbox_contains_escape_attempts(what):
    result = run_python(ESCAPES[what], SandboxLimits(seconds=3.0))
    assert result.ok is False, (what, result)
    assert "root:" not in result.text  # no line of a host file came back


@needs_bwrap
def test_the_sandbox_evaluates_and_reports_errors_as_text():
    assert run_python("sorted([3, 1, 2])[-1]").text == "3"
    assert run_python("1 / 0").text == "ZeroDivisionError: division by zero"
    assert run_python("x = 1").text.startswith("SyntaxError")  # statements are not expressions
    assert "more characters" in run_python("'x' * 5000").text


@needs_bwrap
def test_the_loop_survives_every_escape_attempt_as_a_tool_error():
    write, _ = _script([f"CALL python: {code}" for code in ESCAPES.values()])
    run = run_agent(write, agents.make_tools(), max_steps=len(ESCAPES))
    assert [s.kind for s in run.steps] == ["call"] * len(ESCAPES)
    assert all(s.observation.startswith("error: ") for s in run.steps)


@needs_bwrap
def test_stray_output_cannot_pose_as_the_result():
    # stdout is not the result channel: a printed "OK 5" before an error does not count
    assert run_python("print('OK 5') or 1/0") == ToolResult(False, "ZeroDivisionError: division by zero")
    # forked children leave without writing: only the top process's result comes back
    assert run_python("[__import__('os').fork() for _ in range(3)] and 7") == ToolResult(True, "7")


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="the process limit (RLIMIT_NPROC as nobody) exists only for root")
def test_the_process_limit_stops_a_fork_bomb_before_the_timeout():
    result = run_python("[__import__('os').fork() for _ in range(200)]", SandboxLimits(seconds=20.0))
    assert result.text.startswith("BlockingIOError"), result  # the limit refused a fork, not the wall clock


def test_a_limit_the_caller_may_not_set_comes_back_as_a_result(monkeypatch):
    def refuse(limits, user):
        def apply():
            raise ValueError("not allowed to raise limit")
        return apply
    monkeypatch.setattr("lmbook.sandbox.shutil.which", lambda name, **kw: "/usr/bin/bwrap")
    monkeypatch.setattr("lmbook.sandbox._limit", refuse)
    result = run_python("1 + 1")
    assert result.ok is False and result.text.startswith("SandboxError: could not start the jail"), result


def test_the_jail_binds_no_home_directory(monkeypatch, tmp_path):
    monkeypatch.setattr("lmbook.sandbox.Path.home", lambda: tmp_path / "home")
    with pytest.raises(ValueError, match="home directory"):
        sandbox_command(str(tmp_path / "home" / "bin" / "python"))
    command = sandbox_command(str(tmp_path / "home" / "venv" / "bin" / "python"))
    assert str(tmp_path / "home" / "venv") not in command  # only the binary and lib/pythonX.Y, never the prefix


def test_without_bubblewrap_the_tool_refuses(monkeypatch):
    monkeypatch.setattr("lmbook.sandbox.shutil.which", lambda name, **kw: None)
    result = run_python("1 + 1")
    assert result.ok is False and "refusing" in result.text
