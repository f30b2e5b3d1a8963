"""``show(fn)``: display the real source of library code in a notebook.

The book never pastes a copy of library code into a cell; it shows the code that runs. ``show(a, b, ...)``
renders several objects as one listing, in the order given: chapter 9 shows the whole model on one page
this way (``show(TransformerConfig, CausalSelfAttention, FeedForward, Block, Transformer)``).

Left out on purpose: excerpts. A listing is always whole functions, classes or modules.
"""

from __future__ import annotations

import inspect
import textwrap

__all__ = ["show"]


class Source:
    """The source of one or more objects. Notebooks render it as highlighted Python; plain text prints it."""

    def __init__(self, *objects):
        _check_objects(objects)
        self.name = ", ".join(getattr(o, "__qualname__", getattr(o, "__name__", "?")) for o in objects)
        parts = [textwrap.dedent(inspect.getsource(o)).strip() for o in objects]
        self.text = "\n\n\n".join(parts) + "\n"  # two blank lines between top-level definitions, as in a module

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.text}```"


def show(*objects) -> Source:
    """The source of each object (function, class, method or module), for display in a notebook; several
    objects make one listing."""
    return Source(*objects)


def _check_objects(objects) -> None:
    if not objects:
        raise TypeError("show expects at least one function, class, method or module, got nothing")
    for obj in objects:
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) or inspect.ismodule(obj)):
            raise TypeError(f"show expects functions, classes, methods or modules, got {type(obj).__name__}")
