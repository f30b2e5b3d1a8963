"""Self-checks for chapter 11 (inference and the KV cache)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_kv_example", "check_context_budget", "check_context_budget_int8", "check_quantize_per_channel",
           "check_spec_tokens_per_pass", "check_lookup_draft"]

answer_check("kv_example",
             hint="the query is q_4 = x_4 = [0.7, 0.8] (x_5 is not known yet); the keys are k_1, k_2, k_3 from "
                  "the cache plus the new k_4 = x_4 W^K (row vector on the left), four in all; the scores are "
                  "q_4 . k_j / sqrt(2), and alpha_4 = e^s4 / sum_j e^sj.")


def check_kv_example(answer) -> None:
    """The weight alpha_4 of the step that generates x_5 in the chapter's example with every token divided by 10,
    after the step before produced x_4 = [0.7, 0.8]."""
    check_answer("kv_example", answer)


answer_check("context_budget",
             hint="the weights take 2 bytes for each of the 8.0 x 10^9 parameters and share the 40 GiB "
                  "(1 GiB = 2^30 bytes) with the caches; one token costs a key and a value (the factor 2) for each "
                  "of 8 key/value heads of 128 values in each of 32 layers, 2 bytes each, and the batch holds 32 "
                  "sequences; a length that does not fit whole cannot be served, so round down.", whole=True)


def check_context_budget(answer) -> None:
    """The longest length, in whole tokens, of 32 sequences whose 16-bit caches fit in 40 GiB beside 16-bit weights
    of 8.0e9 parameters (32 layers, 8 K/V heads of 128)."""
    check_answer("context_budget", answer)


answer_check("context_budget_int8",
             hint="section 10's int8 cache stores each key vector and each value vector (one token, one head) as "
                  "128 one-byte integers plus one float32 scale of 4 bytes; the weights stay 16-bit and share the "
                  "40 GiB; the batch holds 32 sequences; 1 GiB = 2^30 bytes; round down.", whole=True)


def check_context_budget_int8(answer) -> None:
    """The same with section 10's int8 cache, counting its float32 scale per vector, a whole number of tokens."""
    check_answer("context_budget_int8", answer)


answer_check("spec_tokens_per_pass",
             hint="a target pass always yields one token of its own (the correction, or the bonus token after k "
                  "accepted drafts), plus the accepted drafts: the i-th draft counts only if drafts 1 .. i were all "
                  "accepted, with probability alpha^i; sum alpha^i for i = 0 .. k.")


def check_spec_tokens_per_pass(answer) -> None:
    """Expected tokens per target pass of speculative decoding with k = 4 drafts, each accepted with 0.8."""
    check_answer("spec_tokens_per_pass", answer)


def _quantize_per_channel_cases():
    g = torch.Generator().manual_seed(8)
    outliers = torch.randn(12, 6, generator=g, dtype=torch.float64)
    outliers[:, 2] *= 50  # one channel much larger than the rest, like real keys
    with_zero = torch.randn(5, 4, generator=g, dtype=torch.float64)
    with_zero[:, 1] = 0
    plain = torch.randn(7, 3, generator=g, dtype=torch.float64)
    return [
        Case((plain,), hint="each column (axis 0, the tokens) gets scale = its max |x| / 127; round x / scale to "
                            "the nearest integer (not towards zero), clamp to [-127, 127], multiply back."),
        Case((outliers,), hint="one scale per column (channel): the maximum over the tokens, axis 0, not over "
                               "the features of each token."),
        Case((with_zero,), hint="an all-zero column must come back as zeros, not NaN: use scale 1 there."),
        Case((torch.tensor([[1.0, -3.0], [0.5, 2.0]], dtype=torch.float64),),
             hint="the integers live in [-127, 127] (symmetric), so the largest |x| of a column maps to 127 exactly."),
    ]


function_check("quantize_per_channel", _quantize_per_channel_cases, rtol=1e-9, atol=1e-12)


def check_quantize_per_channel(fn) -> None:
    """quantize_per_channel(x (T, d)) -> x dequantized with one absmax / 127 scale per column."""
    run_check("quantize_per_channel", fn)


function_check("lookup_draft", lambda: [
    Case(([5, 6, 7, 8, 5, 6], 2, 3), hint="the last n tokens (5, 6) occur earlier at position 0: draft what "
                                           "followed them there, up to k tokens."),
    Case(([1, 2, 3, 4], 2, 3), hint="no earlier occurrence of the last n tokens: return an empty list."),
    Case(([1, 2, 9, 1, 2, 8, 1, 2], 2, 2), hint="several earlier occurrences: take the most recent one (the one "
                                                 "that starts latest), not the first."),
    Case(([4, 4, 4, 4], 1, 5), hint="the match must start before the suffix itself; the draft stops at the end "
                                     "of the sequence, so it may be shorter than k."),
    Case(([3, 1, 2, 3], 1, 2), hint="with n = 1 the suffix is the last token alone."),
    Case(([7], 2, 4), hint="a sequence of at most n tokens has no earlier n-gram: return []."),
    Case(([5, 5, 5], 2, 3), hint="an occurrence may overlap the suffix: here (5, 5) at position 0 overlaps the last "
                                  "two tokens, and the 5 after it is the draft."),
])


def check_lookup_draft(fn) -> None:
    """lookup_draft(ids, n, k) -> the up to k tokens that followed the latest earlier occurrence of the last n."""
    run_check("lookup_draft", fn)
