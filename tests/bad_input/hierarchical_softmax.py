"""Bad-input cases for lmbook.hierarchical_softmax (chapter 6): Huffman codes and the tree's log-probability."""

import torch
from lmbook.hierarchical_softmax import hierarchical_softmax_log_prob, huffman_code

from ._case import Case

COUNTS = [50, 20, 20, 5, 3, 1, 1]


def _inputs():
    paths, codes = huffman_code(COUNTS)
    g = torch.Generator().manual_seed(0)
    # all 7 words: every inner node lies on some path, so a NaN anywhere in node_vectors is read
    return {"h": torch.randn(7, 4, generator=g), "node_vectors": torch.randn(6, 4, generator=g),
            "paths": paths, "codes": codes}


CASES = [
    Case("huffman_code", lambda: (huffman_code, {"counts": list(COUNTS)}),
         kinds={"counts": ("plain_str", "single", "float_item", "negative_item", "empty", "none")}),  # counts
    Case("hierarchical_softmax_log_prob", lambda: (hierarchical_softmax_log_prob, _inputs())),
]

SKIP = {}
