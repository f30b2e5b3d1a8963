"""Argument checks shared by every module: each raises a TypeError or ValueError that names the argument,
says what was expected and shows what was given.

A listing in the book validates its arguments in one line, a call to a ``_check_*`` function written below
the algorithm, which is built from these. Left out on purpose: coercion. A check never converts a bad
value into a good one; a string is never read as a list of characters.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch

__all__ = ["number", "integer", "choice", "boolean", "string", "strings", "sequence", "tensor", "token_ids",
           "describe"]


def describe(value) -> str:
    """A short description of a value for an error message: its type, and its shape or value."""
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def number(name: str, value, *, low=None, high=None, low_open: bool = False, high_open: bool = False) -> None:
    """A finite real number (not a bool) in [low, high]; ``low_open``/``high_open`` exclude the ends."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {describe(value)}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")


def integer(name: str, value, *, low: int | None = 1, high: int | None = None) -> None:
    """An int (not a bool, not a float) in [low, high]; by default a size, >= 1."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {describe(value)}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"<= {high}" if low is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an int {bounds}, got {value!r}")


def choice(name: str, value, options) -> None:
    """One of ``options`` (compared with ==)."""
    if not isinstance(value, (str, int, float, type(None))) or value not in tuple(options):
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")


def boolean(name: str, value) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {describe(value)}")


def string(name: str, value, *, empty: bool = False) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {describe(value)}")
    if not empty and not value:
        raise ValueError(f"{name} must be a non-empty str, got ''")


def sequence(name: str, value, *, empty: bool = False, what: str = "items") -> None:
    """A list or tuple (never a str, whose items would be characters)."""
    if not isinstance(value, (list, tuple)):
        hint = f"; wrap a single one in a list: [{value!r}]" if isinstance(value, str) and len(value) < 40 else ""
        raise TypeError(f"{name} must be a list of {what}, got {describe(value)}{hint}")
    if not empty and not value:
        raise ValueError(f"{name} must be a non-empty list of {what}, got an empty {type(value).__name__}")


def strings(name: str, value, *, empty: bool = False) -> None:
    """A list or tuple of str (a plain str is rejected, not read as characters)."""
    sequence(name, value, empty=empty, what="strings")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}] must be a str, got {describe(item)}")


def tensor(name: str, value, *, ndim: int | tuple | None = None, kind: str | None = "float",
           finite: bool = True, shape: tuple | None = None) -> None:
    """A torch tensor; ``kind`` "float" or "int" (or None for any); ``ndim`` an int or a tuple of allowed ints;
    ``shape`` a tuple whose None entries match any size; ``finite`` rejects NaN and inf (float tensors)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor, got {describe(value)}")
    if kind == "float" and not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {describe(value)}")
    if kind == "int" and (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor, got {describe(value)}")
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if dims is not None and value.dim() not in dims:
        raise ValueError(f"{name} must have {' or '.join(map(str, dims))} dimensions, got shape {tuple(value.shape)}")
    if shape is not None and (value.dim() != len(shape) or any(
            s is not None and s != t for s, t in zip(shape, value.shape, strict=True))):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}, got {tuple(value.shape)}")
    if finite and value.is_floating_point() and value.numel() and not torch.isfinite(value).all():
        raise ValueError(f"{name} must be finite, but it holds NaN or inf")


def token_ids(name: str, value, vocab_size: int, *, ndim: int | tuple | None = None) -> None:
    """An integer tensor whose entries are token ids in [0, vocab_size)."""
    tensor(name, value, ndim=ndim, kind="int")
    if value.numel() and (value.min() < 0 or value.max() >= vocab_size):
        bad = value[(value < 0) | (value >= vocab_size)].flatten()[0].item()
        raise ValueError(f"{name} must hold token ids in [0, {vocab_size - 1}], found {bad}")
