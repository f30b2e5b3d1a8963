"""Generation: SmolLM2-135M, greedy, a 128-token prompt and new tokens, lmbook's ``decoding.generate`` on
``lmbook.model`` against transformers' ``generate`` on the same GGUF weights.

Both use a KV cache (lmbook's ``kv_cache.KVCache``, transformers' DynamicCache); generation without one is
compared in bench_kv_cache.py. The contenders alternate within each repeat, so load from other processes
hits them alike; the figure that matters is the tokens/s ratio. Both produce the same tokens (checked).
"""

from __future__ import annotations

import os
import statistics

import torch
from common import alternate, cached_generators, table
from lmbook.pretrained import load_smollm2
from lmbook.tokenization import smollm2_gguf_path

PROMPT_TOKENS = int(os.environ.get("BENCH_PROMPT_TOKENS", "128"))
NEW_TOKENS = int(os.environ.get("BENCH_NEW_TOKENS", "128"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def run() -> str:
    import transformers

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    ours = load_smollm2()
    path = smollm2_gguf_path()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                               dtype=torch.float32).eval()
    ids = torch.randint(100, 49152, (1, PROMPT_TOKENS), generator=torch.Generator().manual_seed(0))
    contenders = cached_generators(ours, theirs, ids, NEW_TOKENS)
    with torch.no_grad():
        times, outputs = alternate(contenders, REPEAT)
    reference = outputs["transformers generate(use_cache=True)"]
    rows = []
    base = NEW_TOKENS / statistics.median(times["transformers generate(use_cache=True)"])
    for name, t in times.items():
        rate = NEW_TOKENS / statistics.median(t)
        same = torch.equal(outputs[name], reference)
        rows.append([name, f"{statistics.median(t):.1f}", f"{rate:.2f}", f"{rate / base:.2f}", "yes" if same else "NO"])
    return (
        "## Generation: lmbook vs transformers (SmolLM2-135M, greedy)\n\n"
        f"A {PROMPT_TOKENS}-token prompt, {NEW_TOKENS} new tokens, float32 on CPU, {torch.get_num_threads()} "
        f"thread(s), median of {REPEAT} run(s). Ratio: tokens/s relative to transformers with its KV cache.\n\n"
        + table(["contender", "seconds", "tokens/s", "ratio", "same tokens"], rows)
    )


if __name__ == "__main__":
    print(run())
