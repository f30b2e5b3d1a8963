"""Answer keys for the book's exercises: the reference solutions and the hidden inputs (for instructors).

This folder is not part of the ``lmbook`` package that students install. Each ``chNN.py`` maps the name of a
check (``lmbook.checks.check_<name>``) to a :class:`Key`: the reference function and the inputs the grader adds
to the public ones, or the answer to a question worked out by hand. The grader reads them from the folder it is
given (``--keys``); ``python -m answer_keys`` writes ``lmbook/teaching/checks/expected.json`` from them.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Key", "all_keys"]


@dataclass(frozen=True)
class Key:
    """``reference(*case.args, **case.kwargs)`` is the right output; ``hidden()`` builds the grader's extra cases;
    ``answer`` is the right number for a question worked out by hand; ``giveaways`` names library functions that
    compute the answer, so the grader can flag a solution that calls one."""

    reference: Callable | None = None
    hidden: Callable[[], list] = field(default=lambda: [])
    answer: float | None = None
    giveaways: tuple[str, ...] = ()


def all_keys() -> dict[str, Key]:
    """Every chapter's keys, by check name."""
    keys: dict[str, Key] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("ch"):
            keys.update(importlib.import_module(f"{__name__}.{module.name}").KEYS)
    return keys
