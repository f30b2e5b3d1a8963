"""The slow measurements behind chapter 11, run once and stored: ``make kv-cache-data``
(``python -m lmbook.experiments.kv_cache_sweep``) writes ``data/smollm2_kv_cache.json.gz``.

On SmolLM2-135M (float32, CPU, ``LMBOOK_THREADS`` threads, default 1: on a shared CPU a second thread
mostly waits for the first):

- ``timing``: the wall time of one decoding step at positions 16 .. 1024 with the KV cache and 16 .. 512
  without it (medians of 5 rounds), the total time of greedy generation of 8 .. 128 tokens after a
  16-token prompt with ``generate(use_cache=True)`` and without (medians of 2 rounds), and the prefill of
  256 tokens against one decoding step at that length;
- ``streaming``: the loss of every token of 1,536 tokens of the manual's "string-methods" page (not in
  the tiny model's training split) read through a full cache, a 256-slot sliding window, 4 attention
  sinks + a 252-slot window (the same memory), and an int8 cache; and the int8 cache's logit error;
- ``cpu_time`` (``python -m lmbook.experiments.kv_cache_sweep cpu_time``, about two minutes): the cached step
  at positions 256 .. 1024 again, timed by the wall clock and by the CPU time of the thread, once after a real
  prefill (as ``timing``) and once with a cache filled with random numbers (no prefill), in interleaved rounds;
- ``step_cpu`` (``python -m lmbook.experiments.kv_cache_sweep step_cpu``, about two CPU-minutes): the thread's
  CPU time (and the wall time) of one step at positions 16 .. 512, cached, uncached as in ``timing``, and
  uncached scoring the last position only (``last_only=True``), medians of 5 shuffled rounds.

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

from .. import data
from ..decoding import generate
from ..kv_cache import Int8KVCache, KVCache, RollingKVCache, cached_nll
from ..pretrained import load_smollm2
from ..tokenization import BPETokenizer

SWEEP_PATH = Path(__file__).resolve().parents[1] / "data" / "smollm2_kv_cache.json.gz"
DOCUMENT = "string-methods"  # a page of the manual's validation split
PROMPT_TOKENS = 16  # the prompt of the total-time runs
CACHED_POSITIONS = (16, 32, 64, 128, 256, 512, 1024)  # per-token times with the cache ...
UNCACHED_POSITIONS = (16, 32, 64, 128, 256, 512)  # ... and without it
TOTAL_LENGTHS = (8, 16, 32, 64, 128)  # new tokens of the total-time runs
ROUNDS, TOTAL_ROUNDS = 5, 2
PREFILL_TOKENS = 256
STREAM_TOKENS, CACHE_SLOTS, N_SINKS = 1536, 256, 4


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@torch.no_grad()
def step_seconds(model, ids: torch.Tensor, position: int, use_cache: bool, steps: int = 3) -> float:
    """Median wall time of a decoding step whose new token attends to ``position`` keys (itself included):
    with the cache, one token after a (not timed) prefill of position - 1 tokens, for ``steps`` consecutive
    positions; without it, one full forward pass over ``position`` tokens, which also runs the output layer at
    every position (a fair baseline would pass last_only=True). ids: (1, >= position + steps)."""
    if not use_cache:
        return _seconds(lambda: model(ids[:, :position]))
    cache = KVCache.for_model(model, position + steps)
    model(ids[:, :position - 1], cache=cache)
    return statistics.median(_seconds(lambda t=t: model(ids[:, t:t + 1], cache=cache))
                             for t in range(position - 1, position - 1 + steps))


def timing(model, text_ids: torch.Tensor) -> dict:
    """Per-token and total times, measured in rounds: each round visits every setting once (in a shuffled
    order), so that a change of the machine's load during the sweep hits all settings alike."""
    ids = text_ids[None, :max(CACHED_POSITIONS) + 8]
    g = torch.Generator().manual_seed(0)
    settings = [("cached", p) for p in CACHED_POSITIONS] + [("uncached", p) for p in UNCACHED_POSITIONS]
    per_token = {s: [] for s in settings}
    for _ in range(ROUNDS):
        for i in torch.randperm(len(settings), generator=g).tolist():
            kind, position = settings[i]
            per_token[settings[i]].append(step_seconds(model, ids, position, kind == "cached"))
    prompt = text_ids[None, :PROMPT_TOKENS]
    runs = [(n, use_cache) for n in TOTAL_LENGTHS for use_cache in (True, False)]
    totals = {r: [] for r in runs}
    prefill, decode = [], []
    for _ in range(TOTAL_ROUNDS):
        for i in torch.randperm(len(runs), generator=g).tolist():
            n, use_cache = runs[i]
            totals[runs[i]].append(_seconds(lambda n=n, c=use_cache: generate(model, prompt, n, use_cache=c)))
        for _ in range(2):  # prefill of PREFILL_TOKENS tokens against one decoding step at that length
            prefill.append(_seconds(lambda: model(ids[:, :PREFILL_TOKENS], cache=KVCache.for_model(
                model, PREFILL_TOKENS))))
            decode.append(step_seconds(model, ids, PREFILL_TOKENS, use_cache=True))

    def median(values):
        return round(statistics.median(values), 5)

    return {
        "rounds": ROUNDS, "positions_cached": list(CACHED_POSITIONS), "positions_uncached": list(UNCACHED_POSITIONS),
        "seconds_cached": [median(per_token[("cached", p)]) for p in CACHED_POSITIONS],
        "seconds_uncached": [median(per_token[("uncached", p)]) for p in UNCACHED_POSITIONS],
        "prompt_tokens": PROMPT_TOKENS, "total_rounds": TOTAL_ROUNDS, "lengths": list(TOTAL_LENGTHS),
        "total_cached": [median(totals[(n, True)]) for n in TOTAL_LENGTHS],
        "total_uncached": [median(totals[(n, False)]) for n in TOTAL_LENGTHS],
        "prefill_tokens": PREFILL_TOKENS, "prefill_seconds": median(prefill), "decode_seconds": median(decode),
    }


