"""Chapter 6's self-checks accept the right answer and reject plausible wrong ones with a message."""

import math

import numpy as np
from check_helpers import verdict
from lmbook import checks


def log_sigmoid(x):
    return math.log(1 / (1 + math.exp(-x)))


def test_sgns_by_hand(capsys):
    right = log_sigmoid(2) + log_sigmoid(1) + log_sigmoid(-0.5)
    ok, out = verdict(capsys, checks.check_sgns_by_hand, right, "sgns_by_hand")
    assert ok and "✓" in out
    product = log_sigmoid(2) * (log_sigmoid(1) + log_sigmoid(-0.5))  # erratum E94
    ok, out = verdict(capsys, checks.check_sgns_by_hand, product, "sgns_by_hand")
    assert not ok and "sum" in out
    no_minus = log_sigmoid(2) + log_sigmoid(-1) + log_sigmoid(0.5)  # forgot to negate the negatives' scores
    assert not verdict(capsys, checks.check_sgns_by_hand, no_minus, "sgns_by_hand")[0]


def test_fasttext_ngrams(capsys):
    def good(word, n_min, n_max):
        w = "<" + word + ">"
        return [w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n + 1) if w[i:i + n] != w]

    assert verdict(capsys, checks.check_fasttext_ngrams, good, "fasttext_ngrams")[0]

    def no_markers(word, n_min, n_max):
        return [word[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(word) - n + 1)]

    ok, out = verdict(capsys, checks.check_fasttext_ngrams, no_markers, "fasttext_ngrams")
    assert not ok and "'<pl'" in out

    def keeps_whole_word(word, n_min, n_max):
        w = "<" + word + ">"
        return [w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n + 1)]

    ok, out = verdict(capsys, checks.check_fasttext_ngrams, keeps_whole_word, "fasttext_ngrams")
    assert not ok and "differs" in out

    def deduplicated(word, n_min, n_max):  # drops the second 'ana' of '<banana>'
        return list(dict.fromkeys(good(word, n_min, n_max)))

    ok, out = verdict(capsys, checks.check_fasttext_ngrams, deduplicated, "fasttext_ngrams")
    assert not ok and "repeated" in out


def test_analogy_3cosmul(capsys):
    def good(vectors, a, b, c):
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        cos = [(unit @ unit[i] + 1) / 2 for i in (a, b, c)]
        scores = cos[1] * cos[2] / (cos[0] + 1e-3)
        scores[[a, b, c]] = -np.inf
        return int(np.argmax(scores))

    assert verdict(capsys, checks.check_analogy_3cosmul, good, "analogy_3cosmul")[0]

    def additive(vectors, a, b, c):  # 3CosAdd instead
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        scores = unit @ (unit[b] - unit[a] + unit[c])
        scores[[a, b, c]] = -np.inf
        return int(np.argmax(scores))

    ok, out = verdict(capsys, checks.check_analogy_3cosmul, additive, "analogy_3cosmul")
    assert not ok and "not 3CosAdd" in out

    for eps in (0.0, 1e-9):  # the wrong constant in the denominator
        def small_eps(vectors, a, b, c, eps=eps):
            unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
            cos = [(unit @ unit[i] + 1) / 2 for i in (a, b, c)]
            with np.errstate(divide="ignore", invalid="ignore"):
                scores = cos[1] * cos[2] / (cos[0] + eps)
            scores[[a, b, c]] = -np.inf
            return int(np.argmax(scores))

        ok, out = verdict(capsys, checks.check_analogy_3cosmul, small_eps, "analogy_3cosmul")
        assert not ok and "+ 0.001" in out

    def keeps_inputs(vectors, a, b, c):  # forgets to exclude a, b and c
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        cos = [(unit @ unit[i] + 1) / 2 for i in (a, b, c)]
        return int(np.argmax(cos[1] * cos[2] / (cos[0] + 1e-3)))

    ok, out = verdict(capsys, checks.check_analogy_3cosmul, keeps_inputs, "analogy_3cosmul")
    assert not ok and "leave a, b and c" in out

    def unshifted(vectors, a, b, c):  # multiplies raw cosines, which may be negative
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        cos = [unit @ unit[i] for i in (a, b, c)]
        scores = cos[1] * cos[2] / (cos[0] + 1e-3)
        scores[[a, b, c]] = -np.inf
        return int(np.argmax(scores))

    assert not verdict(capsys, checks.check_analogy_3cosmul, unshifted, "analogy_3cosmul")[0]


def test_idf_weighted_mean(capsys):
    def good(tokens, vectors, index, idf):
        known = [t for t in tokens if t in index and t in idf]
        if not known:
            return np.zeros(vectors.shape[1])
        w = np.array([idf[t] for t in known])
        return w @ vectors[[index[t] for t in known]] / w.sum() if w.sum() else np.zeros(vectors.shape[1])

    assert verdict(capsys, checks.check_idf_weighted_mean, good, "idf_weighted_mean")[0]

    def zero_over_zero(tokens, vectors, index, idf):  # NaN when every known token has idf 0
        known = [t for t in tokens if t in index and t in idf]
        if not known:
            return np.zeros(vectors.shape[1])
        w = np.array([idf[t] for t in known])
        with np.errstate(invalid="ignore"):
            return w @ vectors[[index[t] for t in known]] / w.sum()

    ok, out = verdict(capsys, checks.check_idf_weighted_mean, zero_over_zero, "idf_weighted_mean")
    assert not ok and "sum to 0" in out

    def plain_mean(tokens, vectors, index, idf):  # ignores the weights
        known = [t for t in tokens if t in index and t in idf]
        return vectors[[index[t] for t in known]].mean(0) if known else np.zeros(vectors.shape[1])

    assert not verdict(capsys, checks.check_idf_weighted_mean, plain_mean, "idf_weighted_mean")[0]

    def distinct_tokens(tokens, vectors, index, idf):  # counts a repeated token once
        return good(list(dict.fromkeys(tokens)), vectors, index, idf)

    ok, out = verdict(capsys, checks.check_idf_weighted_mean, distinct_tokens, "idf_weighted_mean")
    assert not ok and "each occurrence" in out

    def unnormalised(tokens, vectors, index, idf):  # forgets to divide by the sum of the weights
        known = [t for t in tokens if t in index and t in idf]
        w = np.array([idf[t] for t in known])
        return w @ vectors[[index[t] for t in known]] if known else np.zeros(vectors.shape[1])

    assert not verdict(capsys, checks.check_idf_weighted_mean, unnormalised, "idf_weighted_mean")[0]
