"""Answer keys for chapter 5 (tokenization)."""

from __future__ import annotations

import codecs

from lmbook.teaching.checks import Case
from lmbook.unigram import unigram_viterbi

from . import Key


def stream_decode(pieces):
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = [decoder.decode(bytes(p), final=False) for p in pieces]
    if out:
        out[-1] += decoder.decode(b"", final=True)
    return out


def best_segmentation(word, logp):
    return unigram_viterbi(word, logp)[0]


def _hidden_stream_decode():
    return [
        Case(([b"\xc3", b"\xa9t\xc3\xa9"],)),  # a 2-byte character cut in two
        Case(([b"\xf0", b"\x9f", b"\x98", b"\x80"],)),  # a 4-byte character, one byte per token
        Case(([b"x\xf0\x9f\x98"],)),  # flush at the end
        Case(([b"\x80ab", b"", b"\xe2\x82", b"\xac"],)),  # a lone continuation byte; an empty token
        Case(([b"\xe5\x88", b"A"],)),  # a cut character that never completes
    ]


def _hidden_best_segmentation():
    lp = {"b": -3.0, "a": -2.8, "n": -2.9, "d": -3.2, "s": -3.0, "ban": -5.5, "band": -9.0, "ana": -5.0,
          "na": -4.0, "an": -4.1, "nd": -4.3, "and": -5.2, "ands": -7.5, "bands": -12.5, "banana": -14.0,
          "nana": -6.5}
    return [
        Case(("banana", lp)),  # 'ban'+'ana' (-10.5) beats the whole word (-14.0)
        Case(("bands", lp)),  # 'b'+'ands' (-10.5): greedy longest match takes 'bands' (-12.5)
        Case(("dab", lp)),  # single characters only
        Case(("a", lp)),
        Case(("sandbanana", lp)),
    ]


KEYS = {
    "stream_decode": Key(stream_decode, _hidden_stream_decode),
    "best_segmentation": Key(best_segmentation, _hidden_best_segmentation, giveaways=("unigram_viterbi",)),
}
