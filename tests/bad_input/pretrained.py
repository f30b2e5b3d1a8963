"""Bad-input cases for lmbook.pretrained (chapter 9): the tiny model, SmolLM2's GGUF file, its chat template."""

import torch
from lmbook import pretrained as PT

from ._case import Case


def _gguf_path():
    from lmbook.tokenization import smollm2_gguf_path

    return str(smollm2_gguf_path())


FREE_TEXT_OK = {"unknown"}  # a chat message or system prompt is free text: any string is documented input

CASES = [
    Case("word_corpus", lambda: (PT.word_corpus, {"min_count": 2})),
    Case("tiny_config", lambda: (PT.tiny_config, {"vocab_size": 100})),
    Case("load_tiny", lambda: (PT.load_tiny, {"path": str(PT.TINY_PATH)})),
    Case("cache_dir", lambda: (PT.cache_dir, {})),
    Case("interleaved_to_half_rows",
         lambda: (PT.interleaved_to_half_rows, {"w": torch.randn(8, 3, generator=torch.Generator().manual_seed(0)),
                                                "n_heads": 2})),
    Case("gguf_to_state_dict", lambda: (PT.gguf_to_state_dict, {"path": _gguf_path()})),
    Case("load_smollm2", lambda: (PT.load_smollm2, {"device": "cpu", "dtype": torch.float32, "use_cache": True})),
    Case("smollm2_chat", lambda: (PT.smollm2_chat, {"message": "What is 2 + 2?", "system": PT.SMOLLM2_SYSTEM}),
         ok={"message": FREE_TEXT_OK, "system": FREE_TEXT_OK}),
]

SKIP = {}
