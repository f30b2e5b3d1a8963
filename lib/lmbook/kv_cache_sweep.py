"""The slow measurements behind chapter 7, run once and stored: ``make kv-cache-data``
(``python -m lmbook.kv_cache_sweep``) writes ``data/smollm2_kv_cache.json.gz``.

On SmolLM2-135M (float32, CPU, ``LMBOOK_THREADS`` threads, default 1: on a shared CPU a second thread
mostly waits for the first):

- ``timing``: greedy decoding after a 16-token prompt, the wall time of every step, with the KV cache
  (512 steps, median of 3 runs) and without it (128 steps, median of 2 runs, plus single forward passes
  at longer lengths); and prefill of 256 tokens against 256 decode steps;
- ``streaming``: the loss of every token of 1,536 tokens of the manual's "string-methods" page (not in
  the tiny model's training split) read through a full cache, a 256-slot sliding window, 4 attention
  sinks + a 252-slot window (the same memory), and an int8 cache; and the int8 cache's logit error.

Timings depend on the machine and its load: the chapter uses their growth with length (fitted
exponents, ratios), not their absolute values. Takes about an hour on a busy CPU; each part (and each
cache of ``streaming``) is saved as soon as it is done, and a re-run skips the caches already stored.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from . import data
from .kv_cache import Int8KVCache, KVCache, RollingKVCache, cached_nll
from .model import load_smollm2
from .tokenization import BPETokenizer

SWEEP_PATH = Path(__file__).parent / "data" / "smollm2_kv_cache.json.gz"
DOCUMENT = "string-methods"  # a page of the manual's validation split
PROMPT_TOKENS, CACHED_STEPS, UNCACHED_STEPS = 16, 512, 128
UNCACHED_LENGTHS = (256, 384, 512)  # single full passes beyond the uncached run
PREFILL_TOKENS = 256
STREAM_TOKENS, CACHE_SLOTS, N_SINKS = 1536, 256, 4


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@torch.no_grad()
def step_times(model, prompt: torch.Tensor, n_steps: int, use_cache: bool) -> list[float]:
    """Wall time of each of ``n_steps`` greedy decode steps after ``prompt`` (1, P); step i feeds position
    P + i - 1 (cached: one token; uncached: the whole sequence so far). The prefill is not included."""
    ids = prompt
    cache = KVCache.for_model(model, prompt.shape[1] + n_steps) if use_cache else None
    next_id = model(ids, cache=cache)[:, -1].argmax(-1, keepdim=True)  # prefill (cached) or first pass
    times = []
    for _ in range(n_steps):
        ids = torch.cat([ids, next_id], dim=1)
        start = time.perf_counter()
        logits = model(next_id, cache=cache) if use_cache else model(ids)
        times.append(time.perf_counter() - start)
        next_id = logits[:, -1].argmax(-1, keepdim=True)
    return times


def timing(model, text_ids: torch.Tensor) -> dict:
    prompt = text_ids[None, :PROMPT_TOKENS]
    cached = [step_times(model, prompt, CACHED_STEPS, use_cache=True) for _ in range(3)]
    uncached = [step_times(model, prompt, UNCACHED_STEPS, use_cache=False) for _ in range(2)]
    long_ids = text_ids[None, :max(UNCACHED_LENGTHS)]
    with torch.no_grad():
        single = {n: statistics.median(_seconds(lambda n=n: model(long_ids[:, :n])) for _ in range(2))
                  for n in UNCACHED_LENGTHS}
        prefill_ids = text_ids[None, :PREFILL_TOKENS]
        prefill = statistics.median(
            _seconds(lambda: model(prefill_ids, cache=KVCache.for_model(model, PREFILL_TOKENS))) for _ in range(3))
    return {
        "prompt_tokens": PROMPT_TOKENS,
        # step i of a run produces the token after position PROMPT_TOKENS + i: it attends to that many keys
        "cached_positions": list(range(PROMPT_TOKENS + 1, PROMPT_TOKENS + CACHED_STEPS + 1)),
        "cached_seconds": [round(statistics.median(ts), 5) for ts in zip(*cached, strict=True)],
        "uncached_positions": list(range(PROMPT_TOKENS + 1, PROMPT_TOKENS + UNCACHED_STEPS + 1))
        + list(UNCACHED_LENGTHS),
        "uncached_seconds": [round(statistics.median(ts), 5) for ts in zip(*uncached, strict=True)]
        + [round(single[n], 5) for n in UNCACHED_LENGTHS],
        "prefill_tokens": PREFILL_TOKENS, "prefill_seconds": round(prefill, 4),
    }


def streaming(model, text_ids: torch.Tensor, done: dict, save) -> dict:
    """Fill ``done`` (the stored "streaming" part, possibly partial) cache by cache, calling save() after each."""
    ids = text_ids[:STREAM_TOKENS]
    settings = {"tokens": STREAM_TOKENS, "cache_slots": CACHE_SLOTS, "n_sinks": N_SINKS}
    if {k: done.get(k) for k in settings} != settings:
        done.clear()
    done.update(settings)
    done.setdefault("nll", {})
    done.setdefault("seconds", {})
    caches = {
        "full cache": lambda: KVCache.for_model(model, STREAM_TOKENS),
        f"window {CACHE_SLOTS}": lambda: RollingKVCache.for_model(model, window=CACHE_SLOTS),
        f"{N_SINKS} sinks + window {CACHE_SLOTS - N_SINKS}": lambda: RollingKVCache.for_model(
            model, window=CACHE_SLOTS - N_SINKS, n_sinks=N_SINKS),
        "int8 cache": lambda: Int8KVCache.for_model(model, STREAM_TOKENS),
    }
    for name, make in caches.items():
        if name in done["nll"]:
            continue
        start = time.perf_counter()
        nll = cached_nll(model, ids, make()).tolist()
        done["nll"][name] = [round(x, 4) for x in nll]
        done["seconds"][name] = round(time.perf_counter() - start, 1)
        print(f"  {name}: mean loss {sum(nll) / len(nll):.4f} nats ({done['seconds'][name]} s)", flush=True)
        save()
    done["nll"] = {name: done["nll"][name] for name in caches}  # in the order above
    with torch.no_grad():  # int8 against float32 keys and values, on the logits themselves
        exact = model(ids[None, :512])[0]
        rounded = model(ids[None, :512], cache=Int8KVCache.for_model(model, 512))[0]
    err = (rounded - exact).abs()
    done["int8_logits"] = {"positions": 512, "max_abs_error": round(err.max().item(), 4),
                           "mean_abs_error": round(err.mean().item(), 5),
                           "max_abs_logit": round(exact.abs().max().item(), 2),
                           "same_argmax": round((rounded.argmax(-1) == exact.argmax(-1)).float().mean().item(), 4)}
    return done


def load_sweep(path: str | Path = SWEEP_PATH) -> dict:
    """The stored measurements: {"machine": ..., "timing": ..., "streaming": ...} (see the module docstring)."""
    return json.loads(gzip.decompress(Path(path).read_bytes()))


def make_sweep(path: str | Path = SWEEP_PATH, parts=("streaming", "timing")) -> dict:
    """Run the measurements named in ``parts`` and save them (other parts already in the file are kept)."""
    path = Path(path)
    blob = load_sweep(path) if path.exists() else {}

    def save():
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(json.dumps(blob).encode("utf-8"))

    model, tokenizer = load_smollm2(), BPETokenizer.from_gguf()
    text_ids = torch.tensor(tokenizer.encode(data.documents()[DOCUMENT]))
    blob["machine"] = {"threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
                       "torch": torch.__version__, "document": DOCUMENT}
    for part in parts:
        print(f"{part} ...", flush=True)
        if part == "streaming":
            blob["streaming"] = streaming(model, text_ids, blob.get("streaming", {}), save)
        else:
            blob[part] = {"timing": timing}[part](model, text_ids)
        save()
    return blob


if __name__ == "__main__":  # make kv-cache-data
    import sys

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    make_sweep(parts=tuple(sys.argv[1:]) or ("streaming", "timing"))
    print(f"wrote {SWEEP_PATH}")
