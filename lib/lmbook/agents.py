"""Chapter 18: a minimal tool-using agent: a fixed tool-call format, a strict parser, the loop, and
constrained decoding of the call.

- The format: the model writes one line per step, ``CALL <tool>: <argument>`` or ``ANSWER: <text>``;
  the loop answers a call with a line ``RESULT: <observation>``;
- :func:`parse_step`: the strict parser; it returns a :class:`ToolCall` or an :class:`Answer`, or raises a
  :class:`ToolCallError` that says what was wrong, and never any other exception;
- :class:`CallGrammar` and :class:`TokenMask`: the same format as a byte-level automaton, and the mask over a
  tokenizer's vocabulary of the tokens that keep the text a valid prefix of a step (constrained decoding);
- :func:`write_step`: greedy decoding of one step with :class:`lmbook.model.Transformer`, free or constrained;
- :func:`run_agent`: the loop (write, parse, run the tool, append the observation) with a step limit;
- :func:`make_tools` (the manual search of :mod:`lmbook.rag` and the sandboxed Python of :mod:`lmbook.sandbox`)
  and :func:`value_correct`, the check of an answer to "what does this expression evaluate to".

Left out on purpose: JSON schemas and several calls per step, tool choice by a trained router, memory across
questions, and planning or reflection prompts.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import torch

from . import validate

__all__ = ["TOOLS", "MAX_ARGUMENT", "ToolCall", "Answer", "ToolCallError", "parse_step", "CallGrammar",
           "TokenMask", "write_step", "Step", "AgentRun", "run_agent", "AGENT_SYSTEM", "make_tools",
           "value_correct"]

TOOLS = ("python", "search")
MAX_ARGUMENT = 200  # bytes of UTF-8 in an argument or an answer


@dataclass(frozen=True)
class ToolCall:
    tool: str
    argument: str


@dataclass(frozen=True)
class Answer:
    text: str


class ToolCallError(ValueError):
    """A step that is not a well-formed ``CALL <tool>: <argument>`` or ``ANSWER: <text>`` line."""


def parse_step(line, tools=TOOLS):
    """``"CALL python: 2 ** 10"`` -> ToolCall("python", "2 ** 10"); ``"ANSWER: 1024"`` -> Answer("1024").

    Strict: one line (one final newline allowed), no ASCII control characters, the prefix ``CALL `` with a
    known tool, a colon and one space, or the prefix ``ANSWER: ``; then 1 to MAX_ARGUMENT bytes, not all spaces.
    Anything else raises ToolCallError naming what was wrong.
    """
    text = _check_line(line, tools)
    if text.startswith("ANSWER: "):
        return Answer(_argument(text[len("ANSWER: "):], "the answer"))
    if not text.startswith("CALL "):
        _reject(f"a step must start with 'CALL ' or 'ANSWER: ', got {_show(text)}")
    name, colon, rest = text[len("CALL "):].partition(":")
    if not colon:
        _reject(f"a call needs ':' after the tool name, as in 'CALL python: 1 + 1', got {_show(text)}")
    if name not in tools:
        _reject(f"unknown tool {_show(name)}; the tools are {', '.join(tools)}")
    if not rest.startswith(" "):
        _reject(f"a call needs one space after '{name}:', got {_show(text)}")
    return ToolCall(name, _argument(rest[1:], f"the argument of {name}"))


def _reject(message: str):
    raise ToolCallError(message)


def _check_line(line, tools) -> str:
    validate.strings("tools", tools)
    if not isinstance(line, str):
        raise ToolCallError(f"line must be a str (one step), got {validate.describe(line)}")
    text = line[:-1] if line.endswith("\n") else line
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        what = "more than one line" if bad == "\n" else f"the control character {bad!r}"
        raise ToolCallError(f"line must be one step, one line without control characters, got {what}")
    return text


def _argument(argument: str, what: str) -> str:
    if not argument.strip(" "):
        raise ToolCallError(f"{what} is empty")
    size = len(argument.encode("utf-8", "surrogatepass"))
    if size > MAX_ARGUMENT:
        raise ToolCallError(f"{what} has {size} bytes, more than the {MAX_ARGUMENT} allowed")
    return argument


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


class CallGrammar:
    """The step format as an automaton over bytes. A state is ("head", bytes so far) while the text is a
    prefix of one of the heads ``CALL <tool>: `` and ``ANSWER: ``; then ("argument", bytes, has a non-space);
    then "done" after the newline that ends a non-empty argument. :meth:`advance` returns None when the
    bytes cannot continue a valid step."""

    def __init__(self, tools=TOOLS):
        validate.strings("tools", tools)
        self.heads = [f"CALL {t}: ".encode() for t in tools] + [b"ANSWER: "]

    def start(self):
        return ("head", b"")

    def advance(self, state, data: bytes):
        """The state after ``data`` (bytes), or None if no valid step starts with the text so far."""
        _check_state(state)
        if not isinstance(data, bytes):
            raise TypeError(f"data must be bytes, got {validate.describe(data)}")
        return self._advance(state, data)

    def _advance(self, state, data: bytes):
        for byte in data:
            if state is None or state == "done":
                return None
            state = self._step(state, byte)
        return state

    def _step(self, state, byte: int):
        if state[0] == "head":
            text = state[1] + bytes([byte])
            if text in self.heads:
                return ("argument", 0, False)
            return ("head", text) if any(h.startswith(text) for h in self.heads) else None
        _, size, content = state
        if byte == 10:  # a newline ends the step, if the argument holds something
            return "done" if content else None
        if byte < 32 or byte == 127 or size + 1 > MAX_ARGUMENT - (not content and byte == 32):
            return None  # too long, or a blank argument with no room left for a non-space
        return ("argument", size + 1, content or byte != 32)


class TokenMask:
    """For a vocabulary ``token_bytes`` {id: bytes} (special tokens excluded: they are never allowed), the
    tokens whose bytes keep the text a valid prefix of a step: :meth:`allowed` (V,) bool for a state.
    Head states are few and cached; argument states are computed from per-token features at once."""

    def __init__(self, token_bytes: dict, grammar: CallGrammar, vocab_size: int):
        _check_mask(token_bytes, grammar, vocab_size)
        self.grammar, self.vocab_size, self.tokens = grammar, vocab_size, dict(token_bytes)
        self._head_masks: dict = {}
        body_ok, newline, body_len, content = [], [], [], []
        ids = sorted(self.tokens)
        for i in ids:
            data = self.tokens[i]
            ends = data.endswith(b"\n")
            body = data[:-1] if ends else data
            body_ok.append(bool(data) and all(32 <= b != 127 for b in body))
            newline.append(ends)
            body_len.append(len(body))
            content.append(any(b != 32 for b in body))
        self.ids = torch.tensor(ids)
        self.body_ok, self.newline = torch.tensor(body_ok), torch.tensor(newline)
        self.body_len, self.content = torch.tensor(body_len), torch.tensor(content)

    def allowed(self, state) -> torch.Tensor:
        """(V,) bool: True for the tokens that may come next in ``state`` (a state of the grammar)."""
        _check_state(state)
        if state is None or state == "done":
            return torch.zeros(self.vocab_size, dtype=torch.bool)
        if state[0] == "head":
            if state not in self._head_masks:
                ok = [i for i, data in self.tokens.items() if data and self.grammar._advance(state, data) is not None]
                self._head_masks[state] = self._to_mask(torch.tensor(ok, dtype=torch.long))
            return self._head_masks[state]
        _, size, has_content = state
        ok = self.body_ok & (size + self.body_len <= MAX_ARGUMENT)
        ok &= ~self.newline | has_content | self.content  # a newline only ends a non-empty argument
        ok &= has_content | self.content | (size + self.body_len < MAX_ARGUMENT)  # room left for a non-space
        return self._to_mask(self.ids[ok])

    def _to_mask(self, ids: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        mask[ids] = True
        return mask


@torch.no_grad()
def write_step(model, prompt_ids: torch.Tensor, token_bytes: dict, stop_ids, max_new_tokens: int = 48,
               mask: TokenMask | None = None) -> str:
    """Greedy decoding of one step after ``prompt_ids`` (T,): free (stop at the first newline after some text,
    a token of ``stop_ids`` or ``max_new_tokens``) or, with ``mask``, only tokens the grammar allows until the
    step is done. Returns the step's line, without leading whitespace or the newline."""
    _check_write_step(model, prompt_ids, token_bytes, stop_ids, max_new_tokens, mask)
    from .kv_cache import KVCache

    cache = KVCache.for_model(model, max_len=len(prompt_ids) + max_new_tokens)
    ids, out = prompt_ids[None], b""  # (1, T)
    state = mask.grammar.start() if mask is not None else None
    for _ in range(max_new_tokens):
        logits = model(ids, cache=cache, last_only=True)[0, -1].float()  # (V,)
        if mask is not None:
            logits = logits.masked_fill(~mask.allowed(state), float("-inf"))
        token = int(logits.argmax())
        if token in stop_ids:
            break
        out += token_bytes[token]
        if mask is not None:
            state = mask.grammar._advance(state, token_bytes[token])
        if b"\n" in out.lstrip() or state == "done":  # blank lines before the step do not end it
            break
        ids = torch.tensor([[token]])  # (1, 1): the cache holds the rest
    return out.decode("utf-8", "replace").lstrip().split("\n")[0]


