"""Self-checks for chapter 4 (part-of-speech tagging: Viterbi, the forward algorithm, constrained decoding)."""

from __future__ import annotations

import numpy as np

from ._core import Case, _report, answer_check, check_answer, function_check, run_check

__all__ = ["check_viterbi_by_hand", "check_forward_log_likelihood", "check_bio_constraints",
           "check_trigram_parameters"]

answer_check("viterbi_by_hand",
             hint="multiply, do not add: delta_t(k) = max_j delta_{t-1}(j) A[j, k] times B_k(x_t), and the answer "
                  "is the largest delta at the last word (a probability, not a log).")


_START = dict(N=0.7, V=0.3)  # the exercise's (public) HMM
_NEXT = dict(NN=0.4, NV=0.6, VN=0.8, VV=0.2)
_FISH, _SLEEP = dict(N=0.5, V=0.3), dict(N=0.1, V=0.6)


def _path_probability(path) -> float:
    z = "".join(path)
    p = _START[z[0]] * _FISH[z[0]] * _FISH[z[1]] * _SLEEP[z[2]]
    return p * _NEXT[z[0] + z[1]] * _NEXT[z[1] + z[2]]


def check_viterbi_by_hand(answer) -> None:
    """``answer`` = (P(x, best path), best path as a string of N and V) for "fish fish sleep" under the exercise's
    HMM; a bare number checks the probability only."""
    if not isinstance(answer, tuple | list):
        check_answer("viterbi_by_hand", answer)
        return
    if len(answer) != 2 or not (isinstance(answer[1], str | list | tuple) and len(answer[1]) == 3
                                and all(z in ("N", "V") for z in answer[1])):
        _report("viterbi_by_hand", False,
                f"✗ check_viterbi_by_hand: expected (probability, path) with a path of 3 tags N/V, got {answer!r}.")
        return
    probability, path = answer
    if not np.isclose(_path_probability(path), float(probability), rtol=1e-6, atol=0):
        _report("viterbi_by_hand", False, f"✗ check_viterbi_by_hand: the path {''.join(path)} has probability "
                f"{_path_probability(path):.4g}, not {float(probability):.4g}: follow the back-pointers from the best "
                "last tag.")
        return
    check_answer("viterbi_by_hand", probability)


def _hmm(seed, K, T, scale=1.0):
    rng = np.random.default_rng(seed)
    log_start = np.log(rng.dirichlet(np.ones(K)))
    log_trans = np.log(rng.dirichlet(np.ones(K), size=K))
    log_emit = np.log(rng.uniform(0.05, 1.0, size=(T, K)) * scale)
    return log_start, log_trans, log_emit


def _forward_cases():
    blocked = _hmm(4, 3, 5)
    with np.errstate(divide="ignore"):
        blocked[1][:] = np.log([[0.6, 0.4, 0.0], [0.3, 0.7, 0.0], [0.5, 0.5, 0.0]])  # state 2 is never entered
    return [
        Case(_hmm(1, 2, 3)),
        Case(_hmm(2, 4, 1), hint="with one word, P(x) = sum_k pi_k B_k(x_1): no transition is used."),
        Case(_hmm(3, 3, 400, scale=1e-3),
             hint="P(x) underflows to 0 here: normalise alpha at every step and add up the logs of the "
                  "normalisers c_t (or stay in log space)."),
        Case(blocked, hint="a state that can never be entered has a column of log 0 = -inf: this must not turn "
                              "into nan (subtracting a max of -inf, or dividing 0 by 0, does)."),
        Case(_hmm(5, 5, 7), hint="log_trans[j, k] is P(next = k | previous = j): rows are the previous state."),
    ]


function_check("forward_log_likelihood", _forward_cases, rtol=1e-9, atol=1e-8,
               hint="alpha_1 = pi * B[0]; alpha_t = (alpha_{t-1} @ A) * B[t], divided by its sum c_t at every "
                    "step; log P(x) = sum_t log c_t.")


def check_forward_log_likelihood(fn) -> None:
    """forward_log_likelihood(log_start, log_trans, log_emit) -> log P(x), natural log."""
    run_check("forward_log_likelihood", fn)


def _bool_arrays(output):
    start, allowed = output
    return [np.asarray(start, dtype=bool).tolist(), np.asarray(allowed, dtype=bool).tolist()]


function_check("bio_constraints", lambda: [
    Case((["O", "B-PER", "I-PER"],)),
    Case((["B-LOC", "I-LOC", "B-PER", "I-PER", "O"],),
         hint="I-PER may follow B-PER or I-PER only, never B-LOC or I-LOC: the types must match."),
    Case((["I-ORG", "O", "B-ORG"],), hint="the order of the tags is the order of the rows and columns."),
    Case((["O"],), hint="with no entity types every transition is allowed."),
], project=_bool_arrays,
   hint="start[k] is False only for I- tags; allowed[j, k] is False only when k is I-X and j is neither B-X nor I-X.")


def check_bio_constraints(fn) -> None:
    """bio_constraints(tags) -> (start (K,) bool, allowed (K, K) bool with rows the previous tag)."""
    run_check("bio_constraints", fn)


answer_check("trigram_parameters",
             hint="one entry for each context (two previous tags) and each next tag: K * K * K.")


def check_trigram_parameters(answer) -> None:
    """The number of entries of the table P(z_t | z_{t-2}, z_{t-1}) over the 17 UPOS tags (no boundary tags)."""
    if isinstance(answer, int | float) and answer == 17**2 * 16:
        _report("trigram_parameters", False, "✗ check_trigram_parameters: 4624 counts the *free* parameters (each "
                "row sums to 1); the question asks for the number of entries of the table.")
        return
    check_answer("trigram_parameters", answer)
