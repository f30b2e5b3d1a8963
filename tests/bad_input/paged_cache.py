"""Bad-input cases for lmbook.paged_cache (chapter 11): the block pool, the paged cache, prefix caching and
the memory count."""

import torch
from lmbook import model as M
from lmbook import paged_cache as P

from ._case import Case


def _model():
    torch.manual_seed(0)
    return M.Transformer(M.TransformerConfig(vocab_size=11, context_length=16, d_model=8, n_layers=2, n_heads=2,
                                             n_kv_heads=1)).eval()


SIZES = {"n_layers": 2, "n_kv_heads": 1, "head_dim": 4, "n_blocks": 6, "block_size": 2, "dtype": torch.float32,
         "device": "cpu"}


def _pool():
    return P.BlockPool(**SIZES)


def _used_pool():
    """A pool whose block 0 is in use and block 1 is cached but released."""
    pool = _pool()
    pool.allocate(), pool.allocate()
    pool.register(123, 1)
    pool.release(1)
    return pool


def _kv():
    return torch.randn(1, 1, 3, 4, generator=torch.Generator().manual_seed(0))  # (1, H_kv, T, d)


IDS_KINDS = ("plain_str", "float_item", "negative_item", "empty", "none")  # no vocabulary: any id >= 0 is valid

CASES = [
    Case("BlockPool", lambda: (P.BlockPool, dict(SIZES))),
    Case("BlockPool.for_model", lambda: (P.BlockPool.for_model, {"model": _model(), "n_blocks": 4, "block_size": 2})),
    Case("BlockPool.share", lambda: (_used_pool().share, {"block": 1}), ok={"block": {"zero"}}),  # 0 is in use
    Case("BlockPool.release", lambda: (_used_pool().release, {"block": 0})),
    Case("BlockPool.register", lambda: (_used_pool().register, {"prefix_hash": 7, "block": 0}),
         ok={"prefix_hash": {"negative", "zero"}}),  # any int is a hash
    Case("BlockPool.lookup", lambda: (_pool().lookup, {"prefix_hash": 7}),
         ok={"prefix_hash": {"negative", "zero"}}),  # any int is a hash (an unknown one gives None)
    Case("PagedKVCache", lambda: (P.PagedKVCache, {"pool": _pool()})),
    Case("PagedKVCache.update", lambda: (P.PagedKVCache(_pool()).update, {"layer": 1, "k": _kv(), "v": _kv()}),
         ok={"k": {"nan", "inf"}, "v": {"nan", "inf"}, "layer": {"zero"}}),  # values not scanned (every step); layer 0
    Case("PagedKVCache.attach_prefix", lambda: (P.PagedKVCache(_pool()).attach_prefix, {"ids": [1, 2, 3, 4, 5]}),
         kinds={"ids": IDS_KINDS}),
    Case("PagedKVCache.register_blocks", lambda: (lambda c: (c.register_blocks, {"ids": [1, 2, 3]}))(
        _filled_cache()), kinds={"ids": IDS_KINDS}),
    Case("PagedKVCache.crop", lambda: (_filled_cache().crop, {"n": 2}), ok={"n": {"zero"}}),  # crop(0) empties
    Case("block_hashes", lambda: (P.block_hashes, {"ids": [1, 2, 3, 4], "block_size": 2}),
         kinds={"ids": ("plain_str", "float_item", "negative_item", "none")}),  # no full block: [] is documented
    Case("paged_prefill", lambda: (lambda m: (P.paged_prefill, {
        "model": m, "ids": [1, 2, 3], "cache": P.PagedKVCache(P.BlockPool.for_model(m, 4, 2))}))(_model())),
    Case("cache_memory", lambda: (P.cache_memory, {"lengths": [3, 5, 8], "max_len": 8, "block_size": 4}),
         kinds={"lengths": ("plain_str", "float_item", "negative_item", "huge_item", "empty", "none")}),
]


def _filled_cache():
    cache = P.PagedKVCache(_pool())
    cache.update(0, _kv(), _kv())
    cache.update(1, _kv(), _kv())
    return cache


SKIP = {"BlockPool.allocate": "takes no arguments", "PagedKVCache.free": "takes no arguments"}
