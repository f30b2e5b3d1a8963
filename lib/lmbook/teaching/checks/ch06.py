"""Self-checks for chapter 6 (embeddings)."""

from __future__ import annotations

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_sgns_by_hand", "check_context_pairs", "check_fasttext_ngrams", "check_noise_distribution",
           "check_expected_path_length"]

SGNS_BY_HAND = {"positive": 2.0, "negatives": (-1.0, 0.5)}  # the scores u.v of one training example

answer_check("sgns_by_hand", hint="add one log-sigmoid per word: log s(u+.v) for the positive, log s(-u_k.v) for "
                                  "each negative (mind the minus sign); the objective is a sum of negative numbers.")


def check_sgns_by_hand(answer) -> None:
    """The negative-sampling objective log s(2) + log s(1) + log s(-0.5) for the scores in SGNS_BY_HAND."""
    check_answer("sgns_by_hand", answer)


def _context_pairs_cases():
    s = ["we", "raise", "an", "exception", "here"]
    return [
        Case((s, 1)),
        Case((s, 2), hint="a window of 2 means up to 2 words on *each* side of the centre."),
        Case((["a", "b"], 5), hint="the window stops at the ends of the sentence."),
        Case((["solo"], 2), hint="a one-word sentence has no context: []."),
        Case((["x", "x", "y"], 1), hint="skip the centre's own position, not every word equal to it."),
        Case(([], 3)),
    ]


function_check("context_pairs", _context_pairs_cases,
               hint="order: centres from left to right; for each, its context words from left to right.")


def check_context_pairs(fn) -> None:
    """context_pairs(sentence, window): (centre, context) for every context word within ``window``."""
    run_check("context_pairs", fn)


function_check("fasttext_ngrams", lambda: [
    Case(("playing", 3, 3), hint="wrap the word in < and > first: the first trigram is '<pl'."),
    Case(("where", 3, 4)),
    Case(("iterator", 3, 6), hint="all lengths from n_min to n_max, the shorter ones first."),
    Case(("ab", 3, 5), hint="'<ab>' is the whole word, a separate feature: do not list it as an n-gram."),
    Case(("é", 2, 3)),
])


def check_fasttext_ngrams(fn) -> None:
    """fasttext_ngrams(word, n_min, n_max): the n-grams of "<word>", shortest first, without "<word>"."""
    run_check("fasttext_ngrams", fn)


function_check("noise_distribution", lambda: [
    Case(([100, 10, 1], 0.75)),
    Case(([100, 10, 1], 1.0), hint="power 1 is the unigram distribution: count / total."),
    Case(([100, 10, 1], 0.0), hint="power 0 makes every word equally likely."),
    Case(([5, 5, 5, 5], 0.75)),
    Case(([4096, 1], 0.5), hint="raise the counts to the power first, then normalise so they sum to 1."),
], rtol=1e-9)


def check_noise_distribution(fn) -> None:
    """noise_distribution(counts, power): P_n(w) = count(w)^power / sum_v count(v)^power."""
    run_check("noise_distribution", fn)


function_check("expected_path_length", lambda: [
    Case(([1, 1],), hint="two words: one decision each, so the mean path length is 1."),
    Case(([1, 1, 1, 1],)),
    Case(([8, 4, 2, 1, 1],), hint="frequent words sit near the root: weight each depth by the count."),
    Case(([50, 20, 20, 5, 3, 1, 1],)),
    Case(([1] * 1000,), hint="for V equal counts the depth is about log2 V."),
])


def check_expected_path_length(fn) -> None:
    """expected_path_length(counts): the count-weighted mean depth of the words in a Huffman tree."""
    run_check("expected_path_length", fn)
