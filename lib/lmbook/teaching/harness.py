"""What runs inside the grading sandbox: execute a submission, then call its functions on the grader's inputs.

Reads a job (JSON) on stdin: the submission's code cells, and for each exercise the name the student's answer
goes by. Runs every cell in one IPython shell, as a notebook would (magics and extensions included), each cell
interrupted after ``cell_timeout`` seconds; what the cells print goes to stderr, the log. It ends the log with the
cells' errors and the sandbox's MARKER, after which nothing printed is kept; only then does the grader send a
second line, the inputs of each exercise, hidden ones included. For each exercise it writes one JSON line to
stdout: the answer's value, or the function's output on each input (or the error it raised), as plain data
(:mod:`lmbook.teaching.plain`); an exercise is taken as it stood when its self-check cell ran. Nothing here
decides a grade: the grader compares these outputs with the answer keys, outside the sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from contextlib import contextmanager

from .plain import NotPlain, decode, encode
from .sandbox import MARKER

CELLS = b"\n\x00lmbook: errors of the cells "  # then a JSON list, then MARKER
MAX_LINE = 4 * 2**20  # bytes of JSON per exercise


class TimeLimit(KeyboardInterrupt):
    pass


@contextmanager
def time_limit(seconds: float):
    def interrupt(signum, frame):
        raise TimeLimit(f"interrupted after {seconds:g} s")

    signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:500]


def run_cells(shell, cells: list[str], cell_timeout: float, exercises: list[dict]) -> tuple[list, dict]:
    """Run each cell; return each cell's error (None where it ran cleanly), and each exercise's answer as it
    stood right after the cell that calls its self-check (a notebook may reuse a name such as ``answer``)."""
    errors, answers = [], {}
    for i, source in enumerate(cells):
        print(f"\n---- code cell {i + 1} ----", flush=True)
        try:
            with time_limit(cell_timeout):
                result = shell.run_cell(source, store_history=True)
            err = result.error_before_exec or result.error_in_exec
        except BaseException as caught:  # the interrupt can land outside the cell's own code
            err = caught
        errors.append(None if err is None else _error(err))
        for e in exercises:
            if f"check_{e['name']}(" in source and e["name"] not in answers and e["target"] in shell.user_ns:
                answers[e["name"]] = shell.user_ns[e["target"]]
    return errors, answers


def harvest(answers: dict, namespace: dict, exercise: dict, case_timeout: float) -> dict:
    """The plain-data outputs of one exercise: its value, or its function's output on each case."""
    target = exercise["target"]
    if exercise["name"] not in answers and target not in namespace:
        return {"error": f"{target} is not defined"}
    value = answers.get(exercise["name"], namespace.get(target))
    if exercise["kind"] == "answer":
        try:
            return {"value": encode(value)}
        except NotPlain as err:
            return {"error": f"{target} is {err}, not a number"}
    if not callable(value):
        return {"error": f"{target} is not a function"}
    outputs = []
    for case in exercise["cases"]:
        try:
            args, kwargs = decode(case["args"], torch_tensors=True), decode(case["kwargs"], torch_tensors=True)
            with time_limit(case_timeout):
                outputs.append({"value": encode(value(*args, **kwargs))})
        except NotPlain as err:
            outputs.append({"error": f"returned {err}, which is not plain data"})
        except BaseException as err:  # the student's error, or the time limit
            outputs.append({"error": _error(err)})
    return {"outputs": outputs, "module": str(getattr(value, "__module__", ""))[:100]}


def main() -> None:
    """Two phases: the job's first line holds the cells and the exercises; once the cells have run and the log
    is closed with the sandbox's MARKER, the grader sends a second line with the inputs of each exercise."""
    job = json.loads(sys.stdin.buffer.readline())
    results, log = os.fdopen(os.dup(1), "w"), os.dup(2)  # stdout carries the results; the cells' output: the log
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="NoColor", xmode="Plain")
    errors, answers = run_cells(shell, job["cells"], job["cell_timeout"], job["exercises"])
    os.write(log, CELLS + json.dumps(errors).encode() + MARKER)
    silent = os.open(os.devnull, os.O_WRONLY)  # from here on, nothing printed is kept
    os.dup2(silent, 1)
    os.dup2(silent, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")
    cases = json.loads(sys.stdin.buffer.readline())
    for exercise in job["exercises"]:
        exercise["cases"] = cases.get(exercise["name"], [])
        outputs = harvest(answers, shell.user_ns, exercise, job["case_timeout"])
        line = json.dumps({"exercise": exercise["name"], **outputs})
        if len(line) > MAX_LINE:
            line = json.dumps({"exercise": exercise["name"], "error": "the outputs are too large"})
        results.write(line + "\n")
        results.flush()
    os._exit(0)  # skip the interpreter's shutdown: a student's atexit hook or thread cannot delay it


if __name__ == "__main__":
    main()
