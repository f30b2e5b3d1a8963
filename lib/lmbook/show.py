"""``show(fn)``: display the real source of a library function in a notebook.

The book never pastes a copy of library code into a cell; it shows the code that runs.
"""

from __future__ import annotations

import inspect
import textwrap

__all__ = ["show"]


class Source:
    """The source of one object. Notebooks render it as highlighted Python; plain text prints it."""

    def __init__(self, obj):
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) or inspect.ismodule(obj)):
            raise TypeError(f"show expects a function, class, method or module, got {type(obj).__name__}")
        self.name = getattr(obj, "__qualname__", getattr(obj, "__name__", "?"))
        self.text = textwrap.dedent(inspect.getsource(obj)).rstrip() + "\n"

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.text}```"


def show(obj) -> Source:
    """Return the source of ``obj`` (function, class, method or module) for display in a notebook."""
    return Source(obj)
