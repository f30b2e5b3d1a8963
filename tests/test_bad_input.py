"""Bad input, driven by properties: every public function and class of every concept module of lmbook is
called with bad arguments, and must answer with a TypeError or ValueError whose message names the argument.

How it works (the case format is in tests/bad_input/README.md):
- The concept modules are found, not listed: every top-level module of lmbook except the book helpers.
- tests/bad_input/<module>.py gives, for each public callable, a ``Case``: a fresh valid call. A completeness
  test fails for every public function, class or method that has neither a Case nor a SKIP entry.
- For each (case, parameter), the kinds of mutation are chosen from the type of the valid value (an int gets
  "negative", "zero", "float", ...; a list of words gets "plain_str", "empty", ...). The test first makes one
  call per kind with a fixed bad value, then lets hypothesis draw kinds and values (derandomized, so CI is
  deterministic). A silent return, another exception type, or a message that does not name the parameter
  fails, with the case, the parameter, the kind and the value in the message.
- Kinds that a Case lists in ``ok`` are documented behaviour and are not tried; "none" is also accepted where
  the parameter's default is None.

``python tests/test_bad_input.py --report [module ...]`` makes the fixed calls only and prints a markdown table
per module: calls, clear errors, unclear ones (wrong type, or the argument not named), silent returns, allowed.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import inspect
import pkgutil
import random
import re
import signal
import sys
import threading
import time
import warnings
from numbers import Integral, Real
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "lib", ROOT / "tests"):  # the checkout's lmbook, and the bad_input package beside this file
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import lmbook  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from bad_input._case import Case  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402

HELPERS = {"show", "plotting", "utils", "data", "validate", "diagrams", "checks"}  # book helpers, not concepts
MAX_EXAMPLES = 10  # hypothesis examples per (case, parameter), after one fixed call per kind
CALL_TIMEOUT_S = 10  # a bad call that runs longer than this counts as hung
NAN, INF = float("nan"), float("inf")


# ----- discovery ----------------------------------------------------------------------------------------
def concept_modules() -> list[str]:
    """The top-level modules of lmbook, less the book helpers, subpackages and private modules."""
    return sorted(m.name for m in pkgutil.iter_modules(lmbook.__path__)
                  if not m.ispkg and not m.name.startswith("_") and m.name not in HELPERS)


def public_callables(module) -> list[str]:
    """Functions and classes that ``module`` defines and exports, and the public methods of those classes."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    found = []
    for name in names:
        obj = getattr(module, name, None)
        if getattr(obj, "__module__", None) != module.__name__:  # constants, and names re-exported from elsewhere
            continue
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                continue
            found.append(name)
            for attr, raw in vars(obj).items():
                if not attr.startswith("_") and (inspect.isfunction(raw) or isinstance(raw, (staticmethod,
                                                                                             classmethod))):
                    found.append(f"{name}.{attr}")
        elif callable(obj):
            found.append(name)
    return found


@dataclasses.dataclass
class CaseFile:
    module: str
    cases: list = dataclasses.field(default_factory=list)
    skip: dict = dataclasses.field(default_factory=dict)
    error: str | None = None  # why the concept module or its case file could not be loaded
    missing: bool = False  # there is no tests/bad_input/<module>.py


