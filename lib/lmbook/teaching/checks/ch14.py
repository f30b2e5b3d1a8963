"""Self-checks for chapter 14 (mixture of experts)."""

from __future__ import annotations

import numpy as np

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_balancing_loss_infimum", "check_balancing_loss", "check_experts_read", "check_expert_choice",
           "check_expected_drop_fraction", "check_paired_gap"]

answer_check("balancing_loss_infimum",
             hint="with two experts, let a fraction a of the tokens choose expert 1; a token that chooses it has "
                  "p_1 >= 1/2, the others p_1 <= 1/2. Write the loss as a function of a and P_1, push P_1 as far "
                  "as those constraints allow, then minimise over a.")


def check_balancing_loss_infimum(answer) -> None:
    """The smallest value the Switch balancing loss 2 (f_1 P_1 + f_2 P_2) approaches over all top-1 routings of
    many tokens to two experts."""
    check_answer("balancing_loss_infimum", answer)


def _logits(seed, n, e, scale=1.0):
    return np.random.default_rng(seed).standard_normal((n, e)) * scale


def _favour_first(n, e):
    logits = np.zeros((n, e))
    logits[:, 0] = 3.0
    return logits


function_check("balancing_loss", lambda: [
    Case((_logits(0, 6, 3), 1), hint="E sum_i f_i P_i, with f_i the fraction of tokens whose top choice is i and "
                                     "P_i the mean softmax probability of expert i."),
    Case((_favour_first(5, 4), 1), hint="every token chooses expert 0 here: f = (1, 0, 0, 0), so the loss is E P_0."),
    Case((_logits(1, 8, 4), 2), hint="with top_k = 2, f_i counts each token's two choices, divided by k N so that "
                                     "f sums to 1."),
    Case((_logits(2, 10, 5, 3.0), 3), hint="P_i averages the softmax over all E experts, not over the chosen ones."),
    Case((_logits(3, 7, 6, 0.5), 1)),
], rtol=1e-9, atol=1e-12)


def check_balancing_loss(fn) -> None:
    """balancing_loss(logits, top_k): E sum_i f_i P_i for router logits (N, E), f over the k N assignments."""
    run_check("balancing_loss", fn)


function_check("experts_read", lambda: [
    Case((8, 2, 1), hint="one token reads exactly its k experts."),
    Case((8, 2, 2), hint="two tokens may share an expert: by linearity, sum over the E experts the probability "
                         "that at least one of the B tokens chose it."),
    Case((16, 4, 3), hint="a token that picks k of E experts uniformly misses a given expert with probability "
                          "(E - k) / E (the k picks are without replacement)."),
    Case((128, 8, 64), hint="Qwen3-30B-A3B's routing at batch 64: nearly every expert is read."),
    Case((4, 4, 5), hint="with k = E every token reads every expert."),
], rtol=1e-9, atol=1e-12)


def check_experts_read(fn) -> None:
    """experts_read(n_experts, top_k, batch): the expected number of distinct experts one layer reads for a batch
    of B tokens that each choose k of the E experts uniformly at random, independently."""
    run_check("experts_read", fn)


def _scores(seed, n, e):
    logits = np.random.default_rng(seed).standard_normal((n, e))
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


function_check("expert_choice", lambda: [
    Case((_scores(0, 6, 3), 2), hint="each expert (column) picks the capacity tokens (rows) with the highest "
                                     "scores in its column; a token may be picked by several experts or none."),
    Case((_scores(1, 5, 2), 1), hint="the gate of a picked (token, expert) pair is its score, not 1."),
    Case((_scores(2, 8, 4), 3)),
    Case((_scores(3, 4, 3), 4), hint="with capacity = N every expert takes every token: the gates are the scores."),
], rtol=1e-12, atol=1e-15)


def check_expert_choice(fn) -> None:
    """expert_choice(scores, capacity): gates (N, E), scores[t, e] where expert e picked token t, else 0."""
    run_check("expert_choice", fn)


function_check("expected_drop_fraction", lambda: [
    Case((8, 2, 1.0), hint="C = ceil(c N / E); an expert that receives X > C tokens drops X - C of them."),
    Case((64, 8, 1.0), hint="X ~ Binomial(N, 1/E); average (X - C) over the values X > C only, then multiply by E "
                            "and divide by N."),
    Case((64, 8, 1.25), hint="C = ceil(1.25 * 64 / 8) = 10."),
    Case((10, 3, 1.0), hint="round the capacity up: C = ceil(10 / 3) = 4."),
    Case((16, 4, 4.0), hint="at capacity factor E, C = N: no token can be dropped."),
], rtol=1e-9, atol=1e-12)


def check_expected_drop_fraction(fn) -> None:
    """expected_drop_fraction(n_tokens, n_experts, capacity_factor): the expected fraction of N tokens dropped
    when each picks one of E experts uniformly at random and each expert keeps at most ceil(c N / E)."""
    run_check("expected_drop_fraction", fn)


function_check("paired_gap", lambda: [
    Case(([3.20, 3.25, 3.22], [3.17, 3.19, 3.15]), hint="subtract seed by seed, then take the mean of the "
                                                         "differences and its standard error."),
    Case(([1.0, 2.0], [1.5, 1.0]), hint="the standard error is the sample standard deviation of the differences "
                                        "(ddof = 1) divided by the square root of the number of seeds."),
    Case(([4.0, 4.1, 4.3, 4.2], [4.0, 4.0, 4.0, 4.0])),
], rtol=1e-9, atol=1e-12)


def check_paired_gap(fn) -> None:
    """paired_gap(losses, baseline): [mean, standard error] of the per-seed differences losses - baseline."""
    run_check("paired_gap", fn)
