"""The self-check engine behind every exercise.

A check runs the student's function on several inputs (edge cases included) and compares it with the
reference. It prints one clear line when everything passes, or the first failing case: the input, the
expected value, the value received and a hint. It never raises: if the student's code raises, the
student's own exception and line are shown, without lmbook's frames. Each result is also recorded in
:data:`RESULTS`, which the autograder reads.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Case", "RESULTS", "run_check", "check_answer", "close"]

RESULTS: dict[str, bool] = {}
_PACKAGE_DIR = str(Path(__file__).resolve().parents[2])


@dataclass
class Case:
    """One input to a student's function: positional and keyword arguments, and an optional hint."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    hint: str = ""

    def call_text(self, name: str) -> str:
        parts = [_short(a) for a in self.args] + [f"{k}={_short(v)}" for k, v in self.kwargs.items()]
        return f"{name}({', '.join(parts)})"


def _short(x, width: int = 70) -> str:
    if hasattr(x, "tolist") and not isinstance(x, (int, float)):
        x = x.tolist()
    text = repr(x)
    return text if len(text) <= width else text[: width - 3] + "..."


def close(expected, got, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """True when ``got`` equals ``expected``: numbers and arrays to a tolerance, everything else by ==."""
    if isinstance(expected, (str, bool)) or expected is None:
        return expected == got
    if isinstance(expected, dict):
        return isinstance(got, dict) and expected.keys() == got.keys() and all(
            close(expected[k], got[k], rtol, atol) for k in expected
        )
    try:
        e = np.asarray(expected.detach().cpu() if hasattr(expected, "detach") else expected, dtype=float)
        g = np.asarray(got.detach().cpu() if hasattr(got, "detach") else got, dtype=float)
    except (TypeError, ValueError):
        return expected == got
    if e.shape != g.shape:
        return False
    return bool(np.allclose(e, g, rtol=rtol, atol=atol, equal_nan=True))


def _student_traceback(err: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith(_PACKAGE_DIR)]
    lines = [f"  line {f.lineno}: {f.line}" for f in frames[-2:] if f.line]
    return "\n".join([f"{type(err).__name__}: {err}", *lines])


def _report(name: str, ok: bool, message: str) -> bool:
    RESULTS[name] = ok
    print(message)
    return ok


def run_check(name: str, student_fn, reference_fn, cases, *, rtol: float = 1e-6, atol: float = 1e-9,
              hint: str = "") -> None:
    """Compare ``student_fn`` with ``reference_fn`` on each case; print a verdict (see the module docstring)."""
    label = f"check_{name}"
    if not callable(student_fn):
        _report(name, False, f"✗ {label}: expected your function, got {_short(student_fn)}. Pass the function "
                             f"itself, without calling it.")
        return
    fn_name = getattr(student_fn, "__name__", "your function")
    for i, case in enumerate(cases, 1):
        expected = reference_fn(*case.args, **case.kwargs)
        try:
            got = student_fn(*case.args, **case.kwargs)
        except NotImplementedError:
            _report(name, False, f"… {label}: not attempted yet: {fn_name} still raises NotImplementedError.")
            return
        except Exception as err:  # the student's bug, shown as theirs
            _report(name, False, f"✗ {label}: case {i} of {len(cases)}, {case.call_text(fn_name)}, raised\n"
                                 f"{_student_traceback(err)}")
            return
        if not close(expected, got, rtol, atol):
            tip = case.hint or hint
            _report(name, False, f"✗ {label}: case {i} of {len(cases)} differs.\n"
                                 f"  input:    {case.call_text(fn_name)}\n"
                                 f"  expected: {_short(expected)}\n"
                                 f"  got:      {_short(got)}" + (f"\n  hint:     {tip}" if tip else ""))
            return
    _report(name, True, f"✓ {label}: all {len(cases)} cases pass.")


def check_answer(name: str, answer, expected: float, *, rtol: float = 1e-3, hint: str = "") -> None:
    """Check a number computed by hand against ``expected`` to a relative tolerance (default 0.1%)."""
    label = f"check_{name}"
    if answer is None or answer is Ellipsis:
        _report(name, False, f"… {label}: not answered yet: set your answer, then run this cell again.")
        return
    try:
        value = float(answer)
    except (TypeError, ValueError):
        _report(name, False, f"✗ {label}: expected a number, got {_short(answer)}.")
        return
    if not (math.isfinite(value) and math.isclose(value, expected, rel_tol=rtol)):
        _report(name, False, f"✗ {label}: {value:.6g} is not right." + (f"\n  hint: {hint}" if hint else ""))
        return
    _report(name, True, f"✓ {label}: {value:.6g} is right.")
