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


def left_padding_mask(lengths, k_len):
    return (torch.arange(k_len) >= (k_len - lengths)[:, None])[:, None, None, :]


def right_padding_mask(lengths, k_len):
    return (torch.arange(k_len) < lengths[:, None])[:, None, None, :]  # section 5's mask, not left padding


def left_padding_mask_2d(lengths, k_len):
    return left_padding_mask(lengths, k_len)[:, 0, 0]  # (B, k_len): does not broadcast over heads and queries


def previous_token_score(weights):
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(-1)


def previous_token_score_with_query_0(weights):
    T = weights.shape[-1]
    return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).sum(-1) / T  # divides by T, not T - 1


def previous_token_score_diagonal(weights):
    return torch.diagonal(weights, dim1=-2, dim2=-1).mean(-1)  # the weight on the query's own token


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("masked_softmax", masked_softmax, masked_softmax_torch_nn_convention, "True means *attend*"),
        ("masked_softmax", masked_softmax, masked_softmax_big_negative, "not uniform"),
        ("masked_softmax", masked_softmax, masked_softmax_no_max, "maximum"),
        ("left_padding_mask", left_padding_mask, right_padding_mask, "LAST n_b columns"),
        ("left_padding_mask", left_padding_mask, left_padding_mask_2d, "case 1"),
        ("previous_token_score", previous_token_score, previous_token_score_with_query_0, "case 1"),
        ("previous_token_score", previous_token_score, previous_token_score_diagonal, "weight 1 on key i - 1"),
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

    checks.check_left_padding_mask(stub)
    assert RESULTS["left_padding_mask"] is False and "not attempted" in capsys.readouterr().out


def test_student_exception_is_reported_not_raised(capsys):
    checks.check_masked_softmax(lambda scores, mask: scores[mask.shape[0] + 10, 0])
    out = capsys.readouterr().out
    assert RESULTS["masked_softmax"] is False and "IndexError" in out
