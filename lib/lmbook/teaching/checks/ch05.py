"""Self-checks for chapter 5 (tokenization)."""

from __future__ import annotations

from ._core import Case, function_check, run_check

__all__ = ["check_stream_decode", "check_best_segmentation"]

function_check("stream_decode", lambda: [
    Case(([b"Hel", b"lo"],)),
    Case(([b"\xe5", b"\x88", b"\x97"],), hint="'\u5217' is 3 bytes: print nothing until all three have "
                                               "arrived, then the whole character."),
    Case(([b"a\xe5\x88", b"\x97b"],), hint="print the complete characters at once and hold back only "
                                         "the incomplete tail."),
    Case(([b"\xf0\x9f", b"\x90", b"\x8d!"],)),
    Case(([b"ok\xe5\x88"],), hint="at the end of the stream, flush: a character cut short becomes ONE "
                                   "U+FFFD (one per maximal invalid run, as bytes.decode(errors='replace')), "
                                   "not one per byte."),
    Case(([],), hint="no tokens, nothing to print: return an empty list."),
    Case(([b"\xff", b"a"],), hint="a byte that can never start a character is invalid at once: U+FFFD."),
], hint="find where the last character starts and whether its lead byte's length reaches past the end; "
        "hold that tail back and decode the rest with errors='replace'.")


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
