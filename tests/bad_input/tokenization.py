"""Bad-input cases for lmbook.tokenization (chapter 5): BPE training and the byte-level BPE tokenizer."""

import functools

from lmbook.gguf_tokenizer import smollm2_gguf_path
from lmbook.tokenization import BPETokenizer, learn_merges, learn_merges_naive, merge_pair

from ._case import Case

FREE_TEXT = ("list", "none", "bytes")  # any str is valid text ("unknown" too)
COUNTS = ("plain_str", "single", "float_item", "negative_item", "empty", "none")  # counts, not ids: no upper bound


@functools.cache
def _trained() -> BPETokenizer:
    return BPETokenizer.train("hello hello world, hello there", 262)


def _toy():
    """Three words over the alphabet a, b, c as ids, their counts, and the spelling of each id."""
    return {"words": [[0, 1, 2], [0, 1], [1, 2, 1, 2]], "counts": [3, 2, 1], "token_bytes": [b"a", b"b", b"c"],
            "vocab_size": 6, "min_frequency": 1}


CASES = [
    Case("merge_pair", lambda: (merge_pair, {"ids": [0, 1, 2, 0, 1], "pair": (0, 1), "new_id": 9}),
         ok={"ids": {"empty",  # documented (and a case of the chapter's check): an empty list stays empty
                     "huge_item"},  # ids have no upper bound: merge_pair knows no vocabulary
             "pair": {"huge_item"}}),  # a pair that does not occur leaves ids unchanged, as documented
    Case("learn_merges", lambda: (learn_merges, _toy()), kinds={"counts": COUNTS}),
    Case("learn_merges_naive", lambda: (learn_merges_naive, _toy()), kinds={"counts": COUNTS}),
    Case("BPETokenizer", lambda: (BPETokenizer, {"vocab": dict(_trained().vocab), "merges": dict(_trained().merges),
                                                 "pre": "gpt2", "special_tokens": {}}),
         ok={"merges": {"empty"},  # no merges is the plain byte-level tokenizer
             "special_tokens": {"empty"}}),  # no special tokens is the default
    Case("BPETokenizer.train", lambda: (BPETokenizer.train, {"text": "hello hello world", "vocab_size": 260,
                                                             "min_frequency": 2, "pre": "gpt2", "naive": False}),
         kinds={"text": ("list", "none", "bytes", "empty")}),  # an empty text has nothing to learn from
    Case("BPETokenizer.from_gguf", lambda: (BPETokenizer.from_gguf, {"path": str(smollm2_gguf_path())}),
         kinds={"path": ("unknown", "list", "empty", "bytes")}),  # every one fails before the file is read
    Case("BPETokenizer.encode", lambda: (_trained().encode, {"text": "hello world"}), kinds={"text": FREE_TEXT}),
    Case("BPETokenizer.tokens", lambda: (_trained().tokens, {"text": "hello world"}), kinds={"text": FREE_TEXT}),
    Case("BPETokenizer.decode_bytes", lambda: (_trained().decode_bytes, {"ids": [72, 69, 76, 76]}),
         ok={"ids": {"empty"}}),  # no ids spell no bytes: b""
    Case("BPETokenizer.decode", lambda: (_trained().decode, {"ids": [72, 69, 76, 76], "errors": "replace"}),
         ok={"ids": {"empty"}}),  # no ids spell ""
]

SKIP = {}
