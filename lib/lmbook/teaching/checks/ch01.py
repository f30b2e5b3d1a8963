"""Self-checks for chapter 1 (language models and perplexity)."""

from __future__ import annotations

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_ppl_by_hand", "check_add_k", "check_continuation_probs", "check_ppl_per_word",
           "check_optimal_logit_gap", "check_char_sequences"]

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


function_check("continuation_probs", lambda: [
    Case(([["new", "york"], ["in", "york"], ["san", "francisco"], ["san", "francisco"]],),
         hint="count distinct left neighbours: a repeated bigram such as 'san francisco' counts once."),
    Case(([["a", "b"], ["b", "a"], ["a", "a"]],)),
    Case(([["x", "y"], ["x", "y"], ["x", "y"], ["z", "y"], ["x", "w"]],),
         hint="divide by the number of distinct bigram types, not by the number of bigram tokens."),
])


def check_continuation_probs(fn) -> None:
    """continuation_probs(bigrams) = {w: |{v : c(v, w) > 0}| / |{(v, w') : c(v, w') > 0}|}."""
    run_check("continuation_probs", fn)


answer_check("ppl_per_word", hint="the total NLL is N_tokens * ln(PPL) for either model; divide the subword "
                                  "model's total by the number of words, then exponentiate.")


def check_ppl_per_word(answer) -> None:
    """The subword model's perplexity per word: 25 per token over 1,400 tokens of a 1,000-word text."""
    check_answer("ppl_per_word", answer)


function_check("optimal_logit_gap", lambda: [
    Case((8, 0.1)),
    Case((2, 0.2), hint="with K = 2 the target is (1 - eps + eps/2, eps/2)."),
    Case((49152, 0.1), hint="the smoothed target puts eps/K on *every* class, the true one included."),
    Case((10, 0.0), hint="without smoothing the optimum is a one-hot distribution: the gap is infinite."),
])


def check_optimal_logit_gap(fn) -> None:
    """optimal_logit_gap(num_classes, epsilon): the gap z_y - z_k at the minimum of label-smoothed CE."""
    run_check("optimal_logit_gap", fn)


function_check("char_sequences", lambda: [
    Case(([["print", "(", "x", ")"]],), hint="one space between neighbouring words, none at either end."),
    Case(([["a", "b"], ["cd"]],), hint="each sentence becomes its own list of characters."),
    Case(([["x"], ["y", "=", "1"]],)),
])


def check_char_sequences(fn) -> None:
    """char_sequences(sentences) = [list(" ".join(s)) for s in sentences]."""
    run_check("char_sequences", fn)
