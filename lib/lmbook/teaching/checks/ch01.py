"""Self-checks for chapter 1 (language models and perplexity)."""

from __future__ import annotations

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_ppl_by_hand", "check_add_k", "check_corpus_perplexity", "check_optimal_logit_gap",
           "check_bits_per_char"]

answer_check("ppl_by_hand", hint="multiply the four probabilities, then take the power -1/N with N = 4 tokens.")


def check_ppl_by_hand(answer) -> None:
    """The perplexity of a sentence whose four tokens got probabilities 0.2, 0.5, 0.1 and 0.4."""
    check_answer("ppl_by_hand", answer)


function_check("add_k", lambda: [
    Case((3, 10, 5, 1.0)),
    Case((0, 10, 5, 1.0), hint="an unseen n-gram must still get probability k / (c(h) + kV), not 0."),
    Case((0, 0, 4, 0.5), hint="an unseen context gives the uniform distribution 1/V."),
    Case((7, 7, 1000, 0.01), hint="the k is added once per vocabulary word in the denominator: c(h) + k*V."),
    Case((2, 9, 3, 2.0)),
])


def check_add_k(fn) -> None:
    """add_k_prob(count_hw, count_h, vocab_size, k) = (c(h, w) + k) / (c(h) + k V)."""
    run_check("add_k", fn)


function_check("corpus_perplexity", lambda: [
    Case(([[0.5, 0.5, 0.5, 0.5]],)),
    Case(([[0.5, 0.5, 0.5, 0.5], [0.01, 0.9]],),
         hint="weight every token equally: pool all tokens, do not average per-string perplexities."),
    Case(([[0.25], [0.5, 0.5, 0.5]],), hint="strings have different lengths; a one-token string is one token."),
    Case(([[1.0, 1.0], [0.1]],)),
])


def check_corpus_perplexity(fn) -> None:
    """corpus_perplexity(per_string_probs) = exp(total NLL / total tokens), token-weighted."""
    run_check("corpus_perplexity", fn)


function_check("optimal_logit_gap", lambda: [
    Case((5, 0.1)),
    Case((2, 0.2), hint="with K = 2 the target is (1 - eps + eps/2, eps/2)."),
    Case((49152, 0.1), hint="the smoothed target puts eps/K on *every* class, the true one included."),
    Case((10, 0.0), hint="without smoothing the optimum is a one-hot distribution: the gap is infinite."),
])


def check_optimal_logit_gap(fn) -> None:
    """optimal_logit_gap(num_classes, epsilon): the gap z_y - z_k at the minimum of label-smoothed CE."""
    run_check("optimal_logit_gap", fn)


function_check("bits_per_char", lambda: [
    Case((8.0, 100, 100)),
    Case((8.0, 100, 400), hint="a token of 4 characters spreads its bits over 4 characters."),
    Case((20.6, 19182, 67485)),
    Case((1.0, 10, 50)),
], hint="bits per token = log base 2 of the perplexity (the natural log gives nats).")


def check_bits_per_char(fn) -> None:
    """bits_per_char(ppl, n_tokens, n_chars) = n_tokens * log2(ppl) / n_chars."""
    run_check("bits_per_char", fn)
