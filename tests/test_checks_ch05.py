"""Chapter 5's self-checks accept the right answer and reject plausible wrong ones with a message."""

import codecs
import math

from check_helpers import verdict
from lmbook import checks


def test_wordpiece_by_hand(capsys):
    right = math.log(0.02 / (0.06 * 0.04))
    ok, out = verdict(capsys, checks.check_wordpiece_by_hand, right, "wordpiece_by_hand")
    assert ok and "✓" in out
    seed_formula = math.log(0.06 / (0.06 * 0.04))  # erratum E93: P(x) in the numerator
    ok, out = verdict(capsys, checks.check_wordpiece_by_hand, seed_formula, "wordpiece_by_hand")
    assert not ok and "hint" in out
    raw_counts = math.log(40 / (120 * 80))  # forgot to normalise by the total
    assert not verdict(capsys, checks.check_wordpiece_by_hand, raw_counts, "wordpiece_by_hand")[0]


def good_merge_pair(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def test_merge_pair(capsys):
    assert verdict(capsys, checks.check_merge_pair, good_merge_pair, "merge_pair")[0]

    def advances_by_one(ids, pair, new_id):  # after a merge, steps one position instead of two
        out, i = [], 0
        while i < len(ids):
            out.append(new_id if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair) else ids[i])
            i += 1
        return out

    ok, out = verdict(capsys, checks.check_merge_pair, advances_by_one, "merge_pair")
    assert not ok and "differs" in out

    def misses_last(ids, pair, new_id):  # off by one: never looks at the last position
        out, i = [], 0
        while i < len(ids) - 1:
            if (ids[i], ids[i + 1]) == pair:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    ok, out = verdict(capsys, checks.check_merge_pair, misses_last, "merge_pair")
    assert not ok and "differs" in out
    ok, out = verdict(capsys, checks.check_merge_pair, good_merge_pair([1, 2], (1, 2), 3), "merge_pair")
    assert not ok and "without calling it" in out


def test_stream_decode(capsys):
    def good(pieces):  # utf_8_decode with final=False reports how many bytes it could use
        buffer, out = b"", []
        for p in pieces:
            text, used = codecs.utf_8_decode(buffer + p, "replace", False)
            buffer = (buffer + p)[used:]
            out.append(text)
        if out and buffer:
            out[-1] += buffer.decode("utf-8", errors="replace")
        return out

    assert verdict(capsys, checks.check_stream_decode, good, "stream_decode")[0]

    def each_alone(pieces):  # decodes every token on its own: cut characters become U+FFFD
        return [p.decode("utf-8", errors="replace") for p in pieces]

    ok, out = verdict(capsys, checks.check_stream_decode, each_alone, "stream_decode")
    assert not ok and "print nothing until" in out

    def no_flush(pieces):  # holds back correctly but forgets the incomplete tail at the end
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return [decoder.decode(p) for p in pieces]

    ok, out = verdict(capsys, checks.check_stream_decode, no_flush, "stream_decode")
    assert not ok and "flush" in out

    def not_implemented(pieces):
        raise NotImplementedError

    ok, out = verdict(capsys, checks.check_stream_decode, not_implemented, "stream_decode")
    assert not ok and "not attempted" in out


def test_best_segmentation(capsys):
    def good(word, logp):
        best, back = [0.0] + [-math.inf] * len(word), [0] * (len(word) + 1)
        for j in range(1, len(word) + 1):
            for i in range(j):
                if word[i:j] in logp and best[i] + logp[word[i:j]] > best[j]:
                    best[j], back[j] = best[i] + logp[word[i:j]], i
        pieces, j = [], len(word)
        while j:
            pieces.append(word[back[j]:j])
            j = back[j]
        return pieces[::-1]

    assert verdict(capsys, checks.check_best_segmentation, good, "best_segmentation")[0]

    def greedy_longest(word, logp):  # longest-match-first (WordPiece's encoder), not the most probable
        pieces, i = [], 0
        while i < len(word):
            j = max(j for j in range(i + 1, len(word) + 1) if word[i:j] in logp)
            pieces.append(word[i:j])
            i = j
        return pieces

    ok, out = verdict(capsys, checks.check_best_segmentation, greedy_longest, "best_segmentation")
    assert not ok and "summed log-probabilities" in out

    def crashes(word, logp):
        return [logp[word[::-1]]]  # a KeyError: 'reti' is not a piece

    ok, out = verdict(capsys, checks.check_best_segmentation, crashes, "best_segmentation")
    assert not ok and "KeyError" in out
