"""Plain data: the only thing that crosses between a student's code and the grader.

:func:`encode` turns a value built from numbers, strings, bytes, lists, tuples, sets, dicts (with string or integer
keys), NumPy arrays and torch tensors into JSON-ready data; :func:`decode` turns it back. On the grader's side
(``torch_tensors=False``) every array comes back as a NumPy array, so nothing a student wrote, such as an object
with its own ``__eq__``, can reach the comparison. Anything else is refused with :class:`NotPlain`.
"""

from __future__ import annotations

import base64
import math

import numpy as np

__all__ = ["NotPlain", "encode", "decode", "MAX_DEPTH", "MAX_KEYS"]

MAX_DEPTH = 20
MAX_KEYS = 10_000  # set and dict entries in one value: crafted keys that all hash alike make building them slow
_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"}


class NotPlain(ValueError):
    """A value that is not plain data (or JSON that does not describe any)."""


def _float(x: float):
    return x if math.isfinite(x) else {"float": repr(x)}  # JSON has no inf or nan


def encode(value, depth: int = 0):
    """``value`` as JSON-ready data; raises :class:`NotPlain` naming the type that is not plain data."""
    if depth > MAX_DEPTH:
        raise NotPlain(f"nested more than {MAX_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _float(float(value))
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, (list, tuple)):
        items = [encode(v, depth + 1) for v in value]
        return items if isinstance(value, list) else {"tuple": items}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((encode(v, depth + 1) for v in value), key=repr)}
    if isinstance(value, dict):
        if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in value):
            raise NotPlain("a dict whose keys are not all strings or integers")
        return {"dict": [[int(k) if isinstance(k, int) else k, encode(v, depth + 1)] for k, v in value.items()]}
    kind = "tensor" if type(value).__module__.startswith("torch") and hasattr(value, "detach") else None
    if kind and str(value.dtype) == "torch.bfloat16":
        value = value.float()  # NumPy has no bfloat16
    array = value.detach().cpu().numpy() if kind else value
    if isinstance(array, np.ndarray):
        if array.dtype.name not in _DTYPES:
            raise NotPlain(f"an array of dtype {array.dtype.name}")
        data = [_float(float(x)) if array.dtype.kind == "f" else x.item() for x in array.reshape(-1)]
        return {kind or "array": {"dtype": array.dtype.name, "shape": list(array.shape), "data": data}}
    raise NotPlain(f"a {type(value).__module__}.{type(value).__qualname__}")


def _number(x, dtype: str = "float64"):
    if isinstance(x, dict) and set(x) == {"float"} and x["float"] in ("inf", "-inf", "nan"):
        return float(x["float"])
    if (dtype == "bool") != isinstance(x, bool) or not isinstance(x, (int, float)):
        raise NotPlain(f"an array element that is not a number: {type(x).__name__}")
    return x


def decode(data, torch_tensors: bool = False, depth: int = 0, budget: list | None = None):
    """The value that ``data`` (from :func:`encode`) describes, with arrays as NumPy arrays, or as torch tensors
    where ``torch_tensors`` (and the value was a tensor). Raises :class:`NotPlain` on anything else, and on more
    than ``MAX_KEYS`` set and dict entries in all (``budget`` counts them down through the recursion)."""
    budget = [MAX_KEYS] if budget is None else budget
    if depth > MAX_DEPTH:
        raise NotPlain(f"nested more than {MAX_DEPTH} levels deep")
    if data is None or isinstance(data, (bool, int, str)):
        return data
    if isinstance(data, float):
        return data
    if isinstance(data, list):
        return [decode(v, torch_tensors, depth + 1, budget) for v in data]
    if not (isinstance(data, dict) and len(data) == 1):
        raise NotPlain(f"unexpected JSON: {type(data).__name__}")
    (tag, body), = data.items()
    if tag == "float":
        return _number(data)
    if tag == "bytes" and isinstance(body, str):
        return base64.b64decode(body, validate=True)
    if tag == "tuple" and isinstance(body, list):
        return tuple(decode(v, torch_tensors, depth + 1, budget) for v in body)
    if tag in ("set", "dict") and isinstance(body, list):
        budget[0] -= len(body)
        if budget[0] < 0:
            raise NotPlain(f"more than {MAX_KEYS} set and dict entries")
    if tag == "set" and isinstance(body, list):
        try:
            return {decode(v, torch_tensors, depth + 1, budget) for v in body}
        except TypeError:
            raise NotPlain("a set of unhashable values") from None
    if tag == "dict" and isinstance(body, list):
        pairs = [p for p in body if isinstance(p, list) and len(p) == 2 and type(p[0]) in (str, int)]
        if len(pairs) != len(body):
            raise NotPlain("a dict entry that is not a [key, value] pair with a string or integer key")
        return {k: decode(v, torch_tensors, depth + 1, budget) for k, v in pairs}
    if tag in ("array", "tensor") and isinstance(body, dict) and body.get("dtype") in _DTYPES:
        shape = body.get("shape")
        if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
            raise NotPlain("an array without a valid shape")
        values = body.get("data")
        if not isinstance(values, list) or len(values) != math.prod(shape):
            raise NotPlain("an array whose data does not match its shape")
        try:
            array = np.array([_number(x, body["dtype"]) for x in values], dtype=body["dtype"]).reshape(shape)
        except OverflowError as err:
            raise NotPlain(f"an array element out of range: {err}") from None
        if tag == "tensor" and torch_tensors:
            import torch

            return torch.from_numpy(array)
        return array
    raise NotPlain(f"unexpected JSON tag {tag!r}")
