"""The self-check engine behind every exercise.

Each exercise registers a :class:`Check`: the public inputs of a function exercise (its :class:`Case` list,
edge cases included, each with a hint), or a number worked out by hand. A self-check runs the student's function
on the public inputs and compares its output with the expected output stored in ``expected.json``. It prints one
clear line when everything passes, or the first failing case: the input, the expected value, the value received
and a hint. It never raises: if the student's code raises, the student's own exception and line are shown,
without lmbook's frames. Each result is also recorded in :data:`RESULTS`.

The package holds no reference solution. ``expected.json`` holds outputs, not code, and for a number worked out
by hand only digests of it (see :func:`answer_digests`). The reference solutions, and the hidden inputs the
grader adds to the public ones, are the instructor's answer keys (``lib/answer_keys``), which write
``expected.json``. Both the self-check and the grader compare in the same way: the output is turned into plain
data (:mod:`lmbook.teaching.plain`), optionally projected (:attr:`Check.project`) and compared with :func:`close`.
"""

from __future__ import annotations

import hashlib
import json
import math
import traceback
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Callable

import numpy as np

from ..plain import NotPlain, decode, encode

__all__ = ["Case", "Check", "CHECKS", "RESULTS", "function_check", "answer_check", "run_check", "check_answer",
           "close", "comparable", "public_cases", "answer_digests", "answer_matches", "EXPECTED_PATH"]

RESULTS: dict[str, bool] = {}
CHECKS: dict[str, "Check"] = {}
EXPECTED_PATH = Path(__file__).with_name("expected.json")
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


@dataclass(frozen=True)
class Check:
    """An exercise's check: ``cases`` builds the public inputs of a function exercise (None for a number worked
    out by hand); ``project`` maps a plain output to what is compared (for example shapes and a product)."""

    name: str
    cases: Callable[[], list[Case]] | None = None
    rtol: float = 1e-6
    atol: float = 1e-9
    hint: str = ""
    project: Callable | None = None
    whole: bool = False  # an answer that must be this exact whole number (a count, a length rounded down)

    @property
    def kind(self) -> str:
        return "answer" if self.cases is None else "function"


def function_check(name: str, cases: Callable[[], list[Case]], *, rtol: float = 1e-6, atol: float = 1e-9,
                   hint: str = "", project: Callable | None = None) -> Check:
    """Register the check of a function exercise."""
    CHECKS[name] = Check(name, cases, rtol, atol, hint, project)
    return CHECKS[name]


def answer_check(name: str, hint: str = "", whole: bool = False) -> Check:
    """Register the check of a number worked out by hand (``whole``: exactly this whole number)."""
    CHECKS[name] = Check(name, None, hint=hint, whole=whole)
    return CHECKS[name]


@cache
def _expected() -> dict:
    return json.loads(EXPECTED_PATH.read_text())


def public_cases(name: str) -> list[Case]:
    """The public cases of a function check, with the inputs stored in ``expected.json``: random inputs drawn on
    another CPU can differ in their last bits, and the stored outputs belong to the stored inputs."""
    stored = [decode(e, torch_tensors=True) for e in _expected()[name]["inputs"]]
    return [Case(tuple(s["args"]), s["kwargs"], c.hint) for s, c in zip(stored, CHECKS[name].cases(), strict=True)]


def comparable(check: Check, output):
    """``output`` as the grader compares it: plain data (raises NotPlain otherwise), then projected."""
    value = decode(json.loads(json.dumps(encode(output))))
    return check.project(value) if check.project else value


def _short(x, width: int = 70) -> str:
    if hasattr(x, "tolist") and not isinstance(x, (int, float)):
        x = x.tolist()
    text = repr(x)
    return text if len(text) <= width else text[: width - 3] + "..."


