"""Chapter 13's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import pytest
import torch
from check_helpers import accepts_then_rejects
from lmbook import checks
from lmbook.checks import RESULTS


def packed_masks(lengths):  # written differently from the answer key: a loop over the words
    T = int(lengths.sum())
    mask, positions, start = torch.zeros(T, T, dtype=torch.bool), torch.zeros(T, dtype=torch.long), 0
    for n in lengths.tolist():
        mask[start:start + n, start:start + n] = torch.ones(n, n, dtype=torch.bool).tril()
        positions[start:start + n] = torch.arange(n)
        start += n
    return mask, positions


def packed_masks_plain_causal(lengths):
    mask, positions = packed_masks(lengths)
    return torch.ones_like(mask).tril(), positions  # the second word reads the first


def packed_masks_running_positions(lengths):
    mask, _ = packed_masks(lengths)
    return mask, torch.arange(mask.shape[0])  # positions do not restart


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
    ("packed_masks", packed_masks, packed_masks_plain_causal, "own word"),
    ("packed_masks", packed_masks, packed_masks_running_positions, "restarts"),
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


def prefix_lm_mask_float(prefix_len, total_len):
    return prefix_lm_mask(prefix_len, total_len).float()  # the spec asks for a boolean mask


def length_penalty_last_on_ties(hypotheses, alpha):
    scores = [logp / ((5 + n) / 6) ** alpha for n, logp in hypotheses]
    return max(reversed(range(len(scores))), key=lambda k: scores[k])  # the last of equal scores


def packed_masks_float(lengths):
    mask, positions = packed_masks(lengths)
    return mask.float(), positions  # the spec asks for a boolean mask


@pytest.mark.parametrize("check, good, bad, message", [
    ("prefix_lm_mask", prefix_lm_mask, prefix_lm_mask_float, "boolean"),
    ("packed_masks", packed_masks, packed_masks_float, "boolean"),
    ("length_penalty_best", length_penalty_best, length_penalty_last_on_ties, "tie"),
])
def test_check_rejects_the_wrong_type_and_tie_rule(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)
