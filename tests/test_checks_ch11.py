"""Chapter 11's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import pytest
import torch
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS


def lookup_draft(ids, n, k):
    for start in range(len(ids) - n - 1, -1, -1):
        if ids[start:start + n] == ids[len(ids) - n:]:
            return list(ids[start + n:start + n + k])
    return []


def lookup_draft_first_match(ids, n, k):
    for start in range(len(ids) - n):  # the earliest occurrence instead of the latest
        if ids[start:start + n] == ids[len(ids) - n:]:
            return list(ids[start + n:start + n + k])
    return []


def lookup_draft_matches_itself(ids, n, k):
    start = len(ids) - n  # the suffix always matches itself: drafts nothing useful
    for s in range(len(ids) - n, -1, -1):
        if ids[s:s + n] == ids[start:]:
            return list(ids[s + n:s + n + k])
    return []


def lookup_draft_no_overlap(ids, n, k):
    for start in range(len(ids) - 2 * n, -1, -1):  # demands a match that ends before the suffix starts
        if ids[start:start + n] == ids[len(ids) - n:]:
            return list(ids[start + n:start + n + k])
    return []


def lookup_draft_pads(ids, n, k):
    draft = lookup_draft(ids, n, k)
    return draft + [draft[-1]] * (k - len(draft)) if draft else []  # always k tokens


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


def quantize_per_channel_trunc(x):
    scale = x.abs().amax(dim=0, keepdim=True) / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.trunc(x / scale).clamp(-127, 127) * scale  # towards zero, not to the nearest integer


def quantize_per_channel_255(x):
    scale = x.abs().amax(dim=0, keepdim=True) / 255  # unsigned range on signed values
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(x / scale).clamp(-127, 127) * scale


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("lookup_draft", lookup_draft, lookup_draft_first_match, "most recent"),
        ("lookup_draft", lookup_draft, lookup_draft_matches_itself, "case 1"),
        ("lookup_draft", lookup_draft, lookup_draft_pads, "shorter than k"),
        ("lookup_draft", lookup_draft, lookup_draft_no_overlap, "overlap the suffix"),
        ("quantize_per_channel", quantize_per_channel, quantize_per_token, "axis 0"),
        ("quantize_per_channel", quantize_per_channel, quantize_per_channel_zero_nan, "not NaN"),
        ("quantize_per_channel", quantize_per_channel, quantize_per_channel_255, "case 1"),
        ("quantize_per_channel", quantize_per_channel, quantize_per_channel_trunc, "nearest integer"),
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
    free = 40 * 2**30 - 2 * 8 * 10**9  # 40 GiB less the 16-bit weights of 8.0e9 parameters
    checks.check_context_budget(free // (32 * 2 * 32 * 8 * 128 * 2))  # 6,425 tokens for each of 32 sequences
    assert RESULTS["context_budget"] is True
    checks.check_context_budget(40 * 2**30 // (32 * 2 * 32 * 8 * 128 * 2))  # forgot the weights: 10,240
    assert RESULTS["context_budget"] is False and "share the 40 GiB" in capsys.readouterr().out
    checks.check_context_budget(free // (2 * 32 * 8 * 128 * 2))  # one sequence, not a batch of 32
    assert RESULTS["context_budget"] is False
    checks.check_context_budget(free // (32 * 32 * 8 * 128 * 2))  # no factor 2 for keys and values
    assert RESULTS["context_budget"] is False
    checks.check_context_budget((40e9 - 16e9) // (32 * 2 * 32 * 8 * 128 * 2))  # GB instead of GiB: 5,722
    assert RESULTS["context_budget"] is False
    checks.check_context_budget(free // (32 * 2 * 32 * 32 * 128 * 2))  # 32 query heads, not 8 K/V heads
    assert RESULTS["context_budget"] is False
    checks.check_context_budget(free // (32 * 2 * 32 * 8 * 128 * 2) + 1)  # rounded up: does not fit
    assert RESULTS["context_budget"] is False
    checks.check_context_budget(free / (32 * 2 * 32 * 8 * 128 * 2))  # not rounded to whole tokens
    assert RESULTS["context_budget"] is False
    checks.check_context_budget_int8(free // (32 * 2 * 32 * 8 * (128 + 4)))  # 12,461: 132 bytes per vector
    assert RESULTS["context_budget_int8"] is True
    checks.check_context_budget_int8(free // (32 * 2 * 32 * 8 * (128 + 4)) + 1)  # rounded up
    assert RESULTS["context_budget_int8"] is False
    checks.check_context_budget_int8(free // (32 * 2 * 32 * 8 * 128))  # the scales ignored: 12,850
    assert RESULTS["context_budget_int8"] is False and "float32 scale" in capsys.readouterr().out
    checks.check_context_budget_int8(free // (32 * 2 * 32 * 8 * (128 + 2)))  # 16-bit scales: 12,652
    assert RESULTS["context_budget_int8"] is False
    checks.check_context_budget_int8(free // (32 * 2 * 32 * 8 * 128 * 2))  # the 16-bit cache of part (a)
    assert RESULTS["context_budget_int8"] is False
    checks.check_context_budget_int8((40 * 2**30 - 10**9 * 8) // (32 * 2 * 32 * 8 * (128 + 4)))  # int8 weights too
    assert RESULTS["context_budget_int8"] is False
    checks.check_spec_tokens_per_pass((1 - 0.8**5) / 0.2)
    assert RESULTS["spec_tokens_per_pass"] is True
    checks.check_spec_tokens_per_pass(sum(0.8**i for i in range(1, 5)))  # accepted drafts only, no own token
    assert RESULTS["spec_tokens_per_pass"] is False and "one token of its own" in capsys.readouterr().out
    checks.check_spec_tokens_per_pass(1 / 0.2)  # the k = infinity limit
    assert RESULTS["spec_tokens_per_pass"] is False
    checks.check_spec_tokens_per_pass(1 + 4 * 0.8)  # independent drafts, not a prefix
    assert RESULTS["spec_tokens_per_pass"] is False


def test_stub_and_student_exception_are_reported_not_raised(capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError

    checks.check_lookup_draft(stub)
    assert RESULTS["lookup_draft"] is False and "not attempted" in capsys.readouterr().out
    checks.check_lookup_draft(lambda ids, n, k: [ids[100]])
    out = capsys.readouterr().out
    assert RESULTS["lookup_draft"] is False and "IndexError" in out
