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


def online_softmax_step(m, l, a, s, V):  # noqa: E741
    m_new = torch.maximum(m, s.max())
    if m_new == -math.inf:  # nothing but -inf seen so far: keep the empty state
        return m, l, a
    rescale, p = torch.exp(m - m_new), torch.exp(s - m_new)
    return m_new, l * rescale + p.sum(), a * rescale + p @ V


def online_softmax_step_no_rescale(m, l, a, s, V):  # noqa: E741
    m_new = torch.maximum(m, s.max())
    if m_new == -math.inf:
        return m, l, a
    p = torch.exp(s - m_new)
    return m_new, l + p.sum(), a + p @ V  # forgets to rescale what was summed under the old maximum


def online_softmax_step_no_guard(m, l, a, s, V):  # noqa: E741
    m_new = torch.maximum(m, s.max())  # exp(-inf - (-inf)) = NaN on a fully masked first block
    rescale, p = torch.exp(m - m_new), torch.exp(s - m_new)
    return m_new, l * rescale + p.sum(), a * rescale + p @ V


def online_softmax_step_rescale_sum_only(m, l, a, s, V):  # noqa: E741
    m_new = torch.maximum(m, s.max())
    if m_new == -math.inf:
        return m, l, a
    rescale, p = torch.exp(m - m_new), torch.exp(s - m_new)
    return m_new, l * rescale + p.sum(), a + p @ V  # the output is not rescaled


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
        ("online_softmax_step", online_softmax_step, online_softmax_step_no_rescale, "BOTH"),
        ("online_softmax_step", online_softmax_step, online_softmax_step_rescale_sum_only, "BOTH"),
        ("online_softmax_step", online_softmax_step, online_softmax_step_no_guard, "fully masked"),
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
