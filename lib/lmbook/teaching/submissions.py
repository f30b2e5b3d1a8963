"""Reading submissions safely, and writing what the grader says about them.

A submission is untrusted input to the grader itself: a link could name another student's notebook or the
reference, a FIFO or device would stall a read, a 20 GB file would fill memory, and a student's string can hold
characters that UTF-8 cannot encode. These functions take each case into account.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

__all__ = ["MAX_NOTEBOOK_BYTES", "read_code_cells", "submissions", "clean", "fenced", "safe_name"]

MAX_NOTEBOOK_BYTES = 20 * 2**20


def read_code_cells(path: Path) -> list[str]:
    """The sources of a notebook's code cells; ValueError if the file is not a well-formed notebook."""
    if not stat.S_ISREG(os.lstat(path).st_mode):  # a link could name the reference notebook; a FIFO would stall
        raise ValueError("not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB")
    nb = json.loads(data.decode("utf-8"))
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ValueError("its 'cells' is not a list of cells")
    sources = []
    for cell in cells:
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ValueError("a cell's source is neither text nor a list of lines")
        if cell.get("cell_type") == "code":
            sources.append(source)
    return sources


def submissions(submissions_dir: Path) -> list[tuple[str, Path]]:
    """(student, notebook) for ``student/NN_name.ipynb`` and ``NN_name.ipynb`` (the student is the file's stem).
    Links and folders of folders are not followed: a link could name another student's or the reference notebook."""
    found = []
    for entry in sorted(submissions_dir.iterdir()):
        if entry.is_symlink():
            continue
        if entry.is_dir():
            found += [(entry.name, nb) for nb in sorted(entry.iterdir()) if nb.suffix == ".ipynb"]
        elif entry.suffix == ".ipynb":
            found.append((entry.stem, entry))
    return found


def clean(text: str) -> str:
    """Text safe to write in UTF-8 (a lone surrogate from a student's string becomes an escape)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def fenced(text: str) -> str:
    """``text`` in a Markdown code block whose fence no line of the text can close."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{fence}\n{text}\n{fence}"


def safe_name(name: str, taken=()) -> str:
    """A file name for a student: their folder's name where it is safe, made unique."""
    base = re.sub(r"[^\w.-]", "_", name)[:100].lstrip(".") or "_"
    candidate, n, taken = base, 1, {t.lower() for t in taken}  # some file systems ignore case
    while candidate.lower() in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate
