"""Self-checks for chapter 13 (the encoder-decoder Transformer)."""

from __future__ import annotations

import numpy as np
import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_cross_kv_savings", "check_decoder_masks", "check_prefix_lm_mask", "check_length_penalty_best"]

answer_check("cross_kv_savings",
             hint="per layer and per step, projecting the memory to K and V costs 2 S d^2 multiply-adds; with a "
                  "cache they are computed once instead of at each of the T steps, so T - 1 of the T rounds are "
                  "saved, in each of the M layers.")


def check_cross_kv_savings(answer) -> None:
    """Multiply-adds saved by caching the cross-attention keys and values (M = 6, d = 512, S = 40, T = 30)."""
    check_answer("cross_kv_savings", answer)


def _mask_cases():
    return [
        Case((torch.tensor([3, 1]), torch.tensor([2, 4])),
             hint="the first (self-attention) mask is causal AND hides padded target keys: j <= i and "
                  "j < tgt_lengths[b]; the second hides padded source keys only."),
        Case((torch.tensor([2]), torch.tensor([3])), hint="the cross mask does not depend on the query i: "
                                                          "every target position may read every real source token."),
        Case((torch.tensor([5, 2, 4]), torch.tensor([1, 3, 3])),
             hint="shapes: (B, 1, T, T) and (B, 1, T, S), with T and S the longest lengths in the batch."),
    ]


def _masks_project(out):
    """Compare both masks as 0/1 arrays, the cross mask broadcast to (B, 1, T, S): a (B, 1, 1, S) one is right."""
    self_mask, cross = (np.asarray(m, dtype=float) for m in out)
    if self_mask.ndim != 4 or cross.ndim != 4:
        return [list(self_mask.shape), list(cross.shape)]
    target = (*self_mask.shape[:3], cross.shape[-1])
    try:
        return [self_mask, np.broadcast_to(cross, target)]
    except ValueError:
        return [self_mask, cross]


function_check("decoder_masks", _mask_cases, project=_masks_project)


def check_decoder_masks(fn) -> None:
    """decoder_masks(src_lengths, tgt_lengths) -> (self_mask (B, 1, T, T), cross_mask (B, 1, T, S)), bool."""
    run_check("decoder_masks", fn)


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