@dataclass
class Step:
    line: str           # what the model wrote
    kind: str           # "call", "answer", "parse_failure" (not a call) or "malformed_call"
    observation: str    # the tool's result or the parser's error, fed back as "RESULT: ..."


@dataclass
class AgentRun:
    answer: str | None          # None when the step limit came first
    steps: list = field(default_factory=list)


AGENT_SYSTEM = ("You can use tools. To use one, write one line: CALL python: <expression> runs Python and "
                "shows the value; CALL search: <words> searches the Python manual. The result comes back on a "
                "line RESULT: ... When you know the answer, write one line: ANSWER: <answer>\n"
                "Example.\nQuestion: What does len('abc') * 2 evaluate to?\nCALL python: len('abc') * 2\n"
                "RESULT: 6\nANSWER: 6")


def run_agent(write, tools: dict, max_steps: int = 4) -> AgentRun:
    """The loop: ``write(transcript)`` returns the model's next line; parse it; run the tool and append
    ``line`` and ``RESULT: observation`` to the transcript; stop at an answer or after ``max_steps`` lines.
    A line that does not parse is recorded and its error fed back as the observation."""
    _check_run_agent(write, tools, max_steps)
    run, transcript = AgentRun(None), ""
    for _ in range(max_steps):
        line = write(transcript)
        try:
            step = parse_step(line, tuple(tools))
        except ToolCallError as err:
            kind = "malformed_call" if str(line).startswith("CALL") else "parse_failure"
            run.steps.append(Step(line, kind, f"error: {err}"))
        else:
            match step:
                case Answer(text):
                    run.steps.append(Step(line, "answer", ""))
                    run.answer = text
                    return run
                case ToolCall(tool, argument):
                    run.steps.append(Step(line, "call", tools[tool](argument)))
        transcript += f"{line}\nRESULT: {run.steps[-1].observation}\n"
    return run


