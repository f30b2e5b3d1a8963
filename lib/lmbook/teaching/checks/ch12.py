"""Self-checks for chapter 12 (positional encodings and context extension)."""

from __future__ import annotations

import torch

from ._core import Case, _report, answer_check, check_answer, function_check, run_check

__all__ = ["check_full_turns", "check_rope_complex", "check_half_to_interleaved_rows", "check_rope_decay"]

answer_check("full_turns", hint="plane i has wavelength 2 pi b^(2i/d_k); count the planes with wavelength <= 32768, "
                                "i.e. i <= d_k ln(32768 / 2 pi) / (2 ln b), counting from i = 0.")


def check_full_turns(answer) -> None:
    """How many RoPE planes (head size 128, base 1e6) turn at least once in 32,768 tokens."""
    if isinstance(answer, str | bytes | bool):  # a count is a number, not text or a truth value
        _report("full_turns", False, f"✗ check_full_turns: expected a number of planes, got {answer!r}.")
        return
    check_answer("full_turns", answer)


def _rope_complex_cases():
    g = torch.Generator().manual_seed(8)
    return [
        Case((torch.tensor([[1.0, 0.0]]), torch.tensor([1])),
             hint="one pair (1, 0) at position 1 with theta_0 = 1 turns by 1 radian counter-clockwise: "
                  "(cos 1, sin 1). Multiply by e^{+i p theta}, not e^{-i p theta}."),
        Case((torch.randn(5, 8, generator=g), torch.arange(5)),
             hint="pair i is (x_{2i}, x_{2i+1}) = x_{2i} + i x_{2i+1} and turns with theta_i = base^(-2i/d)."),
        Case((torch.randn(2, 3, 4, 16, generator=g), torch.tensor([0, 7, 100, 1000])),
             hint="x may have leading batch and head axes; the positions index the second-to-last axis."),
        Case((torch.randn(3, 6, generator=g), torch.tensor([2, 3, 4])), {"base": 500.0},
             hint="use the base argument: theta_i = base^(-2i/d)."),
    ]


function_check("rope_complex", _rope_complex_cases, rtol=1e-4, atol=1e-4)


def check_rope_complex(fn) -> None:
    """rope_complex(x, positions, base): interleaved RoPE of x (..., T, d) at integer positions (T,)."""
    run_check("rope_complex", fn)


def _half_to_interleaved_cases():
    g = torch.Generator().manual_seed(9)
    labelled = torch.arange(8.0)[:, None]  # one head of size 8, row r holds the number r
    return [
        Case((labelled, 1, 8), hint="with rotary_dim = d_k the whole head rotates: row i and row i + d_k/2 form "
                                    "pair i and must become rows 2i and 2i + 1, so the result reads "
                                    "0, 4, 1, 5, 2, 6, 3, 7."),
        Case((labelled, 1, 4), hint="only the first rotary_dim rows of a head rotate, in pairs (i, i + rotary_dim/2): "
                                    "with rotary_dim = 4 the result reads 0, 2, 1, 3, 4, 5, 6, 7; the rest "
                                    "stays."),
        Case((torch.arange(16.0)[:, None].expand(16, 3).contiguous(), 2, 4),
             hint="rows move only inside their own head: each head of size 8 becomes (0, 2, 1, 3, 4, 5, 6, 7) + "
                  "offset."),
        Case((torch.randn(24, 5, generator=g), 2, 6)),
    ]


function_check("half_to_interleaved_rows", _half_to_interleaved_cases)


def check_half_to_interleaved_rows(fn) -> None:
    """half_to_interleaved_rows(w, n_heads, rotary_dim): W_Q or W_K rows, partial rotary, half -> interleaved."""
    run_check("half_to_interleaved_rows", fn)


function_check("rope_decay", lambda: [
    Case((8, 10000.0, [0]), hint="at distance 0 nothing rotates: q . k = d, and you divide by d, so the result "
                                 "is 1."),
    Case((2, 10000.0, [0, 1, 2]), hint="with one plane (d = 2) the score / d is cos(distance * theta_0) = cos(n)."),
    Case((64, 10000.0, [0, 1, 10, 100, 1000]),
         hint="q . R(n theta) k with q = k = 1 is sum over planes of 2 cos(n theta_i); divide by d."),
    Case((16, 500.0, [3, 30, 300]), hint="use the base argument: theta_i = base^(-2i/d)."),
], rtol=1e-5, atol=1e-6)


def check_rope_decay(fn) -> None:
    """rope_decay(head_dim, base, distances): the RoPE score of q = k = all ones at each distance, divided by d."""
    if callable(fn):
        try:
            out = fn(8, 10000.0, [0, 1])
        except Exception:  # noqa: BLE001 - run_check reports the error (or an unattempted stub) itself
            out = None
        if out is not None and not (isinstance(out, torch.Tensor) and out.dtype == torch.float64):
            got = out.dtype if isinstance(out, torch.Tensor) else type(out).__name__
            _report("rope_decay", False, f"✗ check_rope_decay: expected a float64 tensor, got {got}: compute the "
                                         "angles and cosines in float64 (distances reach thousands of radians).")
            return
    run_check("rope_decay", fn)
