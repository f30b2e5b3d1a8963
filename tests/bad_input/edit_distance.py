"""Bad-input cases for lmbook.edit_distance (chapter 2): Levenshtein and OSA distances, spelling suggestions."""

from lmbook import edit_distance as ed

from ._case import Case


def _pair(**costs):
    return {"a": "kitten", "b": "sitting", **costs}


COSTS = {"insert": 1.0, "delete": 1.0, "substitute": 2.0}
SEQUENCE_KINDS = ("bytes", "none")  # any str, and any list of tokens, is a sequence to edit: drive the others
FREE_COSTS = {name: {"zero"} for name in COSTS}  # a free edit (cost 0) is documented: costs are numbers >= 0

CASES = [
    Case(fn.__name__, lambda fn=fn: (fn, _pair(**COSTS)), ok=FREE_COSTS,
         kinds={"a": SEQUENCE_KINDS, "b": SEQUENCE_KINDS})
    for fn in (ed.levenshtein, ed.edit_table, ed.edit_alignment)
] + [
    Case("osa_distance", lambda: (ed.osa_distance, _pair()), kinds={"a": SEQUENCE_KINDS, "b": SEQUENCE_KINDS}),
    Case("suggest",
         lambda: (ed.suggest, {"word": "carr", "word_counts": {"car": 5, "cart": 2, "care": 1, "bus": 9}, "k": 2,
                               "max_distance": 2.0, "distance": ed.osa_distance}),
         kinds={"word": ("list", "none", "empty", "bytes")},  # any other str is a word to correct
         ok={"max_distance": {"zero"}}),  # max_distance 0 is documented: only the word itself, if known
]

SKIP = {"Edit": "a namedtuple record that edit_alignment returns (op, positions, items); it validates nothing "
                "because it is only ever built by edit_alignment from checked input"}