def make_tools(search=None, chars: int = 300) -> dict:
    """The chapter's tools: ``python`` (:func:`lmbook.sandbox.run_python`, "error: ..." on failure) and, given
    a :class:`lmbook.rag.PassageSearch`, ``search`` (the top passage, cut to ``chars`` characters)."""
    _check_make_tools(search, chars)
    from .sandbox import run_python

    def python(expression: str) -> str:
        result = run_python(expression)
        return result.text if result.ok else f"error: {result.text}"

    tools = {"python": python}
    if search is not None:
        def search_tool(words: str) -> str:
            top = search.rank(words, 1) if words.strip() else []
            return f"({search.passages[top[0]].title}) {search.passages[top[0]].text[:chars]}" if top else "no match"
        tools["search"] = search_tool
    return tools


def value_correct(answer: str, value: str) -> bool:
    """True when ``answer`` (backticks and spaces stripped) equals the repr ``value``, or both parse as Python
    literals (``ast.literal_eval``) to equal values of the same type: ``[1,2]`` matches ``[1, 2]``, ``'ab'``
    matches ``"ab"``; a str value also accepts its text unquoted."""
    validate.string("answer", answer, empty=True)
    validate.string("value", value)
    text = answer.strip().strip("`").strip()
    if text == value:
        return True
    try:
        want = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    if isinstance(want, str) and text == want:
        return True
    try:
        got = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return type(got) is type(want) and got == want


