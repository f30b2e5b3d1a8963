"""Autograding: run each submitted notebook in a sandbox, and grade its exercises outside it.

For each submission the grader

1. finds the chapter's reference notebook by file name (``NN_name.ipynb``) and reads its exercises: the label
   of each gated solution, and from the self-check call after it (``lmbook.checks.check_add_k(add_k_prob)``) the
   check's name and the name of the student's answer;
2. runs the submission's code cells in a sandbox (:mod:`lmbook.teaching.sandbox`) that sees neither the
   reference notebooks, nor the answer keys, nor other submissions, nor the grades; there the harness
   (:mod:`lmbook.teaching.harness`) calls the student's functions on the public inputs and on hidden ones from
   the answer keys, and returns only their outputs, as plain data;
3. compares those outputs with the answer keys' reference outputs, here, outside the student's reach;
4. appends the submission's rows to ``grades.csv`` at once (exercise, pass or fail, points, reason, and flags
   for the instructor to look at), and writes a feedback file per student.

A broken, hostile or endless submission costs its author, never the batch. Command line:
:mod:`lmbook.teaching.grading_cli`; points per exercise: ``REFERENCE_DIR/points.json`` (default 1).
"""

from __future__ import annotations

import builtins
import csv
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from . import checks, flags, harness, sandbox, student, submissions
from .checks._core import CHECKS, answer_digests, answer_matches, close, comparable
from .plain import NotPlain, decode, encode

__all__ = ["Exercise", "exercises_of", "load_keys", "Grader", "grade_submission", "grade_all",
           "grade_one", "FIELDS"]

FIELDS = ["student", "notebook", "exercise", "passed", "points", "max_points", "reason", "flags"]
_CALL = re.compile(r"checks\.check_(\w+)\(\s*([A-Za-z_]\w*)\s*\)")


@dataclass
class Exercise:
    label: str
    check_call: str | None  # the self-check cell's first line, e.g. "lmbook.checks.check_add_k(add_k_prob)"
    points: float = 1.0

    @property
    def check_name(self) -> str | None:
        return (m := _CALL.search(self.check_call or "")) and m.group(1)

    @property
    def target(self) -> str | None:
        return (m := _CALL.search(self.check_call or "")) and m.group(2)


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


