"""Chapter 5: what a byte-level BPE tokenizer does before any merge.

- **Bytes and their printable stand-ins.** The base vocabulary is the 256 byte values. Vocabulary files
  (GPT-2, SmolLM2, ...) spell each byte with a printable character (:func:`bytes_to_unicode`: a space is
  ``Ġ``, a newline ``Ċ``), and token ids 0..255 follow the order of those characters (:func:`byte_order`).
- **Pre-tokenization.** A regular expression cuts the text into chunks (words with their leading space,
  runs of digits, punctuation, whitespace) so that no token ever spans two chunks (:func:`pretokenize`).

Left out on purpose: normalisation (NFKC, lowercasing) and SentencePiece's whitespace symbol. Merges and the
tokenizer itself are in :mod:`lmbook.tokenization`.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

from . import validate

__all__ = ["PRETOKENIZERS", "bytes_to_unicode", "byte_order", "pretokenize"]

PRETOKENIZERS = ("gpt2", "smollm")  # the pre-tokenizers lmbook knows, by their llama.cpp names


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte 0..255 to a printable character (a space shows as Ġ, a newline as Ċ).

    The 188 printable Latin-1 bytes stand for themselves; the other 68 are shifted to 256 + n in order.
    Vocabulary files (GPT-2, SmolLM2, ...) spell their tokens in these characters (chapter 5).
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    mapping, shift = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


def byte_order() -> list[int]:
    """The 256 byte values sorted by their printable stand-in: ``byte_order()[i]`` is the byte of token id i.

    This is Hugging Face's order of the byte-level alphabet, so ``!`` is id 0 and the space comes after the
    letters (chapter 5).
    """
    spelling = bytes_to_unicode()
    return sorted(range(256), key=lambda b: spelling[b])


def pretokenize(text: str, pre: str = "gpt2") -> list[str]:
    """Cut ``text`` into the chunks BPE works inside (chapter 5).

    ``pre="gpt2"``: GPT-2's regex, e.g. ``"Hello world!!"`` -> ``['Hello', ' world', '!!']``.
    ``pre="smollm"``: every number character is a chunk of its own first, then GPT-2's regex runs on the
    rest (SmolLM2, llama.cpp's "smollm"): ``"x = 2024"`` -> ``['x', ' =', ' ', '2', '0', '2', '4']``.
    The chunks always join back to ``text``.
    """
    _check_pretokenize(text, pre)
    pats = _patterns()
    if pre == "gpt2":
        return pats["gpt2"].findall(text)
    out = []
    for piece in pats["digits"].findall(text):  # single number characters and the runs between them
        out.extend([piece] if pats["number"].fullmatch(piece) else pats["gpt2"].findall(piece))
    return out


@lru_cache(maxsize=None)
def _patterns() -> dict[str, re.Pattern]:
    c = _unicode_classes()
    L, N, S = c["L"], c["N"], c["S"]
    # GPT-2: contractions | optional space + letters | optional space + numbers | optional space + other
    # symbols | whitespace not followed by a non-space (so the last space joins the next word) | whitespace
    gpt2 = (rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+")
    return {"gpt2": re.compile(gpt2), "digits": re.compile(rf"[{N}]|[^{N}]+"),
            "number": re.compile(rf"[{N}]")}


@lru_cache(maxsize=1)
def _unicode_classes() -> dict[str, str]:
    r"""Regex character-class bodies for \p{L} (letters), \p{N} (numbers) and \s (Unicode White_Space).

    Python's ``re`` has no \p{...}, so the classes are built from ``unicodedata`` once (about 0.3 s).
    \s is spelled out too: Python's own \s also matches the separators U+001C..U+001F, Unicode's does not.
    """
    members = {"L": [], "N": [], "Z": []}
    for cp in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(cp))[0]
        if cat in members:
            members[cat].append(cp)
    members["Z"] = sorted([*range(0x09, 0x0E), 0x85, *members["Z"]])  # \t \n \v \f \r, NEL, separators

    def ranges(cps):
        out, start, prev = [], cps[0], cps[0]
        for cp in cps[1:] + [-1]:
            if cp != prev + 1:
                out.append(re.escape(chr(start)) + ("" if start == prev else "-" + re.escape(chr(prev))))
                start = cp
            prev = cp
        return "".join(out)

    return {"L": ranges(members["L"]), "N": ranges(members["N"]), "S": ranges(members["Z"])}


# ----- checks ------------------------------------------------------------------------------------------

def _check_pretokenize(text, pre) -> None:
    validate.string("text", text, empty=True)
    _check_pre(pre)


def _check_pre(pre) -> None:
    """``pre`` must name a known pre-tokenizer (shared with :mod:`lmbook.tokenization`)."""
    validate.choice("pre", pre, PRETOKENIZERS)
