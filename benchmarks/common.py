"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeat`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternate(contenders: dict, repeat: int) -> tuple[dict, dict]:
    """Run every contender ``repeat`` times, alternating them within each round so that load from other
    processes hits them alike. Returns ({name: [seconds, ...]}, {name: its last output})."""
    times, outputs = {name: [] for name in contenders}, {}
    for _ in range(repeat):
        for name, fn in contenders.items():
            start = time.perf_counter()
            outputs[name] = fn()
            times[name].append(time.perf_counter() - start)
    return times, outputs


def cached_generators(ours, theirs, ids, new_tokens: int) -> dict:
    """Greedy generation of ``new_tokens`` after ``ids`` with a KV cache: lmbook's ``generate`` on ``ours``
    and transformers' ``generate`` (DynamicCache) on ``theirs``, the same weights."""
    from lmbook.decoding import generate

    mask = ids.new_ones(ids.shape)
    return {
        "lmbook generate(use_cache=True)": lambda: generate(ours, ids, new_tokens, use_cache=True),
        "transformers generate(use_cache=True)": lambda: theirs.generate(
            ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False, use_cache=True,
            eos_token_id=None, pad_token_id=0),
    }


def table(header: list[str], rows: list[list]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