def load_keys(keys_dir) -> dict:
    """The answer keys in ``keys_dir`` (a copy of ``lib/answer_keys``), by check name."""
    init = Path(keys_dir) / "__init__.py"
    if not init.is_file():
        raise ValueError(f"keys_dir must be a folder of answer keys with an __init__.py, got {keys_dir}")
    spec = importlib.util.spec_from_file_location("answer_keys", init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["answer_keys"] = module
    spec.loader.exec_module(module)
    return module.all_keys()


class Grader:
    """The grading of one chapter: its exercises, their inputs and the keys' expected outputs (computed once)."""

    def __init__(self, reference: dict, keys: dict, points: dict | None = None):
        self.exercises = [e for e in exercises_of(reference, points) if e.check_call]
        for e in self.exercises:
            if e.check_name not in CHECKS or e.check_name not in keys or e.target is None:
                raise ValueError(f"exercise {e.label}: no check or answer key for {e.check_call!r}")
        self.keys = keys
        self.book_cells = {"".join(c["source"]).strip() for c in student.student_notebook(reference)["cells"]
                           if c["cell_type"] == "code"}
        self.cases = {e.check_name: self._cases(e.check_name) for e in self.exercises}
        self.expected = {name: [comparable(CHECKS[name], keys[name].reference(*c.args, **c.kwargs))
                                for c in self._cases(name)] for name in self.cases if CHECKS[name].kind == "function"}
        self.inputs = json.dumps({e.check_name: self._inputs(e) for e in self.exercises}).encode() + b"\n"

    def _cases(self, name: str) -> list:
        check = CHECKS[name]
        return [] if check.kind == "answer" else check.cases() + self.keys[name].hidden()

    def _inputs(self, e: Exercise) -> dict:
        try:
            cases = [{"args": encode(tuple(c.args)), "kwargs": encode(dict(c.kwargs))}
                     for c in self.cases[e.check_name]]
        except NotPlain as err:
            raise ValueError(f"exercise {e.label}: an input is not plain data ({err})") from None
        return cases

    def job(self, cells: list[str], cell_timeout: float) -> bytes:
        """The job's first line (the inputs, :attr:`inputs`, follow once the cells have run)."""
        exercises = [{"name": e.check_name, "target": e.target, "kind": CHECKS[e.check_name].kind}
                     for e in self.exercises]
        return json.dumps({"cells": cells, "cell_timeout": cell_timeout, "case_timeout": cell_timeout,
                           "exercises": exercises}).encode() + b"\n"

    def verdict(self, name: str, got: dict | None) -> tuple[bool, str]:
        """Pass or fail, and why, for the harvested outputs ``got`` of check ``name``."""
        check = CHECKS[name]
        if not isinstance(got, dict):
            return False, "could not be checked: the notebook stopped before it was reached"
        if "error" in got:  # its text is the notebook's to choose, so none of it is repeated
            return False, "could not be checked: the answer is missing, not a function, or not plain data"
        if check.kind == "answer":
            value = _number(got.get("value"))
            ok = value is not None and answer_matches(name, value, answer_digests(name, self.keys[name].answer))
            return ok, "passed" if ok else "the answer is not right"
        outputs, cases, n_public = got.get("outputs"), self.cases[name], len(check.cases())
        if not isinstance(outputs, list) or len(outputs) != len(cases):
            return False, "could not be checked: the outputs are incomplete"
        for i, (case, out, want) in enumerate(zip(cases, outputs, self.expected[name], strict=True)):
            where = f"case {i + 1} ({case.call_text(name)})" if i < n_public else "a hidden case"
            if i >= n_public and not (isinstance(out, dict) and "value" in out and _matches(check, want, out)):
                return False, "a hidden case failed"  # nothing more: the function chose how it failed
            if not isinstance(out, dict) or "value" not in out:  # only the error's type: its text could carry
                error = out.get("error") if isinstance(out, dict) else None  # what the function saw
                return False, f"{where} raised {_error_type(error)}"
            if not _matches(check, want, out):
                return False, f"{where} differs from the expected output"
        return True, "passed"

    def flags(self, cells: list[str]) -> str:
        """What in the student's own cells deserves the instructor's eye (see :mod:`lmbook.teaching.flags`)."""
        giveaways = {g for e in self.exercises for g in self.keys[e.check_name].giveaways}
        return flags.flag_cells(cells, self.book_cells, giveaways)


def _plain(data):
    try:
        return decode(data)
    except (NotPlain, ValueError, TypeError) as err:
        raise NotPlain(str(err)) from None


def _number(data) -> float | None:
    """A plain number, or a one-element array (a tensor answer), as a float; None for anything else."""
    value = _plain(data)
    if hasattr(value, "size") and value.size == 1 and value.dtype.kind in "iuf":
        value = value.item()
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _matches(check, want, out: dict) -> bool:
    """Whether a harvested output equals the expected one (a malformed output does not)."""
    try:
        value = _plain(out["value"])
        return close(want, check.project(value) if check.project else value, check.rtol, check.atol)
    except Exception:  # a malformed output: the projection cannot use it
        return False


_BUILTIN_ERRORS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def _error_type(error) -> str:
    """The error's type if it is one of Python's own; any other name could spell out what the function saw."""
    name = error.split(":", 1)[0] if isinstance(error, str) else ""
    return name if name in _BUILTIN_ERRORS else "TimeLimit" if name == "TimeLimit" else "an error"


def _parse_results(stdout: bytes) -> dict:
    """Each exercise's outputs, from the harness's lines (unparsable lines are skipped; the first line wins)."""
    outputs = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("exercise"), str):
            outputs.setdefault(item["exercise"], item)
    return outputs


