"""Self-checks for chapter 1 (language models and perplexity)."""

from __future__ import annotations

import math

from ._core import Case, check_answer, run_check

PPL_BY_HAND_PROBS = (0.2, 0.5, 0.1, 0.4)


def check_ppl_by_hand(answer) -> None:
    """The perplexity of a sentence whose four tokens got probabilities 0.2, 0.5, 0.1 and 0.4."""
    expected = math.prod(PPL_BY_HAND_PROBS) ** (-1 / len(PPL_BY_HAND_PROBS))
    check_answer("ppl_by_hand", answer, expected,
                 hint="multiply the four probabilities, then take the power -1/N with N = 4 tokens.")


def _add_k_reference(count_hw, count_h, vocab_size, k):
    return (count_hw + k) / (count_h + k * vocab_size)


def check_add_k(fn) -> None:
    """add_k_prob(count_hw, count_h, vocab_size, k) = (c(h, w) + k) / (c(h) + k V)."""
    cases = [
        Case((3, 10, 5, 1.0)),
        Case((0, 10, 5, 1.0), hint="an unseen n-gram must still get probability k / (c(h) + kV), not 0."),
        Case((0, 0, 4, 0.5), hint="an unseen context gives the uniform distribution 1/V."),
        Case((7, 7, 1000, 0.01), hint="the k is added once per vocabulary word in the denominator: c(h) + k*V."),
        Case((2, 9, 3, 2.0)),
    ]
    run_check("add_k", fn, _add_k_reference, cases)


def _corpus_perplexity_reference(per_string_probs):
    logs = [math.log(p) for probs in per_string_probs for p in probs]
    return math.exp(-sum(logs) / len(logs))


def check_corpus_perplexity(fn) -> None:
    """corpus_perplexity(per_string_probs) = exp(total NLL / total tokens), token-weighted."""
    cases = [
        Case(([[0.5, 0.5, 0.5, 0.5]],)),
        Case(([[0.5, 0.5, 0.5, 0.5], [0.01, 0.9]],),
             hint="weight every token equally: pool all tokens, do not average per-string perplexities."),
        Case(([[0.25], [0.5, 0.5, 0.5]],), hint="strings have different lengths; a one-token string is one token."),
        Case(([[1.0, 1.0], [0.1]],)),
    ]
    run_check("corpus_perplexity", fn, _corpus_perplexity_reference, cases)


def _optimal_logit_gap_reference(num_classes, epsilon):
    if epsilon == 0:
        return math.inf
    low = epsilon / num_classes
    return math.log((1 - epsilon + low) / low)


def check_optimal_logit_gap(fn) -> None:
    """optimal_logit_gap(num_classes, epsilon): the gap z_y - z_k at the minimum of label-smoothed CE."""
    cases = [
        Case((5, 0.1)),
        Case((2, 0.2), hint="with K = 2 the target is (1 - eps + eps/2, eps/2)."),
        Case((49152, 0.1), hint="the smoothed target puts eps/K on *every* class, the true one included."),
        Case((10, 0.0), hint="without smoothing the optimum is a one-hot distribution: the gap is infinite."),
    ]
    run_check("optimal_logit_gap", fn, _optimal_logit_gap_reference, cases)


def _bits_per_char_reference(ppl, n_tokens, n_chars):
    return n_tokens * math.log2(ppl) / n_chars


def check_bits_per_char(fn) -> None:
    """bits_per_char(ppl, n_tokens, n_chars) = n_tokens * log2(ppl) / n_chars."""
    cases = [
        Case((8.0, 100, 100)),
        Case((8.0, 100, 400), hint="a token of 4 characters spreads its bits over 4 characters."),
        Case((20.6, 19182, 67485)),
        Case((1.0, 10, 50)),
    ]
    run_check("bits_per_char", fn, _bits_per_char_reference, cases,
              hint="bits per token = log base 2 of the perplexity (the natural log gives nats).")
