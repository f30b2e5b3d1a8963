"""Bad-input cases for lmbook.gguf_tokenizer (chapter 5): SmolLM2's tokenizer read from its GGUF file."""

from lmbook.gguf_tokenizer import read_gguf_tokenizer, smollm2_gguf_path

from ._case import Case

CASES = [
    # every bad path fails before the file is read, so the valid call is never made
    Case("read_gguf_tokenizer", lambda: (read_gguf_tokenizer, {"path": str(smollm2_gguf_path())}),
         kinds={"path": ("unknown", "list", "none", "empty", "bytes")}),
]

SKIP = {"smollm2_gguf_path": "takes no arguments"}
