"""Generation: SmolLM2-135M, greedy, a 128-token prompt and new tokens, lmbook's ``decoding.generate`` on
``lmbook.model`` against transformers' ``generate`` on the same GGUF weights.

Both use a KV cache (lmbook's ``kv_cache.KVCache``, transformers' DynamicCache); generation without one is
compared in bench_kv_cache.py. The contenders alternate within each repeat, so load from other processes
hits them alike; the figure that matters is the tokens/s ratio. Both produce the same tokens (checked).
"""

from __future__ import annotations

import os
import statistics
import time

import torch
from common import table
from lmbook import decoding
from lmbook.model import load_smollm2
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
    mask = torch.ones_like(ids)
    contenders = {
        "lmbook generate, KV cache": lambda: decoding.generate(ours, ids, NEW_TOKENS, use_cache=True),
        "transformers generate, KV cache": lambda: theirs.generate(
            ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False, use_cache=True,
            eos_token_id=None, pad_token_id=0),
    }
    times, outputs = {name: [] for name in contenders}, {}
    with torch.no_grad():
        for _ in range(REPEAT):
            for name, fn in contenders.items():
                start = time.perf_counter()
                outputs[name] = fn()
                times[name].append(time.perf_counter() - start)
    reference = outputs["transformers generate, KV cache"]
    rows = []
    base = NEW_TOKENS / statistics.median(times["transformers generate, KV cache"])
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
