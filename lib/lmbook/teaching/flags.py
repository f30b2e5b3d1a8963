"""Flags for the instructor: a student's cells that reach for the grading machinery or for the answer.

A flag costs no points; it says where to look. The patterns are a heuristic over the source text, linear in
its length (a cell is read up to ``MAX_SCANNED`` characters, a notebook up to ``MAX_CELLS`` cells, and at most
``MAX_NAMED`` cells are named): code that builds names at run time evades them, which is why they flag dynamic
code too. The cells of the book itself (those of the student edition) are never flagged.
"""

from __future__ import annotations

import re

__all__ = ["SUSPICIOUS", "MAX_SCANNED", "flag_cells"]

MAX_SCANNED = 100_000
MAX_CELLS, MAX_NAMED = 2_000, 10  # cells of a notebook scanned, flagged cells named (a flag is a pointer)

SUSPICIOUS = [
    ("reaches into lmbook.checks", r"\bchecks\b|lmbook\.teaching|\bRESULTS\b"),
    ("sys.modules or builtins", r"sys\.modules|\bbuiltins\b|__builtins__|__import__|importlib"),
    ("tracing or frame inspection", r"settrace|setprofile|_getframe|f_locals|f_back|\binspect\b|gc\.get_"),
    ("IPython hooks or extensions", r"get_ipython|events\.register|input_transformers|ast_transformers|%load_ext"
                                    r"|\bIPython\b"),
    ("the file system or processes", r"\bopen\(|\bos\.|\bpathlib\b|\bPath\(|\bshutil\b|\bsubprocess\b|\bglob\b"
                                     r"|\bsocket\b|\bio\.|^[ \t]*!|%%(?:bash|sh|writefile)"),
    ("imports a system module", r"\bimport\s+(?:os|io|sys|gc|ctypes|inspect|importlib|builtins|subprocess|socket)\b"
                                r"|\bfrom\s+(?:os|io|sys|gc|ctypes|inspect|importlib|builtins|subprocess|socket)\b"),
    ("dynamic code or names", r"\bexec\(|\beval\(|\bcompile\(|\bvars\(|\bgetattr\(|\bglobals\(\)"),
]


def flag_cells(cells: list[str], book_cells: set[str], giveaways: set[str]) -> str:
    """The flags of a notebook's code ``cells`` (numbered from 1), skipping the book's own ``book_cells``;
    ``giveaways`` are names of library functions that compute an exercise's answer."""
    own = [(i, s[:MAX_SCANNED]) for i, s in enumerate(cells, 1) if s.strip() not in book_cells][:MAX_CELLS]
    defined = {g for g in giveaways if any(re.search(rf"\bdef\s+{g}\b", s) for _, s in own)}
    found = []
    for i, source in own:
        what = [label for label, pattern in SUSPICIOUS if re.search(pattern, source, re.M)]
        # the library function that is the answer: imported or called from a module anywhere, or called bare
        # where the student's own function does not take its name
        imports = "\n".join(line for line in source.splitlines() if "import" in line)
        what += [f"uses lmbook's {g}" for g in sorted(giveaways)
                 if re.search(rf"\.{g}\b", source) or re.search(rf"\b{g}\b", imports)
                 or (g not in defined and re.search(rf"(?<!def )\b{g}\s*\(", source))]
        found += [f"cell {i}: {', '.join(what)}"] if what else []
    more = f"; and {len(found) - MAX_NAMED} more cells" if len(found) > MAX_NAMED else ""
    return ("; ".join(found[:MAX_NAMED]) + more)[:1000]
