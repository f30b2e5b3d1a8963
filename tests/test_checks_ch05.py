"""Chapter 5's self-checks accept the right answer and reject plausible wrong ones with a message."""

import codecs
import math

from check_helpers import verdict
from lmbook import checks


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

    def one_per_byte(pieces):  # holds back correctly but flushes one U+FFFD per leftover byte
        buffer, out = b"", []
        for p in pieces:
            text, used = codecs.utf_8_decode(buffer + p, "replace", False)
            buffer = (buffer + p)[used:]
            out.append(text)
        if out and buffer:
            out[-1] += "\ufffd" * len(buffer)
        return out

    ok, out = verdict(capsys, checks.check_stream_decode, one_per_byte, "stream_decode")
    assert not ok and "ONE" in out

    def hold_all_high(pieces):  # holds back every trailing run of non-ASCII bytes, even complete characters
        held, out = b"", []
        for p in pieces:
            data = held + p
            cut = len(data)
            while cut and data[cut - 1] >= 0x80:
                cut -= 1
            out.append(data[:cut].decode("utf-8", errors="replace"))
            held = data[cut:]
        if out:
            out[-1] += held.decode("utf-8", errors="replace")
        return out

    ok, out = verdict(capsys, checks.check_stream_decode, hold_all_high, "stream_decode")
    assert not ok and "COMPLETE" in out

    def collapse_runs(pieces):  # one U+FFFD per maximal invalid run, as a wrong reading of the rule says
        import re

        return [re.sub("\ufffd+", "\ufffd", text) for text in good(pieces)]

    ok, out = verdict(capsys, checks.check_stream_decode, collapse_runs, "stream_decode")
    assert not ok and "two invalid bytes give two" in out

    def not_implemented(pieces):
        raise NotImplementedError

    ok, out = verdict(capsys, checks.check_stream_decode, not_implemented, "stream_decode")
    assert not ok and "not attempted" in out


def test_k_best_segmentations(capsys):
    def good(word, logp, k):  # keep the k best partial segmentations of every prefix
        best = [[(0.0, [])]] + [[] for _ in word]
        for j in range(1, len(word) + 1):
            options = [(s + logp[word[i:j]], pieces + [word[i:j]])
                       for i in range(j) if word[i:j] in logp for s, pieces in best[i]]
            best[j] = sorted(options, key=lambda t: -t[0])[:k]
        return [pieces for _, pieces in best[-1]]

    assert verdict(capsys, checks.check_k_best_segmentations, good, "k_best_segmentations")[0]

    def best_prefix_only(word, logp, k):  # one Viterbi path per position, k choices of the last piece only
        best, back = [0.0] + [-math.inf] * len(word), [0] * (len(word) + 1)
        for j in range(1, len(word) + 1):
            for i in range(j):
                if word[i:j] in logp and best[i] + logp[word[i:j]] > best[j]:
                    best[j], back[j] = best[i] + logp[word[i:j]], i

        def path(j):
            pieces = []
            while j:
                pieces.append(word[back[j]:j])
                j = back[j]
            return pieces[::-1]

        n = len(word)
        ends = [(best[i] + logp[word[i:]], path(i) + [word[i:]]) for i in range(n) if word[i:] in logp
                and best[i] > -math.inf]
        return [pieces for _, pieces in sorted(ends, key=lambda t: -t[0])[:k]]

    ok, out = verdict(capsys, checks.check_k_best_segmentations, best_prefix_only, "k_best_segmentations")
    assert not ok and "EVERY position" in out

    def short_pieces_only(word, logp, k, max_len=4):  # never tries a piece longer than 4 characters
        return good(word, {piece: lp for piece, lp in logp.items() if len(piece) <= max_len}, k)

    ok, out = verdict(capsys, checks.check_k_best_segmentations, short_pieces_only, "k_best_segmentations")
    assert not ok  # it fails on the third case already; the last case alone would catch it too

    def greedy_longest(word, logp, k):  # longest-match-first (WordPiece's encoder), not the most probable
        pieces, i = [], 0
        while i < len(word):
            j = max(j for j in range(i + 1, len(word) + 1) if word[i:j] in logp)
            pieces.append(word[i:j])
            i = j
        return [pieces]

    ok, out = verdict(capsys, checks.check_k_best_segmentations, greedy_longest, "k_best_segmentations")
    assert not ok

    def crashes(word, logp, k):
        return [logp[word[::-1]]]  # a KeyError: 'reti' is not a piece

    ok, out = verdict(capsys, checks.check_k_best_segmentations, crashes, "k_best_segmentations")
    assert not ok and "KeyError" in out