def _split_log(log: bytes) -> tuple[str, list]:
    """The notebook's printed output, and its cells' errors (written by the harness at the end of the log)."""
    text, _, errors = log.partition(harness.CELLS)
    try:
        errors = json.loads(errors.decode("utf-8", "replace"))
    except ValueError:
        errors = []
    return submissions.clean(text.decode("utf-8", "replace")), errors if isinstance(errors, list) else []


def _row(e: Exercise, passed: bool, reason: str, flags: str = "") -> dict:
    return {"exercise": e.label, "passed": passed, "points": e.points if passed else 0.0, "max_points": e.points,
            "reason": reason, "flags": flags}


def grade_submission(path: Path, grader: Grader, limits: sandbox.Limits, *, cell_timeout: float = 60,
                     use_sandbox: bool = True) -> tuple[list[dict], str]:
    """Grade one notebook; return one row per exercise and the feedback text."""
    try:
        cells = submissions.read_code_cells(path)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        reason = f"not a readable notebook: {str(err)[:200]}"
        return [_row(e, False, reason) for e in grader.exercises], reason + "\n"
    argv = [sys.executable, "-I", "-m", "lmbook.teaching.harness"]
    outcome = sandbox.run(argv, grader.job(cells, cell_timeout), limits, sandbox=use_sandbox, then=grader.inputs)
    outputs, (log, cell_errors) = _parse_results(outcome.stdout), _split_log(outcome.stderr)
    flags = grader.flags(cells)
    flags = "; ".join([flags] * bool(flags) + [f"{e.label}: the graded function is lmbook's own" for e in
                       grader.exercises if str(outputs.get(e.check_name, {}).get("module", "")).startswith("lmbook")])
    stopped = ("the notebook did not finish" if outcome.log_closed and (outcome.timed_out or outcome.returncode)
               else f"the notebook ran past the time limit of {limits.seconds:g} s" if outcome.timed_out else
               "the notebook's process was stopped: a limit on CPU time or memory, or a crash"
               if outcome.returncode else "")  # once the inputs were in, how it ended is the function's to choose
    first_error = submissions.clean(next((f"cell {i}: {err}" for i, err in enumerate(cell_errors, 1) if err), ""))
    rows, lines = [], []
    for e in grader.exercises:
        try:
            passed, reason = grader.verdict(e.check_name, outputs.get(e.check_name))
        except Exception as err:  # output the harness never writes: whatever it is, it earns nothing
            passed, reason = False, f"could not be checked: malformed output ({type(err).__name__})"
        if not passed and e.check_name not in outputs:
            reason = f"could not be checked: {stopped or 'no output'}"
        if not passed and first_error:
            reason += f"; first error in the notebook: {first_error}"[:300]
        rows.append(_row(e, passed, submissions.clean(reason), submissions.clean(flags)))
        lines.append(f"{'✓' if passed else '✗'} {e.label}: {reason}")
    log += "\n[output truncated]" if outcome.truncated else ""
    return rows, "\n".join(lines) + "\n\nWhat the notebook printed:\n" + log


