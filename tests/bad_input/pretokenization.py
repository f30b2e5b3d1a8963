"""Bad-input cases for lmbook.pretokenization (chapter 5): byte stand-ins and the pre-tokenizer regexes."""

from lmbook.pretokenization import pretokenize

from ._case import Case

FREE_TEXT = ("list", "none", "bytes")  # any str is valid text, so "unknown" is not a mistake; "" gives []

CASES = [
    Case("pretokenize", lambda: (pretokenize, {"text": "Hello world!! 2024", "pre": "smollm"}),
         kinds={"text": FREE_TEXT}),
]

SKIP = {"bytes_to_unicode": "takes no arguments", "byte_order": "takes no arguments"}