def load(name: str) -> CaseFile:
    try:
        importlib.import_module(f"lmbook.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"lmbook.{name}":
            return CaseFile(name, error=f"import lmbook.{name} failed: {type(err).__name__}: {err}")
    except Exception as err:  # a module being rewritten must not stop the collection of every other test
        return CaseFile(name, error=f"import lmbook.{name} failed: {type(err).__name__}: {err}")
    try:
        cases = importlib.import_module(f"bad_input.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"bad_input.{name}":
            return CaseFile(name, missing=True)
        return CaseFile(name, error=f"import bad_input.{name} failed: {err}")
    except Exception as err:
        return CaseFile(name, error=f"import bad_input.{name} failed: {type(err).__name__}: {err}")
    return CaseFile(name, list(getattr(cases, "CASES", [])), dict(getattr(cases, "SKIP", {})))


def case_file_names() -> list[str]:
    folder = Path(__file__).with_name("bad_input")
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def parameters(module, target: str) -> list[inspect.Parameter]:
    """The named parameters of ``target`` ("fn", "Class" for its constructor, "Class.method"), less self/cls."""
    head, _, method = target.partition(".")
    obj = getattr(module, head)
    if not method:
        params = list(inspect.signature(obj).parameters.values())
    else:
        raw = inspect.getattr_static(obj, method)
        func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        params = list(inspect.signature(func).parameters.values())
        if not isinstance(raw, staticmethod):
            params = params[1:]
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


# ----- mutation kinds, by the type of the valid value ---------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Mutator:
    fixed: object  # valid -> the bad value the report and the first sweep use
    draw: object = None  # valid -> a hypothesis strategy of bad values; None: always the fixed one
    applies: object = None  # valid -> bool; None: always

    def strategy(self, valid):
        return self.draw(valid) if self.draw else st.just(self.fixed(valid))


def _pos(n: int):
    return st.integers(0, max(n - 1, 0))


def _replaced(seq, i: int, value):
    items = list(seq)
    items[i] = value
    return tuple(items) if isinstance(seq, tuple) else items


def _with_item(valid, make):
    """Replace one item of a list by make(old item); the position is drawn."""
    return _pos(len(valid)).flatmap(lambda i: make(valid[i]).map(lambda v: _replaced(valid, i, v)))


def _tensor_set(t: torch.Tensor, i: int, value) -> torch.Tensor:
    if not t.is_floating_point() and value >= 2 ** 15 and torch.iinfo(t.dtype).max < value:
        t = t.long()
    flat = t.detach().flatten().clone()
    flat[i] = value
    return flat.reshape(t.shape)


def _array_set(a: np.ndarray, i: int, value) -> np.ndarray:
    if a.dtype.kind == "u" or (a.dtype.kind == "i" and np.iinfo(a.dtype).max < abs(value)):
        a = a.astype(np.int64)
    b = a.copy()
    b.flat[i] = value
    return b


def _tensor_entry(value, draw_value=None):
    """Set one entry (the first, or a drawn one) of a tensor or an array to ``value``."""
    def setter(t, i, v):
        return _tensor_set(t, i, v) if isinstance(t, torch.Tensor) else _array_set(t, i, v)
    values = st.just(value) if draw_value is None else draw_value
    return Mutator(lambda t: setter(t, 0, value),
                   lambda t: st.tuples(_pos(t.numel() if isinstance(t, torch.Tensor) else t.size), values)
                   .map(lambda iv: setter(t, *iv)),
                   lambda t: (t.numel() if isinstance(t, torch.Tensor) else t.size) > 0)


def _unknown_choices(valid: str) -> list[str]:
    candidates = {valid.upper(), valid.title(), valid + "s", valid.replace("-", "_"), valid.replace("_", "-"),
                  " " + valid, "no-such-option"}
    return sorted(candidates - {valid})


def _words(corpus) -> list[tuple[int, int]]:
    """The (sentence, position) of every word of a corpus."""
    return [(i, j) for i, sentence in enumerate(corpus) for j in range(len(sentence))]


def _word_replaced(corpus, where: tuple[int, int], value) -> list:
    i, j = where
    return [_replaced(sentence, j, value) if k == i else sentence for k, sentence in enumerate(corpus)]


NONE = Mutator(lambda v: None)
SHAPE = {  # kinds every tensor and array has
    "extra_dim": Mutator(lambda t: t.unsqueeze(0) if isinstance(t, torch.Tensor) else t[None]),
    "missing_dim": Mutator(lambda t: t[0], applies=lambda t: t.ndim > 1),
    "none": NONE,
}

MUTATORS: dict[str, dict[str, Mutator]] = {
    "int": {
        "negative": Mutator(lambda v: -1, lambda v: st.one_of(st.integers(-3, -1), st.integers(max_value=-1)),
                            applies=lambda v: v >= 0),
        "zero": Mutator(lambda v: 0, applies=lambda v: v != 0),
        "float": Mutator(lambda v: v + 0.5, lambda v: st.one_of(
            st.just(float(v)), st.floats(0.1, 1e6).filter(lambda x: not x.is_integer()))),
        "bool": Mutator(lambda v: True, lambda v: st.booleans()),
        "str": Mutator(lambda v: str(v), lambda v: st.one_of(st.just(str(v)), st.text(max_size=3))),
        "none": NONE,
    },
    "float": {
        "nan": Mutator(lambda v: NAN, lambda v: st.sampled_from([NAN, np.float64(NAN)])),
        "inf": Mutator(lambda v: INF, lambda v: st.sampled_from([INF, -INF])),
        "negative": Mutator(lambda v: -1.0, lambda v: st.one_of(
            st.floats(-1.0, 0.0, exclude_max=True), st.floats(max_value=-1.0, allow_infinity=False)),
            applies=lambda v: v >= 0),
        "zero": Mutator(lambda v: 0.0, lambda v: st.sampled_from([0.0, -0.0, 0]), applies=lambda v: v != 0),
        "bool": Mutator(lambda v: True, lambda v: st.booleans()),
        "str": Mutator(lambda v: str(v), lambda v: st.one_of(st.just(str(v)), st.text(max_size=3))),
        "none": NONE,
    },
    "bool": {
        "str": Mutator(lambda v: "yes", lambda v: st.sampled_from(["yes", "no", "True", "False", ""])),
        "int": Mutator(lambda v: 2, lambda v: st.sampled_from([0, 1, 2, -1])),
        "none": NONE,
    },
    "str": {
        "unknown": Mutator(lambda v: "no-such-option", lambda v: st.sampled_from(_unknown_choices(v))),
        "list": Mutator(lambda v: [v]),
        "none": NONE,
        "empty": Mutator(lambda v: ""),  # optional, for free text
        "bytes": Mutator(lambda v: v.encode()),  # optional, for free text
    },
    "strs": {
        "plain_str": Mutator(lambda v: " ".join(v), lambda v: st.sampled_from([" ".join(v), v[0]])),
        "empty": Mutator(lambda v: type(v)()),
        "non_str_item": Mutator(lambda v: _replaced(v, 0, 1),
                                lambda v: _with_item(v, lambda old: st.sampled_from([0, 1, 2.5, None, b"x"]))),
        "none": NONE,
    },
    "corpus": {
        "plain_str": Mutator(lambda v: " ".join(" ".join(s) for s in v)),
        "flat": Mutator(lambda v: list(v[0])),
        "str_items": Mutator(lambda v: [" ".join(s) for s in v]),
        "empty": Mutator(lambda v: []),
        "non_str_item": Mutator(lambda v: _word_replaced(v, _words(v)[0], 1), lambda v: st.tuples(
            st.sampled_from(_words(v)), st.sampled_from([0, 1, None, 2.5])).map(lambda wx: _word_replaced(v, *wx))),
        "none": NONE,
        "empty_items": Mutator(lambda v: [[] for _ in v]),  # optional
    },
    "ints": {
        "plain_str": Mutator(lambda v: " ".join(map(str, v))),
        "single": Mutator(lambda v: v[0]),
        "float_item": Mutator(lambda v: _replaced(v, 0, v[0] + 0.5), lambda v: _with_item(
            v, lambda old: st.sampled_from([old + 0.5, float(old)]))),
        "negative_item": Mutator(lambda v: _replaced(v, 0, -1), lambda v: _with_item(
            v, lambda old: st.integers(-99, -1))),
        "huge_item": Mutator(lambda v: _replaced(v, 0, 10 ** 6)),
        "empty": Mutator(lambda v: type(v)()),
        "none": NONE,
    },
    "floats": {
        "plain_str": Mutator(lambda v: " ".join(map(str, v))),
        "nan_item": Mutator(lambda v: _replaced(v, 0, NAN), lambda v: _with_item(v, lambda old: st.just(NAN))),
        "str_item": Mutator(lambda v: _replaced(v, 0, str(v[0])), lambda v: _with_item(
            v, lambda old: st.just(str(old)))),
        "empty": Mutator(lambda v: type(v)()),
        "none": NONE,
    },
    "int_lists": {
        "plain_str": Mutator(lambda v: " ".join(map(str, v[0]))),
        "flat": Mutator(lambda v: list(v[0])),
        "negative_item": Mutator(lambda v: [_replaced(v[0], 0, -1)] + list(v[1:]),
                                 applies=lambda v: len(v[0]) > 0),
        "empty": Mutator(lambda v: []),
        "none": NONE,
    },
    "list": {
        "plain_str": Mutator(lambda v: " ".join(map(str, v))),
        "single": Mutator(lambda v: v[0]),
        "empty": Mutator(lambda v: type(v)()),
        "none": NONE,
    },
    "float_tensor": {
        "not_tensor": Mutator(lambda t: t.tolist()),
        "int_dtype": Mutator(lambda t: t.detach().long()),
        "nan": _tensor_entry(NAN),
        "inf": _tensor_entry(INF),
        "empty": Mutator(lambda t: t.detach()[..., :0], applies=lambda t: t.ndim >= 1),
        **SHAPE,
        "neg_inf": _tensor_entry(-INF),  # optional
    },
    "int_tensor": {
        "not_tensor": Mutator(lambda t: t.tolist()),
        "float_dtype": Mutator(lambda t: t.float()),
        "negative_id": _tensor_entry(-1, st.integers(-99, -1)),
        "huge_id": _tensor_entry(10 ** 6),
        **SHAPE,
        "empty": Mutator(lambda t: t[..., :0], applies=lambda t: t.ndim >= 1),  # optional
    },
    "bool_tensor": {
        "not_tensor": Mutator(lambda t: t.tolist()),
        "float_dtype": Mutator(lambda t: t.float()),
        **SHAPE,
    },
    "float_array": {
        "not_array": Mutator(lambda a: a.tolist()),
        "int_dtype": Mutator(lambda a: a.astype(np.int64)),
        "nan": _tensor_entry(NAN),
        "inf": _tensor_entry(INF),
        "empty": Mutator(lambda a: a[..., :0], applies=lambda a: a.ndim >= 1),
        **SHAPE,
        "neg_inf": _tensor_entry(-INF),  # optional
    },
    "int_array": {
        "not_array": Mutator(lambda a: a.tolist()),
        "float_dtype": Mutator(lambda a: a.astype(np.float64)),
        "negative_id": _tensor_entry(-1, st.integers(-99, -1)),
        "huge_id": _tensor_entry(10 ** 6),
        **SHAPE,
        "empty": Mutator(lambda a: a[..., :0], applies=lambda a: a.ndim >= 1),  # optional
    },
    "dtype": {
        "str": Mutator(lambda d: str(d).removeprefix("torch.")),
        "int_dtype": Mutator(lambda d: torch.int64, applies=lambda d: d.is_floating_point),
        "none": NONE,
    },
    "module": {
        "not_module": Mutator(lambda m: m.state_dict(), lambda m: st.sampled_from([m.state_dict(),
                                                                                   type(m).__name__])),
        "class": Mutator(lambda m: type(m)),
        "none": NONE,
    },
    "config": {
        "wrong_type": Mutator(lambda c: dataclasses.asdict(c)),
        "class": Mutator(lambda c: type(c)),
        "none": NONE,
    },
    "object": {
        "wrong_type": Mutator(lambda o: type(o).__name__, lambda o: st.sampled_from([type(o).__name__, {}, 3])),
        "class": Mutator(lambda o: type(o)),
        "none": NONE,
    },
    "dict": {
        "list": Mutator(lambda d: list(d)),
        "empty": Mutator(lambda d: {}),
        "none": NONE,
    },
    "set": {
        "scalar": Mutator(lambda s: sorted(s, key=repr)[0]),
        "empty": Mutator(lambda s: type(s)()),
        "none": NONE,
    },
    "callable": {
        "not_callable": Mutator(lambda f: getattr(f, "__name__", "function")),
        "none": NONE,
    },
    "sparse": {
        "not_matrix": Mutator(lambda m: m.toarray().tolist()),
        "none": NONE,
    },
}
OPTIONAL = {("str", "empty"), ("str", "bytes"), ("corpus", "empty_items"), ("float_tensor", "neg_inf"),
            ("int_tensor", "empty"), ("float_array", "neg_inf"), ("int_array", "empty")}  # only through `kinds`
DEFAULT_KINDS = {kind_type: tuple(k for k in table if (kind_type, k) not in OPTIONAL)
                 for kind_type, table in MUTATORS.items()}
ALL_KINDS = {k for table in MUTATORS.values() for k in table}


def _is_int(x) -> bool:
    return isinstance(x, Integral) and not isinstance(x, (bool, np.bool_))


def classify(value) -> str | None:
    """The key of MUTATORS for a valid value, or None when no kind can be guessed from it."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if _is_int(value):
        return "int"
    if isinstance(value, Real):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, torch.Tensor):
        return ("float_tensor" if value.is_floating_point() else "bool_tensor" if value.dtype == torch.bool
                else None if value.is_complex() else "int_tensor")
    if isinstance(value, np.ndarray):
        return {"f": "float_array", "i": "int_array", "u": "int_array"}.get(value.dtype.kind)
    if isinstance(value, torch.dtype):
        return "dtype"
    if isinstance(value, nn.Module):
        return "module"
    if type(value).__module__.startswith("scipy.sparse"):
        return "sparse"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "config"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, (set, frozenset)):
        return "set"
    if isinstance(value, (list, tuple)):
        if not value:
            return None
        if all(isinstance(x, str) for x in value):
            return "strs"
        if all(isinstance(x, (list, tuple)) for x in value):
            inner = [y for x in value for y in x]
            if inner and all(isinstance(y, str) for y in inner):
                return "corpus"
            if inner and all(_is_int(y) for y in inner):
                return "int_lists"
            return "list"
        if all(_is_int(x) for x in value):
            return "ints"
        if all(isinstance(x, Real) and not isinstance(x, (bool, np.bool_)) for x in value):
            return "floats"
        return "list"
    if inspect.isroutine(value) or inspect.isclass(value):
        return "callable"
    return "object"


# ----- planning and making one bad call -----------------------------------------------------------------
class PlanError(Exception):
    """The case file, not the library, is wrong: the message says what to change."""


@dataclasses.dataclass
class Plan:
    kind_type: str | None
    kinds: tuple  # kinds to try
    allowed: tuple  # kinds not tried: documented behaviour


def valid_value(case: Case, param: inspect.Parameter, kwargs: dict):
    if param.name in kwargs:
        return kwargs[param.name]
    if param.default is inspect.Parameter.empty:
        raise PlanError(f"{case.name}: call() does not pass the required parameter {param.name!r}")
    return param.default


def plan(case: Case, param: inspect.Parameter) -> Plan:
    _, kwargs = case.call()
    valid = valid_value(case, param, kwargs)
    kind_type = classify(valid)
    if param.name in case.kinds:
        names = tuple(case.kinds[param.name])
        if names and kind_type is None:
            raise PlanError(f"{case.name}: kinds for {param.name!r} given, but no mutation applies to its valid "
                            f"value {describe(valid)}")
        unknown = [k for k in names if k not in MUTATORS.get(kind_type, {})]
        if unknown:
            raise PlanError(f"{case.name}: kinds {unknown} do not apply to {param.name}={describe(valid)} "
                            f"({kind_type}); these do: {sorted(MUTATORS[kind_type])}")
    elif kind_type is None:
        raise PlanError(f"{case.name}: no mutation kind can be guessed for {param.name}={describe(valid)}: pass "
                        f"a typed valid value in call(), or give kinds={{{param.name!r}: (...)}}, or () to leave "
                        "it undriven (with a comment saying why)")
    else:
        names = DEFAULT_KINDS[kind_type]
    table = MUTATORS.get(kind_type, {})
    names = tuple(k for k in names if table[k].applies is None or table[k].applies(valid))
    ok = set(case.ok.get(param.name, ()))
    stale = ok - set(names)
    if stale:
        raise PlanError(f"{case.name}: ok lists {sorted(stale)} for {param.name!r}, but only {list(names)} are "
                        f"tried on {describe(valid)}")
    if param.default is None:
        ok.add("none")  # the signature documents None
    return Plan(kind_type, tuple(k for k in names if k not in ok), tuple(k for k in names if k in ok))


class _Hung(BaseException):  # a BaseException, so that no `except Exception` in the library swallows it
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0)  # never disturb a timer someone else set
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise _Hung()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def names_argument(message: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message) is not None


@dataclasses.dataclass
class Outcome:
    verdict: str  # "clear", "unnamed" (right type, argument not named), "other" (another type), "silent", "hung"
    value: object
    detail: str = ""


def attempt(case: Case, param: inspect.Parameter, kind: str, kind_type: str, choose=None) -> Outcome:
    """Make a fresh valid call with ``param`` replaced by a bad value of ``kind``: the fixed one, or
    ``choose(strategy)``'s draw."""
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    fn, kwargs = case.call()
    kwargs = dict(kwargs)
    mutator = MUTATORS[kind_type][kind]
    valid = valid_value(case, param, kwargs)
    bad = mutator.fixed(valid) if choose is None else choose(mutator.strategy(valid))
    kwargs[param.name] = bad
    try:
        with _time_limit(CALL_TIMEOUT_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(**kwargs)
    except _Hung:
        return Outcome("hung", bad, f"no answer within {CALL_TIMEOUT_S} s")
    except (TypeError, ValueError) as err:
        text = f"{type(err).__name__}: {err}"
        return Outcome("clear" if names_argument(str(err), param.name) else "unnamed", bad, text)
    except Exception as err:
        return Outcome("other", bad, f"{type(err).__name__}: {err}")
    return Outcome("silent", bad, "returned without an error")


def describe(value) -> str:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        name, size = ("tensor", value.numel()) if isinstance(value, torch.Tensor) else ("array", value.size)
        values = f"{value.tolist()}, " if size <= 12 else ""
        if name == "tensor":
            where = (~torch.isfinite(value.detach())).flatten().nonzero().flatten()[:3].tolist()
        else:
            where = np.flatnonzero(~np.isfinite(value)).tolist()[:3] if value.dtype.kind in "fc" else []
        nonfinite = f", non-finite at flat index {where}" if where and size > 12 else ""
        return f"{name}({values}{value.dtype}, shape {tuple(value.shape)}{nonfinite})"
    if isinstance(value, nn.Module):
        return f"{type(value).__name__} module"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


VERDICT = {"unnamed": "error does not name the argument", "other": "wrong exception type",
           "silent": "silent return", "hung": "hung"}


def failure_line(module: str, case: Case, param: str, kind: str, outcome: Outcome) -> str:
    detail = outcome.detail.splitlines()[0][:200] if outcome.detail else ""
    return (f"{module}.{case.name}({param}=<{kind}> {describe(outcome.value)}): {VERDICT[outcome.verdict]}"
            + (f" -- {detail}" if outcome.verdict != "silent" else ""))


# ----- collection ---------------------------------------------------------------------------------------
CONCEPTS = concept_modules()
FILES = {name: load(name) for name in sorted(set(CONCEPTS) | set(case_file_names()))}


def _entries():
    cases, params = [], []
    for name, file in FILES.items():
        if file.error or file.missing or name not in CONCEPTS:
            continue
        module = sys.modules[f"lmbook.{name}"]
        for case in file.cases:
            try:
                found = parameters(module, case.target)
            except (AttributeError, TypeError, ValueError):
                continue  # the completeness test names the unknown target
            cases.append(pytest.param(name, case, id=f"{name}.{case.name}"))
            params += [pytest.param(name, case, p, id=f"{name}.{case.name}:{p.name}") for p in found]
    return cases, params


CASE_ENTRIES, PARAM_ENTRIES = _entries()


# ----- the tests ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(FILES))
def test_every_public_callable_has_a_case(name):
    file = FILES[name]
    where = f"tests/bad_input/{name}.py"
    if name not in CONCEPTS:
        pytest.fail(f"{where}: lmbook.{name} is not a concept module (gone, renamed or a book helper): move its "
                    "cases to the module that now holds the functions", pytrace=False)
    if file.error:
        pytest.fail(file.error, pytrace=False)
    public = public_callables(sys.modules[f"lmbook.{name}"])
    if file.missing:
        pytest.fail(f"lmbook.{name} has no case file: write {where} with a Case or a SKIP entry for each of: "
                    + ", ".join(public), pytrace=False)
    covered = {getattr(c, "target", None) for c in file.cases} | set(file.skip)
    problems = []
    if missing := [p for p in public if p not in covered]:
        problems.append(f"no Case and no SKIP entry for: {', '.join(missing)}")
    if unknown := sorted(str(c) for c in covered - set(public)):
        problems.append(f"not a public callable of lmbook.{name}: {', '.join(unknown)}")
    if unexplained := [k for k, why in file.skip.items() if not (isinstance(why, str) and why.strip())]:
        problems.append(f"SKIP entries without a reason: {', '.join(unexplained)}")
    for case in file.cases:
        if not isinstance(case, Case):
            problems.append(f"{case!r} is not a Case")
            continue
        if case.target in file.skip:
            problems.append(f"{case.target} has both a Case and a SKIP entry")
        try:
            names = {p.name for p in parameters(sys.modules[f"lmbook.{name}"], case.target)}
        except (AttributeError, TypeError, ValueError):
            continue
        for field in ("ok", "kinds"):
            for param, kinds in getattr(case, field).items():
                if param not in names:
                    problems.append(f"{case.name}: {field} names {param!r}, which is not a parameter")
                if bad := sorted(set(kinds) - ALL_KINDS):
                    problems.append(f"{case.name}: {field}[{param!r}] has unknown kinds {bad}")
    if problems:
        pytest.fail(f"{where}:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.mark.parametrize("name, case", CASE_ENTRIES)
def test_valid_call_works(name, case):
    """A case's own call must succeed, or every bad call derived from it proves nothing."""
    fn, kwargs = case.call()
    params = parameters(sys.modules[f"lmbook.{name}"], case.target)
    names = {p.name for p in params}
    assert set(kwargs) <= names, f"{case.name}: call() passes {sorted(set(kwargs) - names)}, not parameters"
    fn(**kwargs)
    for param in params:
        try:
            plan(case, param)
        except PlanError as err:
            pytest.fail(str(err), pytrace=False)


@pytest.mark.parametrize("name, case, param", PARAM_ENTRIES)
def test_bad_input_is_rejected_by_name(name, case, param):
    try:
        p = plan(case, param)
    except PlanError as err:
        pytest.fail(str(err), pytrace=False)
    if not p.kinds:
        return
    failures = []
    for kind in p.kinds:  # one fixed value of each kind: every kind is tried at least once
        outcome = attempt(case, param, kind, p.kind_type)
        if outcome.verdict != "clear":
            failures.append(failure_line(name, case, param.name, kind, outcome))
    if failures:
        pytest.fail("bad input not rejected by name:\n  " + "\n  ".join(failures), pytrace=False)

    drawable = [k for k in p.kinds if MUTATORS[p.kind_type][k].draw is not None]  # the others were just tried
    if not drawable:
        return

    @settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def drawn(data):  # then values drawn at random (deterministically): other positions, magnitudes, spellings
        kind = data.draw(st.sampled_from(drawable), label="kind")
        outcome = attempt(case, param, kind, p.kind_type, lambda strategy: data.draw(strategy, label="value"))
        if outcome.verdict != "clear":
            raise AssertionError(failure_line(name, case, param.name, kind, outcome))

    drawn()


# ----- the framework itself -----------------------------------------------------------------------------
@dataclasses.dataclass
class _Config:
    d_model: int = 8


def _samples() -> dict:
    """A valid value of every type a kind can be guessed from."""
    import scipy.sparse

    return {"int": 3, "float": 0.5, "bool": True, "str": "mle", "strs": ["a", "b"], "corpus": [["a", "b"], ["c"]],
            "ints": [1, 2, 3], "floats": [0.5, 0.25], "int_lists": [[1, 2], [3]], "list": [("a", 1), ("b", 2)],
            "float_tensor": torch.randn(2, 3), "int_tensor": torch.tensor([[1, 2], [3, 4]]),
            "bool_tensor": torch.tensor([[True, False]]), "float_array": np.ones((2, 2)),
            "int_array": np.array([[1, 2]]), "dtype": torch.float32, "module": nn.Linear(2, 2),
            "config": _Config(), "object": random.Random(0), "dict": {"a": 1}, "set": {1, 2}, "callable": len,
            "sparse": scipy.sparse.csr_matrix(np.eye(2))}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and bool(torch.equal(a, b)))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and bool(np.array_equal(a, b)))
    return type(a) is type(b) and repr(a) == repr(b)  # repr tells 1 from 1.0 and True from 1, also inside lists


@pytest.mark.parametrize("kind_type", sorted(MUTATORS))
def test_every_mutation_changes_the_value(kind_type):
    """Each kind makes a value different from the valid one, fixed and drawn, without touching the valid one."""
    valid = _samples()[kind_type]
    assert classify(valid) == kind_type
    before = copy.deepcopy(valid)
    for kind, mutator in MUTATORS[kind_type].items():
        if mutator.applies is None or mutator.applies(valid):
            assert not _same(mutator.fixed(valid), valid), (kind_type, kind)

    @settings(max_examples=20, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def drawn(data):
        kind = data.draw(st.sampled_from([k for k, m in MUTATORS[kind_type].items()
                                          if m.applies is None or m.applies(valid)]))
        assert not _same(data.draw(MUTATORS[kind_type][kind].strategy(valid)), valid), (kind_type, kind)

    drawn()
    assert kind_type == "object" or _same(valid, before), "a mutation changed the valid value in place"


def test_names_argument_matches_whole_words():
    assert names_argument("n must be an int >= 1, got 0", "n")
    assert names_argument("tokens[0] must be a str", "tokens")
    assert names_argument("config.d_model must be even", "d_model")
    assert not names_argument("an int was expected", "n")
    assert not names_argument("each sentence must be a list", "sentences")


# ----- the report ---------------------------------------------------------------------------------------
def _cell(text: str, width: int = 120) -> str:
    text = text.splitlines()[0] if text else ""
    return (text if len(text) <= width else text[:width - 3] + "...").replace("|", "\\|")


def report(names: list[str]) -> str:
    """One fixed bad value per (case, parameter, kind): a summary table, then each module's failures."""
    out = ["| module | callables | uncovered | calls | clear | unclear | silent | allowed |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    details, totals = [], [0] * 7
    for name in names:
        file = FILES.get(name) or load(name)
        if file.error:
            out.append(f"| {name} | import failed | | | | | | |")
            details.append(f"### {name}\n\n{file.error}\n")
            continue
        module = sys.modules[f"lmbook.{name}"]
        public = public_callables(module)
        uncovered = [p for p in public if p not in {c.target for c in file.cases} | set(file.skip)]
        counts = {"calls": 0, "clear": 0, "unclear": 0, "silent": 0, "allowed": 0}
        rows = []
        for case in file.cases:
            try:
                params = parameters(module, case.target)
            except (AttributeError, TypeError, ValueError) as err:
                rows.append(f"| {case.name} | | | | case problem: unknown target ({_cell(str(err))}) |")
                continue
            for param in params:
                try:
                    p = plan(case, param)
                except Exception as err:  # a broken case file is reported, not raised
                    rows.append(f"| {case.name} | {param.name} | | | case problem: {_cell(str(err))} |")
                    continue
                counts["allowed"] += len(p.allowed)
                for kind in p.kinds:
                    try:
                        outcome = attempt(case, param, kind, p.kind_type)
                    except Exception as err:
                        rows.append(f"| {case.name} | {param.name} | {kind} | | case problem: {_cell(str(err))} |")
                        continue
                    counts["calls"] += 1
                    counts["clear" if outcome.verdict == "clear" else "silent" if outcome.verdict == "silent"
                           else "unclear"] += 1
                    if outcome.verdict != "clear":
                        detail = "" if outcome.verdict == "silent" else ": " + _cell(outcome.detail)
                        rows.append(f"| {case.name} | {param.name} | {kind} | `{_cell(describe(outcome.value), 40)}` "
                                    f"| {VERDICT[outcome.verdict]}{detail} |")
        row = [len(public), len(uncovered), *counts.values()]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        out.append(f"| {name}{' (no case file)' if file.missing else ''} | " + " | ".join(map(str, row)) + " |")
        if rows or (uncovered and not file.missing):
            text = f"### {name}\n\n"
            if uncovered and not file.missing:
                text += f"Uncovered: {', '.join(uncovered)}\n\n"
            if rows:
                text += "| case | param | kind | value | outcome |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
            details.append(text)
    out.append("| **total** | " + " | ".join(f"**{t}**" for t in totals) + " |")
    return "\n".join(out) + "\n\n" + "\n".join(details)


if __name__ == "__main__":
    if "--report" not in sys.argv[1:]:
        sys.exit("usage: python tests/test_bad_input.py --report [module ...]")
    torch.set_num_threads(1)
    chosen = [a for a in sys.argv[1:] if a != "--report"] or [n for n in FILES if n in CONCEPTS]
    start = time.perf_counter()
    print(report(chosen))
    print(f"({time.perf_counter() - start:.1f} s)")