def grade_all(submissions_dir, out_dir, reference_dir="notebooks", keys_dir="lib/answer_keys", *,
              limits: sandbox.Limits | None = None, cell_timeout: float = 60, use_sandbox: bool = True,
              only: tuple[str, ...] = ()) -> Path:
    """Grade every submission under ``submissions_dir`` (see :func:`.submissions.submissions`); write
    ``grades.csv`` (row by row, as each submission finishes) and ``feedback/<student>.md`` into ``out_dir``.
    Only notebooks named like a reference notebook are graded, and with ``only``, only those named there."""
    submissions_dir, out_dir, reference_dir = Path(submissions_dir), Path(out_dir), Path(reference_dir)
    _check_args(submissions_dir, reference_dir, use_sandbox, keys_dir, out_dir)
    limits, keys, graders, names = limits or sandbox.Limits(), load_keys(keys_dir), {}, {}
    (out_dir / "feedback").mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "grades.csv"
    with csv_path.open("w", newline="", errors="backslashreplace") as f:  # a name may not be valid UTF-8
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        f.flush()
        for who, sub in submissions.submissions(submissions_dir):
            if not (reference_dir / sub.name).is_file() or (only and sub.name not in only):
                continue  # not a chapter being graded (and a name the student chose, kept out of the CSV)
            else:
                if sub.name not in graders:
                    graders[sub.name] = _grader(reference_dir, sub.name, keys)
                rows, text = _grade_safely(sub, graders[sub.name], limits, cell_timeout, use_sandbox)
            writer.writerows({"student": who, "notebook": sub.name, **r} for r in rows)
            f.flush()
            os.fsync(f.fileno())
            name = names.setdefault(who, submissions.safe_name(who, taken=set(names.values())))
            with (out_dir / "feedback" / f"{name}.md").open("a", errors="backslashreplace") as fb:
                fb.write(f"# {sub.name}\n\n{submissions.fenced(text)}\n\n")
    return csv_path


def grade_one(submission_dir, notebook: str, reference_dir="notebooks", keys_dir="lib/answer_keys", *,
              limits: sandbox.Limits | None = None, cell_timeout: float = 60,
              use_sandbox: bool = True) -> tuple[list[dict], str]:
    """Grade the notebook named ``notebook`` in ``submission_dir`` (Gradescope's layout: one assignment)."""
    submission_dir, reference_dir = Path(submission_dir), Path(reference_dir)
    _check_args(submission_dir, reference_dir, use_sandbox, keys_dir)
    if not (reference_dir / notebook).is_file():
        raise ValueError(f"notebook must name a notebook in {reference_dir}, got {notebook!r}")
    grader = _grader(reference_dir, notebook, load_keys(keys_dir))
    path = submission_dir / notebook
    if not path.exists():
        reason = f"the submission holds no notebook named {notebook}"
        return [_row(e, False, reason) for e in grader.exercises], reason + "\n"
    return _grade_safely(path, grader, limits or sandbox.Limits(), cell_timeout, use_sandbox)


def _grader(reference_dir: Path, notebook: str, keys: dict) -> Grader:
    points_file = reference_dir / "points.json"
    points = json.loads(points_file.read_text()) if points_file.exists() else {}
    return Grader(json.loads((reference_dir / notebook).read_text()), keys, points)


def _grade_safely(path, grader, limits, cell_timeout, use_sandbox) -> tuple[list[dict], str]:
    try:
        return grade_submission(path, grader, limits, cell_timeout=cell_timeout, use_sandbox=use_sandbox)
    except Exception as err:  # a failure of the grader itself costs this submission, not the batch
        reason = f"the grader could not run this submission: {type(err).__name__}: {err}"[:300]
        return [_row(e, False, reason) for e in grader.exercises], reason + "\n"


def _check_args(submissions_dir: Path, reference_dir: Path, use_sandbox: bool, keys_dir=None, out_dir=None):
    if not submissions_dir.is_dir():
        raise ValueError(f"submissions_dir must be a directory, got {submissions_dir}")
    if not reference_dir.is_dir():
        raise ValueError(f"reference_dir must be a directory, got {reference_dir}")
    shown = [p.resolve() for p in sandbox.read_only_paths()]
    for what, folder in (("submissions", submissions_dir), ("reference", reference_dir), ("keys", keys_dir),
                         ("output", out_dir)):
        if folder is not None and any(Path(folder).resolve().is_relative_to(p) for p in shown):
            raise ValueError(f"the {what} folder {folder} lies inside a folder the sandbox shows to every notebook")
    if use_sandbox and not sandbox.bwrap_available():
        raise RuntimeError("bubblewrap (bwrap) is missing or cannot create namespaces here, so submissions cannot "
                           "be sandboxed. Install it (Debian/Ubuntu: apt install bubblewrap), grade in a Linux "
                           "container (see book/instructors.md), or pass --no-sandbox to run them with your own "
                           "rights.")


_ = checks  # the import registers every check
