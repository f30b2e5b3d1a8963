"""The record one bad-input case file holds: a target, a fresh valid call, and what it may accept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Case:
    """One valid call of a public callable, from which tests/test_bad_input.py derives bad calls.

    target  a dotted name within the module: "tf_idf", "BM25" (its constructor), "BM25.get_scores",
            "NeuralNGramLM.forward" (called through the instance: ``call`` returns the module itself).
    call    a function of no arguments returning ``(callable, kwargs)``: a fresh, valid call. For a method it
            builds the instance and returns the bound method. Every parameter to drive is passed by keyword;
            a parameter left out is driven from its default.
    ok      {param: {mutation kind, ...}}: kinds that are accepted by documented behaviour; each with a comment.
    kinds   {param: (mutation kind, ...)}: replaces the kinds guessed from the valid value's type;
            ``()`` means "do not drive this parameter" (say why in a comment).
    label   tells apart two cases of one target (e.g. two smoothing methods); it goes into the test id.
    """

    target: str
    call: Callable[[], tuple[Callable, dict[str, Any]]]
    ok: dict[str, set[str]] = field(default_factory=dict)
    kinds: dict[str, tuple[str, ...]] = field(default_factory=dict)
    label: str = ""

    @property
    def name(self) -> str:
        return self.target + (f"[{self.label}]" if self.label else "")
