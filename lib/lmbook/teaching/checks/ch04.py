"""Self-checks for chapter 4 (part-of-speech tagging: Viterbi, the forward algorithm, constrained decoding)."""

from __future__ import annotations

import numpy as np

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_viterbi_by_hand", "check_forward_log_likelihood", "check_bio_constraints",
           "check_trigram_parameters"]

answer_check("viterbi_by_hand",
             hint="multiply, do not add: delta_t(k) = max_j delta_{t-1}(j) A[j, k] times B_k(x_t), and the answer "
                  "is the largest delta at the last word (a probability, not a log).")


def check_viterbi_by_hand(answer) -> None:
    """P(x, best path) for "fish fish sleep" under the two-tag HMM of the exercise."""
    check_answer("viterbi_by_hand", answer)


def _hmm(seed, K, T, scale=1.0):
    rng = np.random.default_rng(seed)
    log_start = np.log(rng.dirichlet(np.ones(K)))
    log_trans = np.log(rng.dirichlet(np.ones(K), size=K))
    log_emit = np.log(rng.uniform(0.05, 1.0, size=(T, K)) * scale)
    return log_start, log_trans, log_emit


def _forward_cases():
    blocked = _hmm(4, 3, 5)
    with np.errstate(divide="ignore"):
        blocked[1][0] = np.log([0.6, 0.4, 0.0])  # from state 0, state 2 is impossible: log 0 = -inf
    return [
        Case(_hmm(1, 2, 3)),
        Case(_hmm(2, 4, 1), hint="with one word, P(x) = sum_k pi_k B_k(x_1): no transition is used."),
        Case(_hmm(3, 3, 400, scale=1e-3),
             hint="P(x) underflows to 0 here: keep alpha in log space and combine with logsumexp, never exp."),
        Case(blocked, hint="log(0) = -inf in log_trans must not turn into nan: logsumexp handles -inf."),
        Case(_hmm(5, 5, 7), hint="log_trans[j, k] is P(next = k | previous = j): rows are the previous state."),
    ]


function_check("forward_log_likelihood", _forward_cases, rtol=1e-9, atol=1e-8,
               hint="log alpha_1 = log pi + log B[0]; log alpha_t = logsumexp(log alpha_{t-1}[:, None] + log A, "
                    "axis=0) + log B[t]; log P(x) = logsumexp(log alpha_T).")


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
             hint="one probability for each context (two previous tags) and each next tag: K * K * K.")


def check_trigram_parameters(answer) -> None:
    """The number of transition probabilities P(z_t | z_{t-2}, z_{t-1}) over the 17 UPOS tags."""
    check_answer("trigram_parameters", answer)