# ----- argument checks ---------------------------------------------------------------------------------

def _check_mask(token_bytes, grammar, vocab_size) -> None:
    if not isinstance(token_bytes, dict) or not token_bytes:
        raise TypeError(f"token_bytes must be a non-empty dict from id to bytes, got {validate.describe(token_bytes)}")
    if not isinstance(grammar, CallGrammar):
        raise TypeError(f"grammar must be a CallGrammar, got {validate.describe(grammar)}")
    validate.integer("vocab_size", vocab_size)
    bad = next((i for i, b in token_bytes.items() if not isinstance(b, bytes) or not 0 <= i < vocab_size), None)
    if bad is not None:
        raise ValueError(f"token_bytes must map ids in [0, {vocab_size}) to bytes, got {bad!r}: "
                         f"{validate.describe(token_bytes[bad])}")


def _check_state(state) -> None:
    ok = state is None or state == "done" or (isinstance(state, tuple) and (
        (len(state) == 2 and state[0] == "head" and isinstance(state[1], bytes)) or
        (len(state) == 3 and state[0] == "argument" and isinstance(state[1], int) and isinstance(state[2], bool))))
    if not ok:
        raise ValueError(f"state must be a state of CallGrammar (from start() or advance()), got {state!r}")


def _check_make_tools(search, chars) -> None:
    if search is not None and not (hasattr(search, "rank") and hasattr(search, "passages")):
        raise TypeError(f"search must be an lmbook.rag.PassageSearch or None, got {validate.describe(search)}")
    validate.integer("chars", chars)


def _check_write_step(model, prompt_ids, token_bytes, stop_ids, max_new_tokens, mask) -> None:
    if not hasattr(model, "blocks"):
        raise TypeError(f"model must be an lmbook.model.Transformer, got {validate.describe(model)}")
    validate.token_ids("prompt_ids", prompt_ids, model.config.vocab_size, ndim=1)
    if not isinstance(token_bytes, dict) or len(token_bytes) != model.config.vocab_size:
        raise TypeError(f"token_bytes must be a dict from each of the model's {model.config.vocab_size} ids to "
                        f"bytes, got {validate.describe(token_bytes)}")
    if not isinstance(stop_ids, (set, frozenset, list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in stop_ids):
        raise TypeError(f"stop_ids must be a set of token ids, got {validate.describe(stop_ids)}")
    validate.integer("max_new_tokens", max_new_tokens)
    if mask is not None and not isinstance(mask, TokenMask):
        raise TypeError(f"mask must be a TokenMask or None, got {validate.describe(mask)}")


def _check_run_agent(write, tools, max_steps) -> None:
    if not callable(write):
        raise TypeError(f"write must be a function from transcript to line, got {validate.describe(write)}")
    if not isinstance(tools, dict) or not tools or not all(callable(t) for t in tools.values()):
        raise TypeError(f"tools must be a non-empty dict from name to function, got {validate.describe(tools)}")
    validate.integer("max_steps", max_steps)