def close(expected, got, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """True when ``got`` equals ``expected``: numbers and arrays to a tolerance, everything else by ==."""
    if isinstance(expected, (str, bool, bytes, set, frozenset)) or expected is None:
        return type(got) is type(expected) and expected == got
    if isinstance(got, (str, bool, bytes)) or got is None:  # not a number, whatever it converts to
        return False
    if isinstance(expected, dict):
        return isinstance(got, dict) and expected.keys() == got.keys() and all(
            close(expected[k], got[k], rtol, atol) for k in expected
        )
    try:
        e = np.asarray(expected.detach().cpu() if hasattr(expected, "detach") else expected, dtype=float)
        g = np.asarray(got.detach().cpu() if hasattr(got, "detach") else got, dtype=float)
    except (TypeError, ValueError):
        if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
            pairs = zip(expected, got, strict=False)
            return len(expected) == len(got) and all(close(a, b, rtol, atol) for a, b in pairs)
        return False
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


def run_check(name: str, student_fn) -> None:
    """Compare ``student_fn`` with the expected outputs on each public case; print a verdict."""
    check, label = CHECKS[name], f"check_{name}"
    if not callable(student_fn):
        _report(name, False, f"✗ {label}: expected your function, got {_short(student_fn)}. Pass the function "
                             f"itself, without calling it.")
        return
    fn_name = getattr(student_fn, "__name__", "your function")
    cases, expected = public_cases(name), [decode(e) for e in _expected()[name]["outputs"]]
    for i, (case, want) in enumerate(zip(cases, expected, strict=True), 1):
        try:
            got = comparable(check, student_fn(*case.args, **case.kwargs))
        except NotImplementedError:
            _report(name, False, f"… {label}: not attempted yet: {fn_name} still raises NotImplementedError.")
            return
        except NotPlain as err:
            _report(name, False, f"✗ {label}: case {i} of {len(cases)}, {case.call_text(fn_name)}, returned {err}, "
                                 f"not numbers, strings, lists, dicts or arrays.")
            return
        except Exception as err:  # the student's bug, shown as theirs
            _report(name, False, f"✗ {label}: case {i} of {len(cases)}, {case.call_text(fn_name)}, raised\n"
                                 f"{_student_traceback(err)}")
            return
        if not close(want, got, check.rtol, check.atol):
            tip = case.hint or check.hint
            _report(name, False, f"✗ {label}: case {i} of {len(cases)} differs.\n"
                                 f"  input:    {case.call_text(fn_name)}\n"
                                 f"  expected: {_short(want)}\n"
                                 f"  got:      {_short(got)}" + (f"\n  hint:     {tip}" if tip else ""))
            return
    _report(name, True, f"✓ {label}: all {len(cases)} cases pass.")


# A number worked out by hand is right when its 4 significant figures lie between those of the answer moved by
# 0.05% either way: a relative tolerance between 0.05% and about 0.1%. The package stores only digests of those
# renderings, so the answer cannot be read from it (a determined student could still search 4-digit numbers:
# this keeps an answer out of sight, not secret). One more digest, of the answer to 3 figures, lets the check
# tell a student whose answer is right but too coarse to give a fourth figure.
_SPREAD = 5e-4


def _digest(name: str, value: float, figures: int = 4) -> str:
    prefix = "lmbook" if figures == 4 else f"lmbook{figures}"
    return hashlib.sha256(f"{prefix}:{name}:{value:.{figures - 1}e}".encode()).hexdigest()


def _four_figure_values(answer: float) -> list[float]:
    """Every number with 4 significant figures from the answer moved 0.05% down to it moved 0.05% up."""
    lo, hi = sorted((answer * (1 - _SPREAD), answer * (1 + _SPREAD)))
    values = [lo, answer, hi]
    for end in (lo, hi):
        if end != 0:
            unit = 10.0 ** (math.floor(math.log10(abs(end))) - 3)  # one unit in the 4th figure
            values += [m * unit for m in range(math.floor(lo / unit), math.ceil(hi / unit) + 1)
                       if lo <= m * unit <= hi]
    return values


def answer_digests(name: str, answer: float) -> list[str]:
    """The digests stored for the answer ``answer`` of exercise ``name``."""
    if _whole(name):
        return [_digest(name, float(answer), figures=16)]
    return sorted({_digest(name, v) for v in _four_figure_values(answer)})


def coarse_digest(name: str, answer: float) -> str:
    """The digest of the answer to 3 significant figures (to say "right, but give 4 figures")."""
    return _digest(name, answer, figures=3)


def answer_matches(name: str, value: float, digests) -> bool:
    """True when ``value`` is right for an exercise whose answer has these digests."""
    if _whole(name):
        return math.isfinite(value) and value == round(value) and _digest(name, value, figures=16) in set(digests)
    return math.isfinite(value) and _digest(name, value) in set(digests)


def _whole(name: str) -> bool:
    return name in CHECKS and CHECKS[name].whole


def _too_coarse(name: str, value: float, entry: dict) -> bool:
    """A value given to 3 significant figures or fewer that agrees with the answer to 3 figures."""
    return (not _whole(name) and math.isfinite(value) and value == float(f"{value:.2e}")
            and entry.get("coarse") == _digest(name, value, figures=3))


def check_answer(name: str, answer) -> None:
    """Check a number computed by hand (see :func:`answer_digests` for the tolerance)."""
    label, hint = f"check_{name}", CHECKS[name].hint
    if answer is None or answer is Ellipsis:
        _report(name, False, f"… {label}: not answered yet: set your answer, then run this cell again.")
        return
    try:
        value = float(answer)
    except (TypeError, ValueError):
        _report(name, False, f"✗ {label}: expected a number, got {_short(answer)}.")
        return
    entry = _expected()[name]
    if _too_coarse(name, value, entry) and not answer_matches(name, value, entry["digests"]):
        _report(name, False, f"✗ {label}: {value:.6g} is right to the figures given; give 4 significant figures.")
        return
    if not answer_matches(name, value, entry["digests"]):
        _report(name, False, f"✗ {label}: {value:.6g} is not right." + (f"\n  hint: {hint}" if hint else ""))
        return
    _report(name, True, f"✓ {label}: {value:.6g} is right.")