CPU_POSITIONS = (256, 384, 512, 768, 1024)


@torch.no_grad()
def cpu_time(model, text_ids: torch.Tensor, rounds: int = 5) -> dict:
    """Wall and thread-CPU time of one cached step at CPU_POSITIONS, after a real prefill and after filling the
    cache with random numbers: the same arithmetic (the step's cost does not depend on the values)."""
    ids = text_ids[None, :max(CPU_POSITIONS) + 1]
    found = {(kind, p, clock): [] for kind in ("prefill", "random") for p in CPU_POSITIONS
             for clock in ("wall", "cpu")}
    for _ in range(rounds):
        for p in CPU_POSITIONS:
            for kind in ("prefill", "random"):
                cache = KVCache.for_model(model, p)
                if kind == "prefill":
                    model(ids[:, :p - 1], cache=cache)
                else:
                    cache.keys.normal_(), cache.values.normal_()
                    cache.lengths = [p - 1] * cache.n_layers
                wall, cpu = time.perf_counter(), time.thread_time()
                model(ids[:, p - 1:p], cache=cache)
                found[kind, p, "cpu"].append(time.thread_time() - cpu)
                found[kind, p, "wall"].append(time.perf_counter() - wall)
    return {"rounds": rounds, "positions": list(CPU_POSITIONS),
            **{f"{kind}_{clock}": [round(statistics.median(found[kind, p, clock]), 5) for p in CPU_POSITIONS]
               for kind in ("prefill", "random") for clock in ("wall", "cpu")}}


STEP_KINDS = ("cached", "uncached", "uncached_last")  # the cached step; a full pass; a full pass scoring the last


@torch.no_grad()
def step_cpu(model, text_ids: torch.Tensor, rounds: int = 5) -> dict:
    """Thread-CPU and wall time of one step at UNCACHED_POSITIONS, three ways (STEP_KINDS): the cached step after
    a (not timed) prefill, the uncached full pass of ``timing`` (output layer at every position), and the fair
    uncached pass (last_only=True). Rounds visit every setting once, in a shuffled order; medians are stored."""
    ids = text_ids[None, :max(UNCACHED_POSITIONS)]
    settings = [(kind, p) for kind in STEP_KINDS for p in UNCACHED_POSITIONS]
    found = {(s, clock): [] for s in settings for clock in ("wall", "cpu")}
    g = torch.Generator().manual_seed(1)
    for _ in range(rounds):
        for i in torch.randperm(len(settings), generator=g).tolist():
            kind, p = settings[i]
            if kind == "cached":
                cache = KVCache.for_model(model, p)
                model(ids[:, :p - 1], cache=cache)
                step = lambda p=p, c=cache: model(ids[:, p - 1:p], cache=c)  # noqa: E731
            else:
                step = lambda p=p, last=kind == "uncached_last": model(ids[:, :p], last_only=last)  # noqa: E731
            wall, cpu = time.perf_counter(), time.thread_time()
            step()
            found[settings[i], "cpu"].append(time.thread_time() - cpu)
            found[settings[i], "wall"].append(time.perf_counter() - wall)
    return {"rounds": rounds, "positions": list(UNCACHED_POSITIONS),
            **{f"{kind}_{clock}": [round(statistics.median(found[(kind, p), clock]), 5) for p in UNCACHED_POSITIONS]
               for kind in STEP_KINDS for clock in ("wall", "cpu")}}


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
            blob[part] = {"timing": timing, "cpu_time": cpu_time, "step_cpu": step_cpu}[part](model, text_ids)
        save()
    return blob


if __name__ == "__main__":  # make kv-cache-data
    import sys

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    make_sweep(parts=tuple(sys.argv[1:]) or ("streaming", "timing"))
    print(f"wrote {SWEEP_PATH}")
