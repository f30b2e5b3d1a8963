"""Wall time of each chapter notebook, executed top to bottom in a fresh kernel (target: 90 s each)."""

from __future__ import annotations

import os
import pathlib
import time

from common import table

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run() -> str:
    import nbformat
    from nbclient import NotebookClient

    os.environ["LMBOOK_QUIET"] = "1"
    rows, total = [], 0.0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds = time.perf_counter() - start
        total += seconds
        rows.append([path.stem, f"{seconds:.1f}", f"{seconds / 90:.2f}"])
    rows.append(["**whole book**", f"{total:.1f}", f"{total / 600:.2f} (of 600 s)"])
    return "## Notebook wall times\n\n" + table(["notebook", "seconds", "ratio to the 90 s budget"], rows)
