"""Chapter 7's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import pytest
import torch
from check_helpers import accepts_then_rejects
from lmbook import attention as A
from lmbook import checks
from lmbook.checks import RESULTS


def masked_log_softmax(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    total = torch.exp(scores - m).sum(dim=-1, keepdim=True)
    return scores - m - torch.where(total > 0, total, torch.ones_like(total)).log()  # a dead row stays -inf


def masked_log_softmax_torch_nn_convention(scores, mask):
    return masked_log_softmax(scores, ~mask)  # True = blocked, as nn.MultiheadAttention's masks


def masked_log_softmax_via_softmax(scores, mask):
    return A.softmax(scores.masked_fill(~mask, float("-inf"))).log()  # exp underflows: -inf for a finite -805


def masked_log_softmax_torch(scores, mask):
    return torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # a dead row becomes NaN


def masked_log_softmax_no_max(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    return scores - torch.exp(scores).sum(dim=-1, keepdim=True).log()  # exp(1000) overflows


def left_padding_positions(lengths, k_len):
    real = torch.arange(k_len) >= (k_len - lengths)[:, None]
    return (real.cumsum(-1) - 1).clamp(min=0)


def column_positions(lengths, k_len):
    return torch.arange(k_len).expand(len(lengths), -1)  # 0..k_len-1 in every row: ignores the padding


def right_padding_positions(lengths, k_len):
    return torch.where(torch.arange(k_len) < lengths[:, None], torch.arange(k_len), 0)  # the first n_b columns


def left_padding_positions_minus_one(lengths, k_len):
    return (torch.arange(k_len) >= (k_len - lengths)[:, None]).cumsum(-1) - 1  # padding gets -1, not 0


def same_word_score(weights, ids):
    earlier = (ids[:, None] == ids[None, :]) & torch.ones(len(ids), len(ids), dtype=torch.bool).tril(-1)
    rows = earlier.any(-1)  # queries whose word occurred before
    return (weights * earlier).sum(-1)[:, rows].mean(-1)


def same_word_score_with_self(weights, ids):
    same = (ids[:, None] == ids[None, :]) & torch.ones(len(ids), len(ids), dtype=torch.bool).tril()
    rows = same.tril(-1).any(-1)
    return (weights * same).sum(-1)[:, rows].mean(-1)  # counts the query's own position j = i


def same_word_score_all_queries(weights, ids):
    earlier = (ids[:, None] == ids[None, :]) & torch.ones(len(ids), len(ids), dtype=torch.bool).tril(-1)
    return (weights * earlier).sum(-1).mean(-1)  # averages over every query, with or without an earlier match


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("masked_log_softmax", masked_log_softmax, masked_log_softmax_torch_nn_convention, "True means *attend*"),
        ("masked_log_softmax", masked_log_softmax, masked_log_softmax_via_softmax, "underflows"),
        ("masked_log_softmax", masked_log_softmax, masked_log_softmax_no_max, "maximum"),
        ("masked_log_softmax", masked_log_softmax, masked_log_softmax_torch, "not NaN"),
        ("left_padding_positions", left_padding_positions, column_positions, "first REAL token"),
        ("left_padding_positions", left_padding_positions, right_padding_positions, "case 1"),
        ("left_padding_positions", left_padding_positions, left_padding_positions_minus_one, "position 0"),
        ("same_word_score", same_word_score, same_word_score_with_self, "EARLIER"),
        ("same_word_score", same_word_score, same_word_score_all_queries, "case 1"),
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

    checks.check_left_padding_positions(stub)
    assert RESULTS["left_padding_positions"] is False and "not attempted" in capsys.readouterr().out


def test_student_exception_is_reported_not_raised(capsys):
    checks.check_masked_log_softmax(lambda scores, mask: scores[mask.shape[0] + 10, 0])
    out = capsys.readouterr().out
    assert RESULTS["masked_log_softmax"] is False and "IndexError" in out
