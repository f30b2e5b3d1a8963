"""Chapter 2: edit distance, the number of edits that turn one string into another.

- :func:`levenshtein` fills the dynamic-programming table D with (weighted) insertions, deletions and
  substitutions, and :func:`edit_table` returns the whole table so a chapter can print it;
- :func:`edit_alignment` walks back through the table and lists which edit happens where;
- :func:`osa_distance` adds the swap of two adjacent characters (optimal string alignment);
- :func:`suggest` is a small spelling corrector: candidates ranked by distance, then by frequency.

Strings and lists of tokens both work: the code only compares items with ``==``.
Conventions follow rapidfuzz: an *insertion* adds an item of ``b`` to ``a``, a *deletion* removes an item of
``a``; the distance is the cost of turning ``a`` into ``b``.

Left out on purpose: unrestricted Damerau-Levenshtein (edits on top of a swap), phonetic keys, keyboard-aware
costs, and the noisy-channel model that would rank candidates by P(typo | word) P(word).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from . import validate

__all__ = ["levenshtein", "edit_table", "edit_alignment", "osa_distance", "suggest", "Edit"]

Edit = namedtuple("Edit", ["op", "i", "j", "a_item", "b_item"])
Edit.__doc__ = """One step of an alignment: ``op`` is "match", "substitute", "delete" or "insert";
``i`` and ``j`` are positions in ``a`` and ``b`` (the item deleted from ``a`` at ``i``, or inserted from ``b``
at ``j``)."""


def edit_table(a, b, *, insert=1, delete=1, substitute=1) -> np.ndarray:
    """The Levenshtein table D, shape (len(a)+1, len(b)+1): D[i, j] is the cheapest edit of a[:i] into b[:j].

    D[i, 0] = i * delete, D[0, j] = j * insert, and
    D[i, j] = min(D[i-1, j] + delete,                                   (delete a[i-1])
                  D[i, j-1] + insert,                                   (insert b[j-1])
                  D[i-1, j-1] + (0 if a[i-1] == b[j-1] else substitute)) (match or substitute)
    ``a`` and ``b`` are strings or lists of tokens; the costs are numbers >= 0 (chapter 2).
    """
    _check_edit(a, b, insert=insert, delete=delete, substitute=substitute)
    D = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]  # Python lists: fast to index one cell at a time
    for i in range(len(a) + 1):
        D[i][0] = i * delete
    for j in range(len(b) + 1):
        D[0][j] = j * insert
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            diagonal = D[i - 1][j - 1] + (0 if a[i - 1] == b[j - 1] else substitute)
            D[i][j] = min(D[i - 1][j] + delete, D[i][j - 1] + insert, diagonal)
    return np.array(D, dtype=_table_dtype(insert, delete, substitute))


def levenshtein(a, b, *, insert=1, delete=1, substitute=1):
    """Edit distance from ``a`` to ``b``: the bottom-right cell of :func:`edit_table` (chapter 2).

    With unit costs this is the Levenshtein distance; ``substitute=2`` (a deletion plus an insertion)
    gives the insert/delete-only distance. Returns an int when all costs are ints.
    """
    D = edit_table(a, b, insert=insert, delete=delete, substitute=substitute)
    value = D[-1, -1]
    return int(value) if D.dtype.kind == "i" else float(value)


def edit_alignment(a, b, *, insert=1, delete=1, substitute=1) -> list[Edit]:
    """One cheapest alignment of ``a`` to ``b`` as a list of :class:`Edit` steps, left to right.

    Walks back from D[len(a), len(b)] choosing, in this order of preference, a match or substitution,
    a deletion, then an insertion, whenever that step is consistent with the table. The cost of the
    non-match steps equals :func:`levenshtein`. Other cheapest alignments may exist; this one is fixed.
    """
    D = edit_table(a, b, insert=insert, delete=delete, substitute=substitute)
    fits = lambda here, there, cost: math.isclose(here, there + cost, rel_tol=1e-9, abs_tol=1e-12)  # noqa: E731
    i, j, steps = len(a), len(b), []  # float costs: 6 * 0.1 != 0.5 + 0.1, so compare with a tolerance
    while i > 0 or j > 0:
        if i > 0 and j > 0:
            same = a[i - 1] == b[j - 1]
            if fits(D[i, j], D[i - 1, j - 1], 0 if same else substitute):
                steps.append(Edit("match" if same else "substitute", i - 1, j - 1, a[i - 1], b[j - 1]))
                i, j = i - 1, j - 1
                continue
        if i > 0 and (j == 0 or fits(D[i, j], D[i - 1, j], delete)):
            steps.append(Edit("delete", i - 1, j, a[i - 1], None))
            i -= 1
        else:
            steps.append(Edit("insert", i, j - 1, None, b[j - 1]))
            j -= 1
    return steps[::-1]


def osa_distance(a, b) -> int:
    """Optimal string alignment distance: Levenshtein plus the swap of two adjacent items, at cost 1 each.

    Adds D[i, j] = min(..., D[i-2, j-2] + 1) when a[i-1] == b[j-2] and a[i-2] == b[j-1]. No item may be
    edited again after a swap, so OSA("ca", "abc") = 3, whereas unrestricted Damerau-Levenshtein gives 2.
    ``a`` and ``b`` are strings or lists of tokens (chapter 2).
    """
    _check_edit(a, b)
    D = [[i + j if i == 0 or j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            D[i][j] = min(D[i - 1][j] + 1, D[i][j - 1] + 1, D[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                D[i][j] = min(D[i][j], D[i - 2][j - 2] + 1)  # swap the adjacent pair a[i-2], a[i-1]
    return int(D[-1][-1])


def suggest(word: str, word_counts: dict, k: int = 5, max_distance: int = 2, distance=levenshtein) -> list:
    """Spelling suggestions for ``word``: the ``k`` known words closest to it, as (word, distance, count).

    Ranked by distance, then by count in ``word_counts`` (more frequent first), then alphabetically, so
    ties are broken by frequency, as a unigram language model would. Words whose length differs from
    ``word``'s by more than ``max_distance`` are skipped without computing D: valid when every insertion and
    deletion costs at least 1, as in the default distances.
    ``distance(a, b)`` is any edit distance, e.g. :func:`osa_distance` (chapter 2).
    """
    _check_suggest(word, word_counts, k, max_distance, distance)
    found = []
    for candidate, count in word_counts.items():
        if abs(len(candidate) - len(word)) > max_distance:
            continue
        d = distance(word, candidate)
        if d <= max_distance:
            found.append((candidate, d, count))
    found.sort(key=lambda t: (t[1], -t[2], t[0]))
    return found[:k]


# ----- argument checks ---------------------------------------------------------------------------------

def _check_edit(a, b, **costs) -> None:
    for name, s in (("a", a), ("b", b)):
        if not isinstance(s, (str, list, tuple)):
            raise TypeError(f"{name} must be a str or a list/tuple of tokens, got {validate.describe(s)}")
    for name, cost in costs.items():
        validate.number(name, cost, low=0)  # the cost of one insertion, deletion or substitution


def _table_dtype(*costs):
    """int64 when every cost is an int (the distance is then an int), else float64."""
    return np.int64 if all(isinstance(c, (int, np.integer)) for c in costs) else np.float64


def _check_suggest(word, word_counts, k, max_distance, distance) -> None:
    validate.string("word", word)
    if not isinstance(word_counts, dict):
        raise TypeError(f"word_counts must be a dict {{word: count}}, got {validate.describe(word_counts)}")
    if not word_counts:
        raise ValueError("word_counts must be a non-empty dict {word: count} of known words")
    for known, n in word_counts.items():
        if not isinstance(known, str):
            raise TypeError(f"word_counts must map words (str) to counts, found the key {validate.describe(known)}")
        validate.number(f"word_counts[{known!r}]", n, low=0)
    validate.integer("k", k)
    validate.number("max_distance", max_distance, low=0)
    if not callable(distance):
        raise TypeError(f"distance must be a function distance(a, b), got {validate.describe(distance)}")
