"""Self-checks for chapter 13 (the encoder-decoder Transformer)."""

from __future__ import annotations

import numpy as np
import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_cross_kv_savings", "check_packed_masks", "check_prefix_lm_mask", "check_length_penalty_best"]

answer_check("cross_kv_savings",
             hint="per layer and per step, projecting the memory to K and V costs 2 S d^2 multiply-adds; with a "
                  "cache they are computed once instead of at each of the T steps, so T - 1 of the T rounds are "
                  "saved, in each of the M layers.")


def check_cross_kv_savings(answer) -> None:
    """Multiply-adds saved by caching the cross-attention keys and values (M = 6, d = 512, S = 40, T = 30)."""
    check_answer("cross_kv_savings", answer)


function_check("packed_masks", lambda: [
    Case((torch.tensor([4]),), hint="one word alone: a plain causal mask (True = may attend, a boolean tensor) and "
                                    "positions 0, 1, ..., n - 1."),
    Case((torch.tensor([3, 2]),),
         hint="a token may attend only to earlier tokens of its own word (a block-diagonal causal mask), and its "
              "position restarts at 0 at the first token of each word."),
    Case((torch.tensor([2, 1, 3]),), hint="masks and positions of shapes (T, T) and (T,), T the sum of the lengths."),
    Case((torch.tensor([1, 1]),)),
], project=lambda out: [bool(np.asarray(out[0]).dtype == bool), np.asarray(out[0], dtype=float),
                        np.asarray(out[1], dtype=float)])


def check_packed_masks(fn) -> None:
    """packed_masks(lengths) -> (bool (T, T) mask, True = may attend; (T,) positions), T = lengths.sum()."""
    run_check("packed_masks", fn)


function_check("prefix_lm_mask", lambda: [
    Case((2, 5), hint="inside the prefix every token sees the whole prefix, including later prefix tokens; and the "
                      "mask is a boolean tensor (True = may attend), not 0/1 or -inf/0 floats."),
    Case((0, 4), hint="an empty prefix is a plain causal mask."),
    Case((4, 4), hint="a prefix that is the whole sequence is a bidirectional (all True) mask."),
    Case((3, 7)),
    Case((1, 3)),
], project=lambda out: [bool(np.asarray(out).dtype == bool), np.asarray(out, dtype=float)])


def check_prefix_lm_mask(fn) -> None:
    """prefix_lm_mask(prefix_len, total_len) -> bool (total_len, total_len), True = may attend."""
    run_check("prefix_lm_mask", fn)


function_check("length_penalty_best", lambda: [
    Case(([(3, -2.0), (6, -2.9)], 0.0), hint="alpha = 0: no penalty, the highest log-probability wins."),
    Case(([(3, -2.0), (6, -2.4)], 1.0), hint="divide each log-probability by ((5 + length) / 6) ** alpha: a "
                                             "longer hypothesis is penalised less per token."),
    Case(([(2, -1.0), (9, -1.9), (5, -1.5)], 0.6)),
    Case(([(4, -3.0), (4, -2.5), (8, -4.0)], 1.0), hint="return the index of the best hypothesis, counted from 0."),
    Case(([(2, -3.0), (5, -1.5), (5, -1.5)], 1.0), hint="on a tie, return the first of the best (the lower index)."),
])


def check_length_penalty_best(fn) -> None:
    """length_penalty_best(hypotheses [(length, log-probability)], alpha) -> index of the best by GNMT's rule."""
    run_check("length_penalty_best", fn)
