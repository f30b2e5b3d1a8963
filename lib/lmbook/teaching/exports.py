"""Grades where instructors already keep them: a Canvas gradebook CSV, and Gradescope's autograder format.

- :func:`canvas_csv` turns ``grades.csv`` into a file for Canvas's gradebook import: the columns ``Student``,
  ``ID``, ``SIS User ID``, ``SIS Login ID`` and ``Section``, then one column per notebook, and a ``Points
  Possible`` row. Each submission folder's name is taken as the student's SIS Login ID; a roster (Canvas's own
  gradebook export) fills in the other identity columns.
- :func:`gradescope_results` writes the ``results.json`` of Gradescope's autograder specification for one
  submission, and :func:`gradescope_bundle` the autograder zip (``setup.sh``, ``run_autograder``, the reference
  notebooks, the answer keys and the ``lmbook`` sources) that produces it.
"""

from __future__ import annotations

import csv
import json
import zipfile
from collections import defaultdict
from pathlib import Path

__all__ = ["CANVAS_IDENTITY", "canvas_csv", "gradescope_results", "gradescope_bundle"]

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def _totals(grades_csv: Path) -> tuple[dict, dict]:
    """Points per (student, notebook), and the maximum per notebook."""
    got, best = defaultdict(float), defaultdict(float)
    maxima = defaultdict(dict)
    for row in csv.DictReader(Path(grades_csv).open(newline="")):
        got[row["student"], row["notebook"]] += float(row["points"])
        maxima[row["notebook"]][row["exercise"]] = float(row["max_points"])
    for notebook, per_exercise in maxima.items():
        best[notebook] = sum(per_exercise.values())
    return got, best


def canvas_csv(grades_csv, out_path, roster=None) -> Path:
    """Write Canvas's gradebook-import CSV from ``grades_csv``; ``roster`` is an optional Canvas gradebook export
    whose rows are matched to submissions by SIS Login ID (or, failing that, by ID or by name)."""
    got, best = _totals(Path(grades_csv))
    people = {}
    if roster is not None:
        for row in csv.DictReader(Path(roster).open(newline="", encoding="utf-8-sig")):
            if row.get("Student", "").strip() == "Points Possible":
                continue
            identity = {c: row.get(c, "") for c in CANVAS_IDENTITY}
            for c in ("SIS Login ID", "ID", "Student"):
                if identity[c]:
                    people.setdefault(identity[c], identity)
    notebooks = sorted(best)
    out_path = Path(out_path)
    with out_path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CANVAS_IDENTITY + [Path(n).stem for n in notebooks])
        writer.writerow(["Points Possible", "", "", "", ""] + [f"{best[n]:g}" for n in notebooks])
        for student in sorted({s for s, _ in got}):
            identity = people.get(student) or {"Student": student, "ID": "", "SIS User ID": "",
                                               "SIS Login ID": student, "Section": ""}
            writer.writerow([identity[c] for c in CANVAS_IDENTITY] +
                            [f"{got[student, n]:g}" if (student, n) in got else "" for n in notebooks])
    return out_path


def gradescope_results(rows: list[dict], feedback: str) -> dict:
    """Gradescope's results.json for one submission: one test per exercise, and the feedback as its output (no
    execution time: the notebook controls it, and it would tell the student something of the hidden inputs)."""
    tests = [{"name": r["exercise"], "score": float(r["points"]), "max_score": float(r["max_points"]),
              "status": "passed" if r["passed"] else "failed", "output": r["reason"], "visibility": "visible"}
             for r in rows]
    return {"score": sum(t["score"] for t in tests), "output": feedback[:50_000],
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
set -euo pipefail
apt-get update && apt-get install -y bubblewrap python3-venv
python3 -m venv /opt/lmbook
/opt/lmbook/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/opt/lmbook/bin/pip install /autograder/source/lmbook-src ipython ipython-autotime
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, in a fresh container.
cd /autograder/source
sandbox=""
/opt/lmbook/bin/python -c "from lmbook.teaching.sandbox import bwrap_available as b; exit(not b())" || {
  # bubblewrap cannot create namespaces in this container: the container is the sandbox, and the submission runs
  # as the user nobody, who cannot read this folder.
  echo "WARNING: bubblewrap cannot build its sandbox in this container: grading with --no-sandbox" >&2
  chmod -R go-rwx /autograder/source; sandbox="--no-sandbox"; }
/opt/lmbook/bin/python -m lmbook.teaching.grading_cli gradescope /autograder/submission \\
  /autograder/results/results.json --notebook {notebook} --reference notebooks --keys answer_keys $sandbox
"""


def gradescope_bundle(out_zip, notebook: str, reference_dir, keys_dir, lmbook_src) -> Path:
    """The autograder zip of one assignment, the chapter ``notebook``: upload it as a Gradescope programming
    assignment's autograder. Only that notebook is graded, whatever else a submission holds."""
    out_zip, reference = Path(out_zip), Path(reference_dir) / notebook
    if not reference.is_file():
        raise ValueError(f"notebook must name a notebook in {reference_dir}, got {notebook!r}")
    with zipfile.ZipFile(out_zip, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(reference, f"notebooks/{notebook}")
        run = RUN_AUTOGRADER.replace("{notebook}", notebook)
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", run)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        for path in sorted(Path(keys_dir).glob("*.py")):
            z.write(path, f"answer_keys/{path.name}")
        if (Path(reference_dir) / "points.json").is_file():
            z.write(Path(reference_dir) / "points.json", "notebooks/points.json")
        root = Path(lmbook_src)
        for path in sorted((root / "lib" / "lmbook").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, f"lmbook-src/{path.relative_to(root)}")
        z.write(root / "pyproject.toml", "lmbook-src/pyproject.toml")
        z.write(root / "README.md", "lmbook-src/README.md")
    return out_zip


def write_json(path, data) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False))
