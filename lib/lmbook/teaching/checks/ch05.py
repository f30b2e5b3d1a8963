"""Self-checks for chapter 5 (tokenization)."""

from __future__ import annotations

from ._core import Case, function_check, run_check

__all__ = ["check_stream_decode", "check_k_best_segmentations"]

function_check("stream_decode", lambda: [
    Case(([b"Hel", b"lo"],)),
    Case(([b"\xe5", b"\x88", b"\x97"],), hint="'\u5217' is 3 bytes: print nothing until all three have "
                                               "arrived, then the whole character."),
    Case(([b"a\xe5\x88", b"\x97b"],), hint="print the complete characters at once and hold back only "
                                         "the incomplete tail."),
    Case(([b"\xf0\x9f", b"\x90", b"\x8d!"],)),
    Case(([b"ok\xe5\x88"],), hint="at the end of the stream, flush: a character cut short (a valid start of "
                                   "a character) becomes ONE U+FFFD, as bytes.decode(errors='replace') does, "
                                   "not one per byte."),
    Case(([],), hint="no tokens, nothing to print: return an empty list."),
    Case(([b"\xe5\x88\x97", b"\xe8\xa1\xa8"],), hint="a token that ends with a COMPLETE multi-byte "
                                                        "character prints it at once: hold back only what is "
                                                        "incomplete."),
    Case(([b"\xff", b"a"],), hint="a byte that can never start a character is invalid at once: U+FFFD."),
    Case(([b"\xff\xfe", b"a"],), hint="every invalid byte that is not part of a cut-short character is its "
                                      "own U+FFFD: two invalid bytes give two."),
], hint="find where the last character starts and whether its lead byte's length reaches past the end; "
        "hold that tail back and decode the rest with errors='replace'.")


def check_stream_decode(fn) -> None:
    """stream_decode(pieces): the text to print after each token's bytes, holding back cut characters."""
    run_check("stream_decode", fn)


def _k_best_cases() -> list[Case]:
    lp = {"i": -3.0, "t": -3.2, "e": -3.1, "r": -3.3, "a": -3.6, "o": -3.8, "l": -3.0, "s": -2.9,
          "it": -4.0, "er": -4.2, "iter": -5.0, "ator": -5.5, "at": -4.4, "or": -4.6, "list": -4.0,
          "li": -4.5, "st": -4.1, "iterator": -11.0}
    return [
        Case(("iter", lp, 1), hint="k = 1 is the Viterbi segmentation: one piece 'iter' (log p = -5.0) beats "
                                   "'it'+'er' (-8.2)."),
        Case(("iter", lp, 2), hint="return a list of k segmentations (each a list of pieces), most probable "
                                   "first."),
        Case(("iterator", lp, 4), hint="keep the k best partial segmentations at EVERY position, not only the "
                                       "best one: the third best here, 'it'+'er'+'ator', extends the second "
                                       "best segmentation of 'iter'."),
        Case(("lists", lp, 3)),
        Case(("s", lp, 2), hint="when the word has fewer than k segmentations, return all of them."),
        Case(("literals", lp, 3)),
        Case(("iterator", {**lp, "iterator": -9.0}, 2), hint="a long piece can win: try every start i < j, "
                                                             "whatever the length of word[i:j]."),
    ]


function_check("k_best_segmentations", _k_best_cases)


def check_k_best_segmentations(fn) -> None:
    """k_best_segmentations(word, logp, k): the k most probable Unigram segmentations of word, best first."""
    run_check("k_best_segmentations", fn)
