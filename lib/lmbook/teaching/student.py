"""The student edition: the chapters with every exercise solution replaced by a stub.

In a notebook, a solution is a gated sphinx-exercise block (a markdown cell opening with
```{solution-start}, up to one opening with ```{solution-end}). Solution code sits between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` lines. The student edition

- drops the solution's markdown (the worked answer);
- keeps each solution code cell, with the lines between the markers replaced by a stub: inside a
  function ``raise NotImplementedError``, at top level ``name = None`` for each name the solution assigns,
  so the notebook still runs top to bottom and the self-check reports "not attempted yet";
- clears the outputs of the stubbed cells and of the self-check cells that follow them.

``python -m lmbook.teaching.student OUT_DIR NOTEBOOK...`` writes the student notebooks.
Left out on purpose: grading (see the instructor page) and any change to non-exercise cells.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

__all__ = ["student_notebook", "stub_solution", "write_student_edition"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
_ASSIGNED = re.compile(r"^([A-Za-z_]\w*)\s*=(?!=)")


def stub_solution(source: str) -> str:
    """Replace every BEGIN/END SOLUTION region of a code cell's source by a stub (see module docstring)."""
    out, inside, body, indent = [], False, [], ""
    for line in source.splitlines():
        if line.strip() == BEGIN:
            if inside:
                raise ValueError("nested '### BEGIN SOLUTION' markers")
            inside, body, indent = True, [], line[: len(line) - len(line.lstrip())]
        elif line.strip() == END:
            if not inside:
                raise ValueError("'### END SOLUTION' without a BEGIN")
            inside = False
            if indent:
                out.append(f'{indent}raise NotImplementedError("your code here")')
            else:
                names = dict.fromkeys(m.group(1) for b in body if (m := _ASSIGNED.match(b)))
                out += [f"{name} = None  # your answer here" for name in names] or ["# your answer here"]
        elif inside:
            body.append(line)
        else:
            out.append(line)
    if inside:
        raise ValueError("'### BEGIN SOLUTION' without an END")
    return "\n".join(out)


def student_notebook(nb: dict) -> dict:
    """Return a copy of a notebook (nbformat JSON dict) with its solutions stubbed out."""
    cells, in_solution, clear_next_check = [], False, False
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            text = source.lstrip()
            if text.startswith("```{solution-start}"):
                in_solution = True
            if in_solution:
                if text.startswith("```{solution-end}"):
                    in_solution, clear_next_check = False, True
                continue  # the worked answer is not part of the student edition
        elif cell["cell_type"] == "code":
            cell = json.loads(json.dumps(cell))
            if BEGIN in source:
                cell["source"] = stub_solution(source)
                cell["outputs"], cell["execution_count"] = [], None
            elif in_solution:
                continue  # solution code without markers is dropped whole
            elif clear_next_check and "checks.check_" in source:
                cell["outputs"], cell["execution_count"] = [], None
            clear_next_check = False
        cells.append(cell)
    return {**nb, "cells": cells}


def write_student_edition(notebooks, out_dir) -> list[Path]:
    """Write the student edition of each notebook path into ``out_dir``; return the written paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in map(Path, notebooks):
        if path.suffix != ".ipynb":
            raise ValueError(f"notebooks must be .ipynb files, got {path}")
        target = out_dir / path.name
        target.write_text(json.dumps(student_notebook(json.loads(path.read_text())), indent=1,
                                     ensure_ascii=False) + "\n")
        written.append(target)
    return written


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m lmbook.teaching.student OUT_DIR NOTEBOOK...")
    for p in write_student_edition(sys.argv[2:], sys.argv[1]):
        print("wrote", p)
