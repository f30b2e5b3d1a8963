"""KV cache: SmolLM2-135M greedy generation with lmbook's KVCache, without it, and with transformers'
``generate`` (DynamicCache) on the same weights; and the tiny model's time per decoding step at three
positions.

transformers gets the weights of ``lmbook.model.load_smollm2()`` copied into a ``LlamaForCausalLM`` built
from a config object, so both run exactly the same float32 numbers. The cached contenders alternate within
each repeat, so load from other processes hits them alike. Generating all new tokens without a cache takes
many minutes on a busy CPU (step t is a full forward pass over t tokens), so that row times single steps at
evenly spaced positions, each exactly the pass uncached generation makes there, and sums the interpolated
step times over all positions; the table says so.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import torch
from common import alternate, cached_generators, table
from lmbook import data
from lmbook import model as M
from lmbook import pretrained as PT
from lmbook.kv_cache import KVCache
from lmbook.tokenization import BPETokenizer

PROMPT_TOKENS = int(os.environ.get("BENCH_PROMPT_TOKENS", "256"))
NEW_TOKENS = int(os.environ.get("BENCH_NEW_TOKENS", "256"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "2"))
UNCACHED_SAMPLES = 5  # timed uncached steps, evenly spaced over the new tokens
TINY_POSITIONS = (64, 512, 2048)


def transformers_copy(model):
    """A transformers LlamaForCausalLM holding the same weights as ``model`` (an lmbook Llama-style Transformer)."""
    import transformers
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    c = model.config
    config = transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff, num_hidden_layers=c.n_layers,
        num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads, max_position_embeddings=c.context_length,
        rms_norm_eps=c.norm_eps, rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
        tie_word_embeddings=c.tie_embeddings, attention_bias=False, mlp_bias=False)
    with torch.device("meta"):
        hf = transformers.LlamaForCausalLM(config)
    sd = model.state_dict()
    mapped = {"model.embed_tokens.weight": sd["tok_emb.weight"], "model.norm.weight": sd["final_norm.weight"],
              "lm_head.weight": sd["lm_head.weight"]}
    for i in range(c.n_layers):
        ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
        mapped[theirs + "input_layernorm.weight"] = sd[ours + "attn_norm.weight"]
        mapped[theirs + "post_attention_layernorm.weight"] = sd[ours + "ffn_norm.weight"]
        for p in ("q", "k", "v", "o"):
            mapped[theirs + f"self_attn.{p}_proj.weight"] = sd[ours + f"attn.{p}_proj.weight"]
        for p in ("gate", "up", "down"):
            mapped[theirs + f"mlp.{p}_proj.weight"] = sd[ours + f"ffn.{p}_proj.weight"]
    hf.load_state_dict(mapped, assign=True)
    if c.tie_embeddings:
        hf.tie_weights()
    hf.model.rotary_emb = LlamaRotaryEmbedding(config)  # its inv_freq buffer was made on "meta"
    return hf.eval()


def smollm2_rows() -> tuple[list[list], str]:
    ours = PT.load_smollm2()
    theirs = transformers_copy(ours)
    text_ids = BPETokenizer.from_gguf().encode(data.documents()["string-methods"])
    ids = torch.tensor([text_ids[:PROMPT_TOKENS]])
    contenders = cached_generators(ours, theirs, ids, NEW_TOKENS)
    with torch.no_grad():
        times, outputs = alternate(contenders, REPEAT)
        # uncached: step t (t = 0 .. NEW_TOKENS - 1) is one forward pass over PROMPT_TOKENS + t tokens
        full = outputs["lmbook generate(use_cache=True)"]
        steps = np.linspace(0, NEW_TOKENS - 1, UNCACHED_SAMPLES).round().astype(int)
        sampled = []
        for t in steps:
            runs = []
            for _ in range(REPEAT):
                start = time.perf_counter()
                ours(full[:, :PROMPT_TOKENS + t])
                runs.append(time.perf_counter() - start)
            sampled.append(statistics.median(runs))
    uncached_total = float(np.interp(np.arange(NEW_TOKENS), steps, sampled).sum())
    medians = {name: statistics.median(t) for name, t in times.items()}
    medians["lmbook generate(use_cache=False), estimated"] = uncached_total
    reference = outputs["transformers generate(use_cache=True)"]
    base = NEW_TOKENS / medians["transformers generate(use_cache=True)"]
    rows = []
    for name, seconds in medians.items():
        rate = NEW_TOKENS / seconds
        same = "yes" if torch.equal(outputs.get(name, reference), reference) else "NO"
        timed = f"{REPEAT} run(s) of {NEW_TOKENS}" if name in outputs else f"{UNCACHED_SAMPLES} steps x {REPEAT}"
        rows.append([name, timed, f"{seconds:.1f}", f"{rate:.2f}", f"{rate / base:.2f}",
                     same if name in outputs else "(same model)"])
    speedup = uncached_total / medians["lmbook generate(use_cache=True)"]
    return rows, f"lmbook cached vs uncached: **{speedup:.1f}x** faster"


def tiny_rows() -> list[list]:
    if PT.TINY_PATH.exists():
        tiny, _ = PT.load_tiny()
    else:  # the tiny model's shape; timings do not depend on the weights
        tiny = M.Transformer(M.TransformerConfig(vocab_size=2404, d_model=128, n_layers=3, n_heads=4)).eval()
    rows = []
    with torch.no_grad():
        for position in TINY_POSITIONS:
            generator = torch.Generator().manual_seed(0)
            ids = torch.randint(0, tiny.config.vocab_size, (1, position + 1), generator=generator)
            cached, uncached = [], []
            for _ in range(21):
                cache = KVCache.for_model(tiny, position + 1)
                tiny(ids[:, :position], cache=cache)
                start = time.perf_counter()
                tiny(ids[:, position:], cache=cache)
                cached.append(time.perf_counter() - start)
            for _ in range(5):
                start = time.perf_counter()
                tiny(ids)
                uncached.append(time.perf_counter() - start)
            rows.append([position, f"{1e3 * statistics.median(cached):.2f}", f"{1e3 * statistics.median(uncached):.1f}",
                         f"{statistics.median(uncached) / statistics.median(cached):.0f}"])
    return rows


def run() -> str:
    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    rows, speedup = smollm2_rows()
    tiny = tiny_rows()
    return (
        "## KV cache: cached vs uncached generation, lmbook vs transformers (SmolLM2-135M, greedy)\n\n"
        f"A {PROMPT_TOKENS}-token prompt from the manual, {NEW_TOKENS} new tokens, float32 on CPU, "
        f"{torch.get_num_threads()} thread(s), medians. Ratio: tokens/s relative to transformers `generate` with its "
        "DynamicCache on the same weights. The uncached row is estimated: it times single steps (full forward "
        f"passes) at {UNCACHED_SAMPLES} evenly spaced positions and sums the interpolated step times over all "
        f"{NEW_TOKENS} positions, because generating them all without a cache takes many minutes here. "
        f"{speedup}.\n\n"
        + table(["contender", "timed", "seconds", "tokens/s", "ratio", "same tokens"], rows)
        + "\n\nTiny model (3 layers, d = 128): time of one decoding step at a position, with the cache and "
        "without (a full forward pass), median of 21 and 5 runs.\n\n"
        + table(["position", "cached ms/token", "uncached ms/token", "uncached / cached"], tiny)
    )


if __name__ == "__main__":
    print(run())
