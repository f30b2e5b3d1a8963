"""Chapter 6's self-checks accept the right answer and reject plausible wrong ones with a message."""

import heapq
import math

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


def test_context_pairs(capsys):
    def good(sentence, window):
        out = []
        for i, centre in enumerate(sentence):
            for j in range(max(0, i - window), min(len(sentence), i + window + 1)):
                if j != i:
                    out.append((centre, sentence[j]))
        return out

    assert verdict(capsys, checks.check_context_pairs, good, "context_pairs")[0]

    def one_sided(sentence, window):  # only looks to the right
        return [(sentence[i], sentence[j]) for i in range(len(sentence))
                for j in range(i + 1, min(len(sentence), i + window + 1))]

    ok, out = verdict(capsys, checks.check_context_pairs, one_sided, "context_pairs")
    assert not ok and "differs" in out

    def skips_equal_words(sentence, window):  # drops contexts equal to the centre word
        return [(c, w) for c, w in good(sentence, window) if c != w]

    ok, out = verdict(capsys, checks.check_context_pairs, skips_equal_words, "context_pairs")
    assert not ok and "own position" in out


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


def test_noise_distribution(capsys):
    def good(counts, power):
        weights = [c ** power for c in counts]
        return [w / sum(weights) for w in weights]

    assert verdict(capsys, checks.check_noise_distribution, good, "noise_distribution")[0]

    def unnormalised(counts, power):
        total = sum(counts)
        return [(c / total) ** power for c in counts]

    ok, out = verdict(capsys, checks.check_noise_distribution, unnormalised, "noise_distribution")
    assert not ok and "differs" in out


def test_expected_path_length(capsys):
    def good(counts):  # the weighted depth is the sum of the merged weights, over the total
        heap, cost = list(counts), 0
        heapq.heapify(heap)
        while len(heap) > 1:
            a, b = heapq.heappop(heap), heapq.heappop(heap)
            cost += a + b
            heapq.heappush(heap, a + b)
        return cost / sum(counts)

    assert verdict(capsys, checks.check_expected_path_length, good, "expected_path_length")[0]

    def balanced_tree(counts):  # ignores the counts: a balanced tree of depth ceil(log2 V)
        return float(math.ceil(math.log2(len(counts))))

    ok, out = verdict(capsys, checks.check_expected_path_length, balanced_tree, "expected_path_length")
    assert not ok and "frequent words" in out
