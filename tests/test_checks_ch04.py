"""Chapter 4's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import numpy as np
import pytest
from check_helpers import accepts_then_rejects, verdict
from lmbook import checks
from lmbook.checks import RESULTS
from scipy.special import logsumexp


def forward_log_likelihood(log_start, log_trans, log_emit):
    a = log_start + log_emit[0]
    for t in range(1, len(log_emit)):
        a = logsumexp(a[:, None] + log_trans, axis=0) + log_emit[t]
    return float(logsumexp(a))


def forward_in_probability_space(log_start, log_trans, log_emit):
    a = np.exp(log_start + log_emit[0])
    for t in range(1, len(log_emit)):
        a = (a @ np.exp(log_trans)) * np.exp(log_emit[t])
    with np.errstate(divide="ignore"):
        return float(np.log(a.sum()))  # -inf once P(x) underflows


def forward_transposed(log_start, log_trans, log_emit):
    return forward_log_likelihood(log_start, log_trans.T, log_emit)  # columns taken as the previous state


def forward_max_not_sum(log_start, log_trans, log_emit):
    a = log_start + log_emit[0]
    for t in range(1, len(log_emit)):
        a = (a[:, None] + log_trans).max(axis=0) + log_emit[t]  # Viterbi's max: the best path, not P(x)
    return float(a.max())


def bio_constraints(tags):
    start = np.array([not t.startswith("I-") for t in tags])
    allowed = np.array([[not k.startswith("I-") or j in ("B-" + k[2:], k) for k in tags] for j in tags])
    return start, allowed


def bio_ignores_type(tags):
    start = np.array([not t.startswith("I-") for t in tags])
    allowed = np.array([[not k.startswith("I-") or j != "O" for k in tags] for j in tags])  # I-PER after B-LOC
    return start, allowed


def bio_any_start(tags):
    return np.ones(len(tags), dtype=bool), bio_constraints(tags)[1]


@pytest.mark.parametrize(
    "check, good, bad, message",
    [
        ("forward_log_likelihood", forward_log_likelihood, forward_in_probability_space, "underflows"),
        ("forward_log_likelihood", forward_log_likelihood, forward_transposed, "sum c_t"),
        ("forward_log_likelihood", forward_log_likelihood, forward_max_not_sum, "sum c_t"),
        ("bio_constraints", bio_constraints, bio_ignores_type, "types must match"),
        ("bio_constraints", bio_constraints, bio_any_start, "start[k]"),
    ],
)
def test_check_accepts_the_answer_and_rejects_a_plausible_mistake(check, good, bad, message, capsys):
    accepts_then_rejects(capsys, check, good, bad, message)


def _viterbi_by_hand(log=False):
    pi, A = {"N": 0.7, "V": 0.3}, {("N", "N"): 0.4, ("N", "V"): 0.6, ("V", "N"): 0.8, ("V", "V"): 0.2}
    B = {("N", "fish"): 0.5, ("V", "fish"): 0.3, ("N", "sleep"): 0.1, ("V", "sleep"): 0.6}
    best = 0.0
    for path in [(a, b, c) for a in "NV" for b in "NV" for c in "NV"]:  # brute force over the 8 paths
        p = pi[path[0]] * B[path[0], "fish"] * A[path[0], path[1]] * B[path[1], "fish"]
        p *= A[path[1], path[2]] * B[path[2], "sleep"]
        best = max(best, p)
    return math.log(best) if log else best


def test_by_hand_answers(capsys):
    assert verdict(capsys, checks.check_viterbi_by_hand, _viterbi_by_hand(), "viterbi_by_hand")[0] is True
    assert verdict(capsys, checks.check_viterbi_by_hand, _viterbi_by_hand(log=True), "viterbi_by_hand")[0] is False
    assert verdict(capsys, checks.check_viterbi_by_hand, 0.35 * 0.21 * 0.36, "viterbi_by_hand")[0] is False
    assert verdict(capsys, checks.check_trigram_parameters, 17**3, "trigram_parameters")[0] is True
    passed, out = verdict(capsys, checks.check_trigram_parameters, 17**2, "trigram_parameters")
    assert passed is False and "K * K * K" in out
    passed, out = verdict(capsys, checks.check_trigram_parameters, 17**2 * 16, "trigram_parameters")
    assert passed is False and "free" in out
    right = _viterbi_by_hand()
    assert verdict(capsys, checks.check_viterbi_by_hand, (right, "NNV"), "viterbi_by_hand")[0] is True
    assert verdict(capsys, checks.check_viterbi_by_hand, (right, ["N", "N", "V"]), "viterbi_by_hand")[0] is True
    passed, out = verdict(capsys, checks.check_viterbi_by_hand, (right, "NVV"), "viterbi_by_hand")
    assert passed is False and "back-pointers" in out
    assert verdict(capsys, checks.check_viterbi_by_hand, (right, "NN"), "viterbi_by_hand")[0] is False


def test_forward_check_rejects_unguarded_logsumexp(capsys):
    def naive(log_start, log_trans, log_emit):  # max-shift log-sum-exp without the -inf guard
        def lse(a, axis=None):
            m = np.max(a, axis=axis, keepdims=True)
            return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(a - m), axis=axis))

        log_alpha = log_start + log_emit[0]
        for t in range(1, len(log_emit)):
            log_alpha = lse(log_alpha[:, None] + log_trans, axis=0) + log_emit[t]
        return float(lse(log_alpha))

    with np.errstate(all="ignore"):
        assert verdict(capsys, checks.check_forward_log_likelihood, naive, "forward_log_likelihood")[0] is False


def test_not_attempted(capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError

    checks.check_bio_constraints(stub)
    assert RESULTS["bio_constraints"] is False and "not attempted" in capsys.readouterr().out


def test_forward_check_accepts_the_scaled_forward(capsys):
    def scaled(log_start, log_trans, log_emit):  # Rabiner's scaling: normalise alpha, add up log c_t
        A, alpha, total = np.exp(log_trans), np.exp(log_start), 0.0
        for t in range(len(log_emit)):
            shift = log_emit[t].max()
            alpha = (alpha if t == 0 else alpha @ A) * np.exp(log_emit[t] - shift)
            total += np.log(alpha.sum()) + shift
            alpha = alpha / alpha.sum()
        return float(total)

    assert verdict(capsys, checks.check_forward_log_likelihood, scaled, "forward_log_likelihood")[0] is True
