"""Chapter 1's self-checks accept the reference answer and reject the typical wrong answers with a helpful
message, without raising into the student's face."""

import math

from check_helpers import verdict
from lmbook import checks


def test_ppl_by_hand(capsys):
    ok, out = verdict(capsys, checks.check_ppl_by_hand, (0.2 * 0.5 * 0.1 * 0.4) ** -0.25, "ppl_by_hand")
    assert ok and "✓" in out
    ok, out = verdict(capsys, checks.check_ppl_by_hand, (0.2 * 0.5 * 0.1 * 0.4) ** -1, "ppl_by_hand")
    assert not ok and "hint" in out  # forgot the 1/N
    ok, out = verdict(capsys, checks.check_ppl_by_hand, None, "ppl_by_hand")
    assert not ok and "not answered" in out
    ok, out = verdict(capsys, checks.check_ppl_by_hand, "five", "ppl_by_hand")
    assert not ok and "expected a number" in out


def test_add_k(capsys):
    good = lambda c_hw, c_h, V, k: (c_hw + k) / (c_h + k * V)  # noqa: E731
    assert verdict(capsys, checks.check_add_k, good, "add_k")[0]
    no_kv = lambda c_hw, c_h, V, k: (c_hw + k) / (c_h + V)  # noqa: E731  (Laplace denominator with any k)
    ok, out = verdict(capsys, checks.check_add_k, no_kv, "add_k")
    assert not ok and "expected" in out and "got" in out and "input" in out


def _continuation_by_loops(bigrams):
    """P_cont(w) by brute force over the vocabulary: an independent reference for the check's expected values."""
    pairs = [tuple(b) for b in bigrams]
    vocab = sorted({x for pair in pairs for x in pair})
    n_types = sum(1 for v in vocab for w in vocab if (v, w) in pairs)
    out = {}
    for w in vocab:
        left = sum(1 for v in vocab if (v, w) in pairs)
        if left:
            out[w] = left / n_types
    return out


def test_continuation_probs(capsys):
    assert verdict(capsys, checks.check_continuation_probs, _continuation_by_loops, "continuation_probs")[0]

    def by_frequency(bigrams):  # the unigram MLE of the right word: what continuation counts replace
        return {w: sum(b[1] == w for b in bigrams) / len(bigrams) for _, w in bigrams}

    ok, out = verdict(capsys, checks.check_continuation_probs, by_frequency, "continuation_probs")
    assert not ok and "distinct" in out

    def tokens_in_denominator(bigrams):  # distinct left neighbours, but divided by bigram tokens
        left = {}
        for _, w in {tuple(b) for b in bigrams}:
            left[w] = left.get(w, 0) + 1
        return {w: c / len(bigrams) for w, c in left.items()}

    ok, out = verdict(capsys, checks.check_continuation_probs, tokens_in_denominator, "continuation_probs")
    assert not ok and "hint" in out


def test_continuation_probs_sum_to_one():
    from answer_keys.ch01 import continuation_probs

    bigrams = [["a", "b"], ["b", "c"], ["a", "c"], ["c", "c"], ["a", "b"]]
    probs = continuation_probs(bigrams)
    assert probs == _continuation_by_loops(bigrams)
    assert math.isclose(sum(probs.values()), 1.0)


def test_ppl_per_word(capsys):
    assert verdict(capsys, checks.check_ppl_per_word, 25 ** 1.4, "ppl_per_word")[0]
    ok, out = verdict(capsys, checks.check_ppl_per_word, 25.0, "ppl_per_word")  # per token, not per word
    assert not ok and "hint" in out
    ok, out = verdict(capsys, checks.check_ppl_per_word, 25 ** (1000 / 1400), "ppl_per_word")  # ratio upside down
    assert not ok


def test_optimal_logit_gap(capsys):
    def good(K, eps):
        return math.inf if eps == 0 else math.log((1 - eps + eps / K) / (eps / K))

    assert verdict(capsys, checks.check_optimal_logit_gap, good, "optimal_logit_gap")[0]

    def forgets_true_class_share(K, eps):  # uses eps/(K-1) on the wrong classes and 1-eps on the true one
        return math.inf if eps == 0 else math.log((1 - eps) / (eps / (K - 1)))

    ok, out = verdict(capsys, checks.check_optimal_logit_gap, forgets_true_class_share, "optimal_logit_gap")
    assert not ok and "differs" in out


def test_char_sequences(capsys):
    def good(sentences):
        out = []
        for s in sentences:
            chars = []
            for i, w in enumerate(s):
                chars += ([" "] if i else []) + [c for c in w]
            out.append(chars)
        return out

    assert verdict(capsys, checks.check_char_sequences, good, "char_sequences")[0]
    trailing = lambda ss: [list(" ".join(s) + " ") for s in ss]  # noqa: E731  (a space after the last word)
    ok, out = verdict(capsys, checks.check_char_sequences, trailing, "char_sequences")
    assert not ok and "none at either end" in out
    flat = lambda ss: [list(" ".join(" ".join(s) for s in ss))]  # noqa: E731  (one stream, not per sentence)
    assert not verdict(capsys, checks.check_char_sequences, flat, "char_sequences")[0]
