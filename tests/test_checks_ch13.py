"""Chapter 13's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import pytest
import torch
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS


def decoder_masks(src_lengths, tgt_lengths):
    T, S = int(tgt_lengths.max()), int(src_lengths.max())
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    real_tgt = torch.arange(T)[None, :] < tgt_lengths[:, None]
    real_src = torch.arange(S)[None, :] < src_lengths[:, None]
    return causal[None, None] & real_tgt[:, None, None, :], real_src[:, None, None, :].expand(-1, 1, T, -1)


def decoder_masks_no_target_padding(src_lengths, tgt_lengths):
    self_mask, cross = decoder_masks(src_lengths, tgt_lengths)
    T = self_mask.shape[-1]
    return torch.ones(T, T, dtype=torch.bool).tril().expand_as(self_mask), cross  # causal only


def decoder_masks_causal_cross(src_lengths, tgt_lengths):
    self_mask, cross = decoder_masks(src_lengths, tgt_lengths)
    T, S = cross.shape[-2:]
    return self_mask, cross & torch.ones(T, S, dtype=torch.bool).tril()  # a causal mask on the source: wrong


def prefix_lm_mask(prefix_len, total_len):
    i, j = torch.arange(total_len)[:, None], torch.arange(total_len)[None, :]
    return (j <= i) | (j < prefix_len)


def prefix_lm_mask_causal(prefix_len, total_len):
    return torch.ones(total_len, total_len, dtype=torch.bool).tril()  # forgot the prefix


def length_penalty_best(hypotheses, alpha):
    scores = [logp / ((5 + n) / 6) ** alpha for n, logp in hypotheses]
    return max(range(len(scores)), key=lambda k: scores[k])


def length_penalty_multiplies(hypotheses, alpha):
    scores = [logp * ((5 + n) / 6) ** alpha for n, logp in hypotheses]  # multiplies: favours short ones more
    return max(range(len(scores)), key=lambda k: scores[k])


@pytest.mark.parametrize("check, good, bad, message", [
    ("decoder_masks", decoder_masks, decoder_masks_no_target_padding, "padded target keys"),
    ("decoder_masks", decoder_masks, decoder_masks_causal_cross, "differs"),
    ("prefix_lm_mask", prefix_lm_mask, prefix_lm_mask_causal, "prefix"),
    ("length_penalty_best", length_penalty_best, length_penalty_multiplies, "divide"),
])
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def test_by_hand_answer(capsys):
    checks.check_cross_kv_savings((30 - 1) * 2 * 6 * 40 * 512**2)
    assert RESULTS["cross_kv_savings"] is True
    checks.check_cross_kv_savings(30 * 2 * 6 * 40 * 512**2)  # all T rounds, not the T - 1 saved
    assert RESULTS["cross_kv_savings"] is False and "T - 1" in capsys.readouterr().out
    checks.check_cross_kv_savings((30 - 1) * 6 * 40 * 512**2)  # only the keys, not the values
    assert RESULTS["cross_kv_savings"] is False


def decoder_masks_unexpanded_cross(src_lengths, tgt_lengths):
    self_mask, cross = decoder_masks(src_lengths, tgt_lengths)
    return self_mask, cross[:, :, :1]  # (B, 1, 1, S): broadcasts in attention, so it is right too


def prefix_lm_mask_float(prefix_len, total_len):
    return prefix_lm_mask(prefix_len, total_len).float()  # the spec asks for a boolean mask


def length_penalty_last_on_ties(hypotheses, alpha):
    scores = [logp / ((5 + n) / 6) ** alpha for n, logp in hypotheses]
    return max(reversed(range(len(scores))), key=lambda k: scores[k])  # the last of equal scores


def test_decoder_masks_accepts_a_broadcastable_cross_mask(capsys):
    checks.check_decoder_masks(decoder_masks_unexpanded_cross)
    assert RESULTS["decoder_masks"] is True, capsys.readouterr().out


@pytest.mark.parametrize("check, good, bad, message", [
    ("prefix_lm_mask", prefix_lm_mask, prefix_lm_mask_float, "boolean"),
    ("length_penalty_best", length_penalty_best, length_penalty_last_on_ties, "tie"),
])
def test_check_rejects_the_wrong_type_and_tie_rule(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)
