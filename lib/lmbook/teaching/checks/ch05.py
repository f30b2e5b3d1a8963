"""Self-checks for chapter 5 (tokenization)."""

from __future__ import annotations

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_wordpiece_by_hand", "check_merge_pair", "check_stream_decode", "check_best_segmentation"]

# In a corpus of 2,000 symbols, "t" occurs 120 times, "h" 80 times and the pair "th" 40 times.
WORDPIECE_COUNTS = {"total": 2000, "t": 120, "h": 80, "th": 40}

answer_check("wordpiece_by_hand",
             hint="turn every count into a probability by dividing by the 2,000 symbols, then take "
                  "log P(th) - log P(t) - log P(h); the numerator is P(th), not P(t).")


def check_wordpiece_by_hand(answer) -> None:
    """The WordPiece score log P(th) / (P(t) P(h)) for the counts in WORDPIECE_COUNTS (natural log)."""
    check_answer("wordpiece_by_hand", answer)


function_check("merge_pair", lambda: [
    Case(([1, 2, 3, 1, 2], (1, 2), 9)),
    Case(([5, 5, 5], (5, 5), 9), hint="'aaa' merges to 'aa a': after a merge, skip both merged ids."),
    Case(([5, 5, 5, 5], (5, 5), 9), hint="four equal ids hold two non-overlapping pairs."),
    Case(([3, 1, 2], (1, 2), 7), hint="a pair at the very end must be merged too."),
    Case(([1], (1, 2), 7), hint="a single id has no pair: return it unchanged."),
    Case(([], (1, 2), 7), hint="an empty list stays empty."),
    Case(([2, 1, 2, 1], (1, 2), 7), hint="order matters: (1, 2) is not (2, 1)."),
])


def check_merge_pair(fn) -> None:
    """merge_pair(ids, pair, new_id): replace each occurrence of pair, left to right, without overlap."""
    run_check("merge_pair", fn)


function_check("stream_decode", lambda: [
    Case(([b"Hel", b"lo"],)),
    Case(([b"\xe5", b"\x88", b"\x97"],), hint="'\u5217' is 3 bytes: print nothing until all three have "
                                               "arrived, then the whole character."),
    Case(([b"a\xe5\x88", b"\x97b"],), hint="print the complete characters at once and hold back only "
                                         "the incomplete tail."),
    Case(([b"\xf0\x9f", b"\x90", b"\x8d!"],)),
    Case(([b"ok\xe5\x88"],), hint="at the end of the stream, flush: incomplete bytes become U+FFFD."),
    Case(([],), hint="no tokens, nothing to print: return an empty list."),
    Case(([b"\xff", b"a"],), hint="a byte that can never start a character is invalid at once: U+FFFD."),
], hint="codecs.getincrementaldecoder('utf-8')(errors='replace') does the bookkeeping.")


def check_stream_decode(fn) -> None:
    """stream_decode(pieces): the text to print after each token's bytes, holding back cut characters."""
    run_check("stream_decode", fn)


def _best_segmentation_cases() -> list[Case]:
    lp = {"i": -3.0, "t": -3.2, "e": -3.1, "r": -3.3, "a": -3.6, "o": -3.8, "l": -3.0, "s": -2.9,
          "it": -4.0, "er": -4.2, "iter": -5.0, "ator": -5.5, "at": -4.4, "or": -4.6, "list": -4.0,
          "li": -4.5, "st": -4.1, "iterator": -11.0}
    return [
        Case(("iter", lp), hint="one piece 'iter' (log p = -5.0) beats 'it'+'er' (-8.2)."),
        Case(("iterator", lp), hint="compare whole segmentations by their summed log-probabilities; "
                                    "'iter'+'ator' (-10.5) beats the single piece 'iterator' (-11.0)."),
        Case(("lists", lp)),
        Case(("s", lp)),
        Case(("sea", lp), hint="when no longer piece fits, single characters are the only way."),
        Case(("literals", lp), hint="dynamic programming: best[j] = max_i best[i] + log p(word[i:j])."),
    ]


function_check("best_segmentation", _best_segmentation_cases)


def check_best_segmentation(fn) -> None:
    """best_segmentation(word, logp): the pieces of the most probable Unigram segmentation of word."""
    run_check("best_segmentation", fn)
