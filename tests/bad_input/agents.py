"""Bad-input cases for lmbook.agents (chapter 18): the parser, the grammar, the mask, decoding, the loop."""

import torch
from lmbook import agents, rag
from lmbook.model import Transformer, TransformerConfig

from ._case import Case

VOCAB = {0: b"C", 1: b"ALL ", 2: b"python: ", 3: b"x", 4: b"\n", 5: b"ANSWER: "}


def _model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=6, context_length=32, d_model=8, n_layers=1, n_heads=2)).eval()


def _search():
    return rag.PassageSearch([rag.Passage("try", "The finally clause always runs.")])


def _mask():
    return agents.TokenMask(VOCAB, agents.CallGrammar(), 6)


CASES = [
    Case("parse_step", lambda: (agents.parse_step, {"line": "CALL python: 1 + 1", "tools": ["python", "search"]}),
         kinds={"line": ("none", "list")}),  # a bad line is a ToolCallError (a ValueError) naming the line
    Case("CallGrammar", lambda: (agents.CallGrammar, {"tools": ["python"]})),
    Case("CallGrammar.advance", lambda: (agents.CallGrammar().advance, {"state": ("head", b""), "data": b"CALL"}),
         kinds={"state": ("plain_str", "single", "empty")}),  # None is the dead state: advance returns None
    Case("TokenMask", lambda: (agents.TokenMask, {"token_bytes": VOCAB, "grammar": agents.CallGrammar(),
                                                  "vocab_size": 6})),
    Case("TokenMask.allowed", lambda: (_mask().allowed, {"state": ("head", b"")}),
         kinds={"state": ("plain_str", "single", "empty")}),  # None is the dead state: nothing is allowed
    Case("write_step", lambda: (agents.write_step, {"model": _model(), "prompt_ids": torch.tensor([0, 1]),
                                                    "token_bytes": VOCAB, "stop_ids": {5}, "max_new_tokens": 3,
                                                    "mask": _mask()}),
         ok={"stop_ids": {"empty"}}),  # no stop token: decoding ends at a newline or max_new_tokens
    Case("run_agent", lambda: (agents.run_agent, {"write": lambda t: "ANSWER: 1", "tools": {"x": lambda a: a},
                                                  "max_steps": 2})),
    Case("make_tools", lambda: (agents.make_tools, {"search": _search(), "chars": 100})),
    Case("value_correct", lambda: (agents.value_correct, {"answer": "3", "value": "3"}),
         kinds={"answer": ("list", "none", "bytes"),  # an empty answer is simply wrong
                "value": ("list", "none", "empty", "bytes")}),
]

SKIP = {"ToolCall": "a record the parser returns", "Answer": "a record the parser returns",
        "Step": "a record the loop fills",
        "AgentRun": "a record the loop returns", "CallGrammar.start": "takes no arguments"}
