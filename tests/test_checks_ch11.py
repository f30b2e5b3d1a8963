"""Chapter 11's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import pytest
import torch
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS


def decode_step(q, K_cache, V_cache, k_new, v_new):
    K, V = torch.cat([K_cache, k_new[None]]), torch.cat([V_cache, v_new[None]])
    return torch.softmax(K @ q / math.sqrt(q.shape[-1]), dim=0) @ V


def decode_step_without_new_token(q, K_cache, V_cache, k_new, v_new):
    K, V = K_cache, V_cache  # attends only to the past: forgets to append the newest key and value
    if len(K) == 0:
        return torch.zeros_like(v_new)
    return torch.softmax(K @ q / math.sqrt(q.shape[-1]), dim=0) @ V


def decode_step_unscaled(q, K_cache, V_cache, k_new, v_new):
    return decode_step(q * math.sqrt(q.shape[-1]), K_cache, V_cache, k_new, v_new)  # no 1/sqrt(d)


def decode_step_scaled_by_value_size(q, K_cache, V_cache, k_new, v_new):
    return decode_step(q * math.sqrt(q.shape[-1] / v_new.shape[-1]), K_cache, V_cache, k_new, v_new)


def kept_positions(n_tokens, window, n_sinks):
    return list(range(min(n_sinks, n_tokens))) + list(range(max(n_sinks, n_tokens - window), n_tokens))


def kept_positions_window_includes_sinks(n_tokens, window, n_sinks):
    # the sinks take slots out of the window: only window - n_sinks recent tokens
    return list(range(min(n_sinks, n_tokens))) + list(range(max(n_sinks, n_tokens - window + n_sinks), n_tokens))


def kept_positions_no_sinks(n_tokens, window, n_sinks):
    return list(range(max(0, n_tokens - window), n_tokens))


def kept_positions_sinks_always(n_tokens, window, n_sinks):
    return list(range(n_sinks)) + list(range(max(n_sinks, n_tokens - window), n_tokens))  # sinks before they exist


def quantize_per_channel(x):
    scale = x.abs().amax(dim=0, keepdim=True) / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(x / scale).clamp(-127, 127) * scale


def quantize_per_token(x):
    scale = x.abs().amax(dim=-1, keepdim=True) / 127  # the wrong axis: one scale per token
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(x / scale).clamp(-127, 127) * scale


def quantize_per_channel_zero_nan(x):
    scale = x.abs().amax(dim=0, keepdim=True) / 127  # an all-zero column gives 0 / 0
    return torch.round(x / scale).clamp(-127, 127) * scale


def quantize_per_channel_255(x):
    scale = x.abs().amax(dim=0, keepdim=True) / 255  # unsigned range on signed values
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(x / scale).clamp(-127, 127) * scale


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("decode_step", decode_step, decode_step_without_new_token, "append the new key"),
        ("decode_step", decode_step, decode_step_unscaled, "case 1"),
        ("decode_step", decode_step, decode_step_scaled_by_value_size, "sqrt(d)"),
        ("kept_positions", kept_positions, kept_positions_window_includes_sinks, "the last `window`"),
        ("kept_positions", kept_positions, kept_positions_no_sinks, "the sinks are the first"),
        ("kept_positions", kept_positions, kept_positions_sinks_always, "fewer tokens than sinks"),
        ("quantize_per_channel", quantize_per_channel, quantize_per_token, "axis 0"),
        ("quantize_per_channel", quantize_per_channel, quantize_per_channel_zero_nan, "not NaN"),
        ("quantize_per_channel", quantize_per_channel, quantize_per_channel_255, "case 1"),
    ],
)
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def test_by_hand_answers(capsys):
    keys = [(0.1, 0.4), (0.3, 1.0), (0.5, 1.6), (0.7, 2.2)]  # k_i = x_i W^K, x_4 = [0.7, 0.8]
    scores = [0.7 * k0 + 0.8 * k1 for k0, k1 in keys]
    right = [s / math.sqrt(2) for s in scores]
    checks.check_kv_example(math.exp(right[3]) / sum(math.exp(s) for s in right))
    assert RESULTS["kv_example"] is True
    checks.check_kv_example(math.exp(scores[3]) / sum(math.exp(s) for s in scores))  # forgot 1/sqrt(2)
    assert RESULTS["kv_example"] is False and "sqrt(2)" in capsys.readouterr().out
    cached_only = right[:3]  # forgot to append the new key: attends to k_1 .. k_3 only, alpha of k_3
    checks.check_kv_example(math.exp(cached_only[2]) / sum(math.exp(s) for s in cached_only))
    assert RESULTS["kv_example"] is False and "k_4" in capsys.readouterr().out
    wrong_order = [(0.7 * (k0 + 2 * k1) + 0.8 * k1) / math.sqrt(2) for k0, k1 in [(0.1, 0.2), (0.3, 0.4), (0.5, 0.6),
                                                                                   (0.7, 0.8)]]
    checks.check_kv_example(math.exp(wrong_order[3]) / sum(math.exp(s) for s in wrong_order))  # W^K x, not x W^K
    assert RESULTS["kv_example"] is False
    checks.check_context_budget(16384)
    assert RESULTS["context_budget"] is True
    checks.check_context_budget(40 * 2**30 / (8 * 80 * 8 * 128 * 2))  # keys only
    assert RESULTS["context_budget"] is False and "K and V" in capsys.readouterr().out
    checks.check_context_budget(40e9 / (8 * 2 * 80 * 8 * 128 * 2))  # GB instead of GiB
    assert RESULTS["context_budget"] is False


def test_stub_and_student_exception_are_reported_not_raised(capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError

    checks.check_kept_positions(stub)
    assert RESULTS["kept_positions"] is False and "not attempted" in capsys.readouterr().out
    checks.check_decode_step(lambda q, K, V, k, v: K[100])
    out = capsys.readouterr().out
    assert RESULTS["decode_step"] is False and "IndexError" in out
