"""Paged KV cache: the tiny model's greedy decoding step with lmbook's PagedKVCache (blocks of 4, 16, 64
tokens) against the contiguous KVCache, at three cache lengths.

The paged cache's ``update`` gathers every stored key and value out of the blocks into a contiguous copy
(PagedAttention's kernel reads the blocks in place instead), so its step costs more; the table shows how
much. The contenders alternate within each repeat, so load from other processes hits them alike; the
median of the repeats is reported.
"""

from __future__ import annotations

import os
import statistics

import torch
from common import alternate, table
from lmbook import pretrained as PT
from lmbook.kv_cache import KVCache
from lmbook.paged_cache import BlockPool, PagedKVCache

REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
STEPS = 16  # decoding steps timed per contender and repeat
LENGTHS = (32, 64, 110)  # cached tokens before the timed steps (the tiny model's context is 128)


@torch.no_grad()
def _stepper(model, make_cache, ids, n_cached):
    cache = make_cache()
    model(ids[None, :n_cached], cache=cache)

    def run():  # STEPS decoding steps, then back to n_cached tokens for the next repeat
        for t in range(n_cached, n_cached + STEPS):
            model(ids[None, t:t + 1], cache=cache)
        cache.crop(n_cached)
    return run


def main():
    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    model, _ = PT.load_tiny()
    ids = torch.randint(0, model.config.vocab_size, (128,), generator=torch.Generator().manual_seed(0))
    rows = []
    for n in LENGTHS:
        contenders = {"KVCache": _stepper(model, lambda: KVCache.for_model(model, 128), ids, n)}
        for bs in (4, 16, 64):
            pool = BlockPool.for_model(model, n_blocks=128 // bs + 1, block_size=bs)
            contenders[f"paged, block {bs}"] = _stepper(model, lambda pool=pool: PagedKVCache(pool), ids, n)
        times, _ = alternate(contenders, REPEAT)
        base = statistics.median(times["KVCache"])
        for name, ts in times.items():
            ms = statistics.median(ts) / STEPS * 1e3
            rows.append([n, name, f"{ms:.2f}", f"{statistics.median(ts) / base:.2f}"])
    print(table(["cached tokens", "cache", "ms per step", "vs KVCache"], rows))


if __name__ == "__main__":
    main()
