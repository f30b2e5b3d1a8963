"""Answer keys for chapter 5 (tokenization)."""

from __future__ import annotations

import codecs
import itertools
import math

from lmbook.teaching.checks import Case

from . import Key


def stream_decode(pieces):
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = [decoder.decode(bytes(p), final=False) for p in pieces]
    if out:
        out[-1] += decoder.decode(b"", final=True)
    return out


def k_best_segmentations(word, logp, k):
    """By enumeration of all 2^(n-1) ways to cut the word, independent of the DP a student writes."""
    scored = []
    for cuts in itertools.product([False, True], repeat=len(word) - 1):
        bounds = [0] + [i for i, cut in enumerate(cuts, 1) if cut] + [len(word)]
        pieces = [word[i:j] for i, j in itertools.pairwise(bounds)]
        if all(p in logp for p in pieces):
            scored.append((math.fsum(logp[p] for p in pieces), pieces))
    return [pieces for _, pieces in sorted(scored, key=lambda t: -t[0])[:k]]


def _hidden_stream_decode():
    return [
        Case(([b"\xc3", b"\xa9t\xc3\xa9"],)),  # a 2-byte character cut in two
        Case(([b"\xf0", b"\x9f", b"\x98", b"\x80"],)),  # a 4-byte character, one byte per token
        Case(([b"x\xf0\x9f\x98"],)),  # flush at the end
        Case(([b"\x80ab", b"", b"\xe2\x82", b"\xac"],)),  # a lone continuation byte; an empty token
        Case(([b"\xe5\x88", b"A"],)),  # a cut character that never completes
        Case(([b"\xc3\xa9", b"x"],)),  # a complete 2-byte character at the end of a token
        Case(([b"\xe0\x80", b"a"],)),  # E0 80 starts no character: two U+FFFD at once
        Case(([b"\xf4\x90", b"\x80\x80"],)),  # F4 90 is past U+10FFFF: four U+FFFD, none held back
    ]


def _hidden_k_best():
    lp = {"b": -3.0, "a": -2.8, "n": -2.9, "d": -3.2, "s": -3.0, "ban": -5.5, "band": -9.0, "ana": -5.0,
          "na": -4.0, "an": -4.1, "nd": -4.3, "and": -5.2, "ands": -7.5, "bands": -12.5, "banana": -14.0,
          "nana": -6.5}
    return [  # no two of the k + 1 best segmentations tie
        Case(("banana", lp, 3)),  # 'ban'+'ana' (-10.5), then 'b'+'ana'+'na' (-12.0): the whole word is far down
        Case(("bands", lp, 3)),  # 'b'+'ands' (-10.5): greedy longest match takes 'bands' (-12.5)
        Case(("dab", lp, 1)),  # single characters only
        Case(("a", lp, 5)),  # one segmentation, fewer than k
        Case(("sandbanana", lp, 3)),
        Case(("bananas", {**lp, "bananas": -8.0}, 3)),  # a piece of 7 characters wins
    ]


KEYS = {
    "stream_decode": Key(stream_decode, _hidden_stream_decode, giveaways=("getincrementaldecoder",
                                                                          "utf_8_decode")),
    "k_best_segmentations": Key(k_best_segmentations, _hidden_k_best, giveaways=("unigram_viterbi",)),
}
