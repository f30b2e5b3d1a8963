"""Autograding: run submitted student notebooks in a clean kernel and score their exercises.

For each submission the grader

1. finds the chapter's reference notebook by file name (``NN_name.ipynb``) and reads its exercises:
   the label of each gated solution and the self-check call that follows it;
2. executes the submission in a fresh kernel, in a separate process with a wall-clock limit, with
   errors allowed and each cell interrupted after ``cell_timeout`` seconds, so one broken cell does not
   stop the rest;
3. clears the recorded results and re-runs the *reference's* check calls at the end, so a submission
   cannot grade itself by editing its check cells;
4. writes one CSV row per exercise (pass/fail, points, reason) and a feedback file per student with the
   checks' messages.

A notebook whose first code cell (the set-up and imports) fails gets zero points. A cell that loops
forever is interrupted, and exercises that could not be checked (lost cells, a function that never
returns) get zero points; each with its reason. The rest of the batch is still graded. Exercises without a self-check
(written answers) are listed as ``manual`` with no points.

``python -m lmbook.teaching.grading SUBMISSIONS_DIR OUT_DIR [REFERENCE_DIR]``; points per exercise default to 1
and can be set in ``REFERENCE_DIR/points.json`` as ``{"label": points}``.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Exercise", "exercises_of", "grade_submission", "grade_all"]

_MARK = "@@LMBOOK-RESULTS@@"
SETUP_TIMEOUT = 300  # seconds for a submission's first code cell (imports), whatever cell_timeout is


@dataclass
class Exercise:
    label: str
    check_call: str | None  # the self-check cell's first line, e.g. "lmbook.checks.check_add_k(add_k_prob)"
    points: float = 1.0

    @property
    def check_name(self) -> str | None:
        m = re.search(r"check_(\w+)\(", self.check_call or "")
        return m.group(1) if m else None


def exercises_of(reference: dict, points: dict | None = None) -> list[Exercise]:
    """The exercises of a reference notebook (nbformat JSON), in order, with their self-check calls."""
    points = points or {}
    found, label = [], None
    for cell in reference["cells"]:
        src = "".join(cell["source"])
        m = re.match(r"\s*```\{solution-start\}\s+([\w-]+)", src)
        if cell["cell_type"] == "markdown" and m:
            label = m.group(1)
            found.append(Exercise(label, None, float(points.get(label, 1.0))))
        elif cell["cell_type"] == "code" and label and "checks.check_" in src and found[-1].check_call is None:
            found[-1].check_call = next(line for line in src.splitlines() if "checks.check_" in line).strip()
            label = None
    return found


def _execute(nb_path: Path, cwd: Path, cell_timeout: int) -> dict:
    """Child-process entry: execute a notebook (errors allowed) and return the executed JSON."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(nb_path, as_version=4)
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    client = NotebookClient(nb, allow_errors=True, interrupt_on_timeout=True, kernel_name="python3",
                            # the set-up cell imports torch, slow on a busy machine: it gets SETUP_TIMEOUT
                            timeout_func=lambda cell: max(cell_timeout, SETUP_TIMEOUT) if cell is first
                            else cell_timeout,
                            resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return nb


def grade_submission(submission: Path, reference: dict, exercises: list[Exercise], *, cwd: Path,
                     cell_timeout: int = 60, total_timeout: int = 600) -> tuple[list[dict], str]:
    """Grade one notebook; return (one row per exercise, feedback text)."""
    rows = lambda passed, reason, ex: {"exercise": ex.label, "passed": passed,  # noqa: E731
                                       "points": ex.points if passed else 0.0, "max_points": ex.points,
                                       "reason": reason}
    graded = [e for e in exercises if e.check_call]
    try:
        nb = json.loads(submission.read_text())
        nb["cells"]  # noqa: B018  (a notebook must have cells)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return [rows(False, f"not a readable notebook: {err}", e) for e in graded], f"Could not read: {err}\n"
    tail = ["import lmbook.checks as _checks\n_checks.RESULTS.clear()"]
    tail += [f"print('== {e.label}')\n{e.check_call}" for e in graded]
    tail += [f"import json as _json\nprint('{_MARK}' + _json.dumps(_checks.RESULTS))"]
    nb["cells"] = [c for c in nb["cells"] if c.get("cell_type") in ("code", "markdown", "raw")]
    nb["cells"] += [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
                    for s in tail]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "submission.ipynb", Path(tmp) / "executed.json"
        src.write_text(json.dumps(nb))
        code = ("import json, sys; from pathlib import Path; from lmbook.teaching.grading import _execute; "
                f"Path({str(out)!r}).write_text(json.dumps(_execute(Path({str(src)!r}), Path({str(cwd)!r}), "
                f"{cell_timeout})))")
        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  timeout=total_timeout)
        except subprocess.TimeoutExpired:
            reason = f"time limit of {total_timeout} s exceeded"
            return [rows(False, reason, e) for e in graded], reason + "\n"
        if proc.returncode != 0 or not out.exists():
            reason = "the notebook could not be executed: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
            return [rows(False, reason, e) for e in graded], reason + "\n"
        executed = json.loads(out.read_text())
    def error_of(cell):
        return next((f"{o['ename']}: {o['evalue']}" for o in cell.get("outputs", [])
                     if o.get("output_type") == "error"), "")

    def text_of(cell):
        return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))

    cells = executed["cells"]
    check_cells = cells[len(cells) - len(tail) + 1:-1]  # one per graded exercise, in order
    results = json.loads(text_of(cells[-1]).split(_MARK, 1)[1]) if _MARK in text_of(cells[-1]) else {}
    first_error = next((err for c in cells[: len(cells) - len(tail)] if (err := error_of(c))), "")
    first_code = next((c for c in cells if c.get("cell_type") == "code"), {})
    if error_of(first_code):  # the set-up / import cell failed: the notebook does not run
        err = error_of(first_code)
        reason = (f"the first code cell ran past {SETUP_TIMEOUT} s" if err.startswith("KeyboardInterrupt")
                  else f"the notebook fails in its first code cell: {err}")
        return [rows(False, reason, e) for e in graded], reason + "\n"
    out_rows, feedback = [], []
    for e, cell in zip(graded, check_cells, strict=True):
        ok, err = results.get(e.check_name), error_of(cell)
        feedback.append(text_of(cell).rstrip() + (f"\n{err}" if err else ""))
        if ok is not None:
            out_rows.append(rows(bool(ok), "passed" if ok else "the self-check failed (see feedback)", e))
        elif err.startswith("KeyboardInterrupt"):
            out_rows.append(rows(False, f"interrupted after the cell time limit of {cell_timeout} s", e))
        else:
            why = f"could not be checked ({err})" if err else "could not be checked"
            out_rows.append(rows(False, why + (f"; first error in the notebook: {first_error}" if first_error
                                               else ""), e))
    return out_rows, "\n".join(feedback) + "\n"


