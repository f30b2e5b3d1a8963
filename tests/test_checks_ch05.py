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
