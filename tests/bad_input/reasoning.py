"""Bad-input cases for lmbook.reasoning (chapter 17): problems, formats, the vocabulary, the verifier, voting."""

from lmbook import reasoning as R

from ._case import Case

ZERO_OK = {"zero"}  # 0 is a valid operand (documented: operands are ints >= 0)
FREE_TEXT = ("list", "none", "bytes")  # any str is a completion: unknown or empty text is read as malformed

CASES = [
    Case("make_problems", lambda: (R.make_problems, {"n": 4, "digits": 3, "seed": 1}), ok={"seed": ZERO_OK}),
    Case("prompt", lambda: (R.prompt, {"a": 12, "b": 34}), ok={"a": ZERO_OK, "b": ZERO_OK}),
    Case("scratchpad", lambda: (R.scratchpad, {"a": 12, "b": 34}), ok={"a": ZERO_OK, "b": ZERO_OK}),
    Case("target", lambda: (R.target, {"a": 12, "b": 34, "fmt": "scratchpad"}), ok={"a": ZERO_OK, "b": ZERO_OK}),
    Case("encode", lambda: (R.encode, {"text": "12+34="}), kinds={"text": ("unknown", "list", "none", "bytes")}),
    Case("decode", lambda: (R.decode, {"ids": [2, 3, 11, 4]}),
         ok={"ids": {"empty"}}),  # documented: no ids decode to ""
    Case("encode_examples", lambda: (R.encode_examples, {"problems": [(1, 2), (30, 4)], "fmt": "reversed"})),
    Case("parse_answer", lambda: (R.parse_answer, {"completion": "46.", "fmt": "answer"}),
         kinds={"completion": FREE_TEXT}),
    Case("reward", lambda: (R.reward, {"completion": "46.", "a": 12, "b": 34, "fmt": "answer"}),
         ok={"a": ZERO_OK, "b": ZERO_OK}, kinds={"completion": FREE_TEXT}),
    Case("majority_vote", lambda: (R.majority_vote, {"answers": [46, 45, 46]}),  # no "huge_item": a sum of
         kinds={"answers": ("plain_str", "single", "float_item", "negative_item", "empty", "none")}),  # any size
    Case("best_of_n", lambda: (R.best_of_n, {"completions": ["46.", "45."],
                                             "verifier": lambda c: R.reward(c, 12, 34)})),
    Case("pass_at_k", lambda: (R.pass_at_k, {"n": 10, "c": 3, "k": 4}), ok={"c": ZERO_OK}),
]

SKIP = {}