def grade_all(submissions_dir, out_dir, reference_dir="notebooks", cell_timeout: int = 60,
              total_timeout: int = 600) -> Path:
    """Grade every ``*.ipynb`` under ``submissions_dir`` (``student/NN_name.ipynb`` or ``NN_name.ipynb``);
    write ``grades.csv`` and ``feedback/<student>.md`` into ``out_dir``; return the CSV path."""
    submissions_dir, out_dir, reference_dir = Path(submissions_dir), Path(out_dir), Path(reference_dir)
    if not submissions_dir.is_dir():
        raise ValueError(f"submissions_dir must be a directory, got {submissions_dir}")
    points_file = reference_dir / "points.json"
    points = json.loads(points_file.read_text()) if points_file.exists() else {}
    (out_dir / "feedback").mkdir(parents=True, exist_ok=True)
    table, feedback = [], {}
    for sub in sorted(submissions_dir.rglob("*.ipynb")):
        student = sub.parent.name if sub.parent != submissions_dir else sub.stem
        ref_path = reference_dir / sub.name
        if not ref_path.exists():
            table.append({"student": student, "notebook": sub.name, "exercise": "-", "passed": False, "points": 0,
                          "max_points": 0, "reason": f"no reference notebook named {sub.name}"})
            continue
        reference = json.loads(ref_path.read_text())
        rows, text = grade_submission(sub, reference, exercises_of(reference, points), cwd=ref_path.parent.resolve(),
                                      cell_timeout=cell_timeout, total_timeout=total_timeout)
        table += [{"student": student, "notebook": sub.name, **r} for r in rows]
        feedback.setdefault(student, []).append(f"## {sub.name}\n\n```\n{text}```\n")
    csv_path = out_dir / "grades.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, ["student", "notebook", "exercise", "passed", "points", "max_points", "reason"])
        writer.writeheader()
        writer.writerows(table)
    for student, parts in feedback.items():
        (out_dir / "feedback" / f"{student}.md").write_text(f"# Feedback for {student}\n\n" + "\n".join(parts))
    return csv_path


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python -m lmbook.teaching.grading SUBMISSIONS_DIR OUT_DIR [REFERENCE_DIR]")
    print("wrote", grade_all(*sys.argv[1:]))
