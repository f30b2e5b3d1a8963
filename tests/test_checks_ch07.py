"""Chapter 7's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import pytest
import torch
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS


def masked_softmax(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def masked_softmax_torch_nn_convention(scores, mask):
    return masked_softmax(scores, ~mask)  # True = blocked, as nn.MultiheadAttention's masks


def masked_softmax_big_negative(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)  # a fully masked row becomes uniform


def masked_softmax_no_max(scores, mask):
    e = torch.exp(scores) * mask
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)  # overflows for large scores


def expand_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def expand_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)  # heads 0, 1, 2, 0, 1, 2: the wrong grouping


def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, bytes_per_value=2, batch=1):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * bytes_per_value * batch


def kv_cache_bytes_keys_only(n_layers, n_kv_heads, d_head, seq_len, bytes_per_value=2, batch=1):
    return n_layers * n_kv_heads * d_head * seq_len * bytes_per_value * batch


def online_attention(q, K, V, block_size):
    m, total, acc = -math.inf, 0.0, torch.zeros(V.shape[-1], dtype=V.dtype)
    for start in range(0, K.shape[0], block_size):
        s = K[start:start + block_size] @ q / math.sqrt(q.shape[-1])
        m_new = max(m, s.max().item())
        p = torch.exp(s - m_new)
        c = math.exp(m - m_new)
        total = total * c + p.sum()
        acc = acc * c + p @ V[start:start + block_size]
        m = m_new
    return acc / total


def online_attention_no_rescale(q, K, V, block_size):
    m, total, acc = -math.inf, 0.0, torch.zeros(V.shape[-1], dtype=V.dtype)
    for start in range(0, K.shape[0], block_size):
        s = K[start:start + block_size] @ q / math.sqrt(q.shape[-1])
        m = max(m, s.max().item())
        p = torch.exp(s - m)
        total = total + p.sum()  # forgets to rescale what was summed under the old maximum
        acc = acc + p @ V[start:start + block_size]
    return acc / total


def online_attention_unscaled(q, K, V, block_size):
    return online_attention(q * math.sqrt(q.shape[-1]), K, V, block_size)  # no 1/sqrt(d)


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("masked_softmax", masked_softmax, masked_softmax_torch_nn_convention, "True means *attend*"),
        ("masked_softmax", masked_softmax, masked_softmax_big_negative, "not uniform"),
        ("masked_softmax", masked_softmax, masked_softmax_no_max, "maximum"),
        ("expand_kv", expand_kv, expand_kv_tiled, "repeat_interleave"),
        ("kv_cache_bytes", kv_cache_bytes, kv_cache_bytes_keys_only, "factor 2"),
        ("online_attention", online_attention, online_attention_no_rescale, "rescale"),
        ("online_attention", online_attention, online_attention_unscaled, "case 1"),
    ],
)
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def test_by_hand_answer_and_not_attempted(capsys):
    checks.check_attention_by_hand(math.e / (2 + math.e))
    assert RESULTS["attention_by_hand"] is True
    checks.check_attention_by_hand(2 / 4)  # normalising the raw scores [1, 1, 2] instead of their exponentials
    assert RESULTS["attention_by_hand"] is False and "e^2" in capsys.readouterr().out

    def stub(*args, **kwargs):
        raise NotImplementedError

    checks.check_expand_kv(stub)
    assert RESULTS["expand_kv"] is False and "not attempted" in capsys.readouterr().out


def test_student_exception_is_reported_not_raised(capsys):
    checks.check_masked_softmax(lambda scores, mask: scores[mask.shape[0] + 10, 0])
    out = capsys.readouterr().out
    assert RESULTS["masked_softmax"] is False and "IndexError" in out
