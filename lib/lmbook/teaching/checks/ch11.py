"""Self-checks for chapter 11 (inference and the KV cache)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_kv_example", "check_context_budget", "check_decode_step", "check_kept_positions",
           "check_quantize_per_channel"]

answer_check("kv_example",
             hint="the query is q_4 = x_4 = [0.7, 0.8] (x_5 is not known yet); the keys are k_1, k_2, k_3 from "
                  "the cache plus the new k_4 = x_4 W^K (row vector on the left), four in all; the scores are "
                  "q_4 . k_j / sqrt(2), and alpha_4 = e^s4 / sum_j e^sj.")


def check_kv_example(answer) -> None:
    """The weight alpha_4 of the step that generates x_5 in the chapter's example with every token divided by 10,
    after the step before produced x_4 = [0.7, 0.8]."""
    check_answer("kv_example", answer)


answer_check("context_budget",
             hint="one token takes 2 (K and V) * layers * K/V heads * head_dim * 2 bytes; 1 GiB = 2^30 bytes, "
                  "and the budget is shared by 8 sequences.")


def check_context_budget(answer) -> None:
    """Tokens per sequence of Llama 2 70B's 16-bit KV cache in 40 GiB with a batch of 8."""
    check_answer("context_budget", answer)


def _decode_step_cases():
    g = torch.Generator().manual_seed(7)

    def case(t, d, d_v, hint="", scale=1.0):
        K = torch.randn(t, d, generator=g, dtype=torch.float64)
        V = torch.randn(t, d_v, generator=g, dtype=torch.float64)
        q, k, v = (torch.randn(n, generator=g, dtype=torch.float64) * scale for n in (d, d, d_v))
        return Case((q, K, V, k, v), hint=hint)

    return [
        case(4, 8, 8, "append the new key and value before attending: the newest token sees itself too."),
        case(0, 4, 3, "with an empty cache the only key is the new one, so the output is v_new."),
        case(6, 16, 5, "divide the scores by sqrt(d), d = the size of q and k (not of v)."),
        case(9, 4, 4, "softmax over the t + 1 keys (dim 0 of the scores), then weight the values.", scale=4.0),
    ]


function_check("decode_step", _decode_step_cases, rtol=1e-9, atol=1e-12)


def check_decode_step(fn) -> None:
    """decode_step(q, K_cache, V_cache, k_new, v_new) -> the newest token's output (d_v,)."""
    run_check("decode_step", fn)


function_check("kept_positions", lambda: [
    Case((5, 8, 2), hint="while the cache is not full it holds every token seen so far."),
    Case((20, 6, 0), hint="a plain window (no sinks) holds the last `window` positions."),
    Case((20, 6, 2), hint="the sinks are the first n_sinks positions, and the window the last `window` ones."),
    Case((8, 6, 2), hint="exactly full: n_sinks + window tokens, all of them kept."),
    Case((9, 6, 2), hint="one token more than the slots: the oldest non-sink token, position n_sinks, is gone."),
    Case((3, 4, 4), hint="fewer tokens than sinks: only the tokens seen so far."),
    Case((1000, 252, 4)),
])


def check_kept_positions(fn) -> None:
    """kept_positions(n_tokens, window, n_sinks) -> sorted positions held by a rolling cache."""
    run_check("kept_positions", fn)


def _quantize_per_channel_cases():
    g = torch.Generator().manual_seed(8)
    outliers = torch.randn(12, 6, generator=g, dtype=torch.float64)
    outliers[:, 2] *= 50  # one channel much larger than the rest, like real keys
    with_zero = torch.randn(5, 4, generator=g, dtype=torch.float64)
    with_zero[:, 1] = 0
    return [
        Case((outliers,), hint="one scale per column (channel): the maximum over the tokens, axis 0, not over "
                               "the features of each token."),
        Case((torch.randn(7, 3, generator=g, dtype=torch.float64),),
             hint="scale = max |x| / 127, then round(x / scale) and multiply back by the scale."),
        Case((with_zero,), hint="an all-zero column must come back as zeros, not NaN: use scale 1 there."),
        Case((torch.tensor([[1.0, -3.0], [0.5, 2.0]], dtype=torch.float64),),
             hint="the integers live in [-127, 127] (symmetric), so the largest |x| of a column maps to 127 exactly."),
    ]


function_check("quantize_per_channel", _quantize_per_channel_cases, rtol=1e-9, atol=1e-12)


def check_quantize_per_channel(fn) -> None:
    """quantize_per_channel(x (T, d)) -> x dequantized with one absmax / 127 scale per column."""
    run_check("quantize_per_channel", fn)
