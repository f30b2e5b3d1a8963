"""Chapter 8's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import pytest
import torch
import torch.nn.functional as F
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS


def expand_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def expand_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)  # heads 0, 1, 2, 0, 1, 2: the wrong grouping


def merge_softmax_states(m1, l1, a1, m2, l2, a2):
    m = torch.maximum(m1, m2)
    if m == -math.inf:  # two empty states
        return m1, l1, a1
    w1, w2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, l1 * w1 + l2 * w2, a1 * w1 + a2 * w2


def merge_no_rescale(m1, l1, a1, m2, l2, a2):
    return torch.maximum(m1, m2), l1 + l2, a1 + a2  # adds sums taken relative to different maxima


def merge_rescale_sum_only(m1, l1, a1, m2, l2, a2):
    m = torch.maximum(m1, m2)
    if m == -math.inf:
        return m1, l1, a1
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m), a1 + a2  # the outputs are not rescaled


def merge_no_guard(m1, l1, a1, m2, l2, a2):
    m = torch.maximum(m1, m2)  # exp(-inf - (-inf)) = NaN when both states are empty
    w1, w2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, l1 * w1 + l2 * w2, a1 * w1 + a2 * w2


def merge_unshifted(m1, l1, a1, m2, l2, a2):
    m = torch.maximum(m1, m2)
    if m == -math.inf:
        return m1, l1, a1
    total = l1 * torch.exp(m1) + l2 * torch.exp(m2)  # exp(900) overflows to inf
    return m, total / torch.exp(m), (a1 * torch.exp(m1) + a2 * torch.exp(m2)) / torch.exp(m)


def dilated_window_mask(T, window, dilation):
    gap = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    return (gap >= 0) & (gap % dilation == 0) & (gap <= (window - 1) * dilation)


def dilated_window_mask_symmetric(T, window, dilation):
    gap = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()  # not causal: reads later keys too
    return (gap % dilation == 0) & (gap <= (window - 1) * dilation)


def dilated_window_mask_one_too_many(T, window, dilation):
    gap = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    return (gap >= 0) & (gap % dilation == 0) & (gap <= window * dilation)  # window + 1 keys


def dilated_window_mask_span_in_positions(T, window, dilation):
    gap = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    return (gap >= 0) & (gap % dilation == 0) & (gap < window)  # the window counted in positions, not keys


def mean_pool_kv(W, n_heads, n_groups):
    d_k = W.shape[0] // n_heads
    return W.view(n_groups, n_heads // n_groups, d_k, W.shape[1]).mean(1).reshape(n_groups * d_k, W.shape[1])


def mean_pool_kv_strided(W, n_heads, n_groups):
    d_k = W.shape[0] // n_heads  # pools heads g, g + n_groups, ...: not adjacent heads
    return W.view(n_heads // n_groups, n_groups, d_k, W.shape[1]).mean(0).reshape(n_groups * d_k, W.shape[1])


def mean_pool_kv_sum(W, n_heads, n_groups):
    return mean_pool_kv(W, n_heads, n_groups) * (n_heads // n_groups)  # the sum, not the mean


def linear_attention_step(S, z, q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S, z = S + torch.outer(phi_k, v), z + phi_k
    return (phi_q @ S) / (phi_q @ z), S, z


def linear_attention_step_read_first(S, z, q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    out = (phi_q @ S) / (phi_q @ z)  # reads the state before adding the current token: 0/0 on the first
    return out, S + torch.outer(phi_k, v), z + phi_k


def linear_attention_step_no_phi(S, z, q, k, v):
    S, z = S + torch.outer(k, v), z + k  # no feature map: the weights can be negative
    return (q @ S) / (q @ z), S, z


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("expand_kv", expand_kv, expand_kv_tiled, "repeat_interleave"),
        ("merge_softmax_states", merge_softmax_states, merge_no_rescale, "BOTH"),
        ("merge_softmax_states", merge_softmax_states, merge_rescale_sum_only, "BOTH"),
        ("merge_softmax_states", merge_softmax_states, merge_no_guard, "both empty"),
        ("merge_softmax_states", merge_softmax_states, merge_unshifted, "overflows"),
        ("dilated_window_mask", dilated_window_mask, dilated_window_mask_symmetric, "causal"),
        ("dilated_window_mask", dilated_window_mask, dilated_window_mask_one_too_many, "case 1"),
        ("dilated_window_mask", dilated_window_mask, dilated_window_mask_span_in_positions, "spaced by"),
        ("mean_pool_kv", mean_pool_kv, mean_pool_kv_strided, "adjacent"),
        ("mean_pool_kv", mean_pool_kv, mean_pool_kv_sum, "MEAN"),
        ("linear_attention_step", linear_attention_step, linear_attention_step_read_first, "BEFORE"),
        ("linear_attention_step", linear_attention_step, linear_attention_step_no_phi, "case 1"),
    ],
)
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def test_not_attempted_is_reported(capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError

    checks.check_mean_pool_kv(stub)
    assert RESULTS["mean_pool_kv"] is False and "not attempted" in capsys.readouterr().out


def test_the_answer_keys_agree_with_the_library_and_the_softmax():
    from answer_keys import ch08 as keys
    from lmbook.efficient_attention import sliding_window_mask

    assert torch.equal(keys.dilated_window_mask(9, 3, 1), sliding_window_mask(9, 9, 3))
    g = torch.Generator().manual_seed(0)
    s, V = torch.randn(7, generator=g, dtype=torch.float64) * 5, torch.randn(7, 3, generator=g, dtype=torch.float64)
    s[:2] = -math.inf  # the first worker sees two masked keys only

    def state(scores, values):
        m = scores.max()
        if m == -math.inf:
            return m, torch.tensor(0.0, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
        p = torch.exp(scores - m)
        return m, p.sum(), p @ values

    m, l, a = keys.merge_softmax_states(*state(s[:2], V[:2]), *state(s[2:5], V[2:5]))  # noqa: E741
    m, l, a = keys.merge_softmax_states(m, l, a, *state(s[5:], V[5:]))  # noqa: E741
    assert m == s.max() and torch.allclose(a / l, torch.softmax(s, 0) @ V)
    assert torch.equal(keys.merge_softmax_states(*state(s[:2], V[:2]), *state(s[:2], V[:2]))[1], torch.tensor(0.0,
                       dtype=torch.float64))
