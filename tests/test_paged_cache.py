"""lmbook.paged_cache: the paged cache gives the logits of KVCache and of the full forward pass for several
block sizes and lengths that are not multiples of them, blocks are allocated on demand and freed, prefix
caching computes only the new tokens with identical logits, and the memory count against a token-by-token
brute force."""

import math
import random

import pytest
import torch
from lmbook import kv_cache as KV
from lmbook import model as M
from lmbook import paged_cache as P


def small_model(seed=0):
    torch.manual_seed(seed)
    config = M.TransformerConfig(vocab_size=40, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, context_length=64)
    model = M.Transformer(config).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3, generator=torch.Generator().manual_seed(seed))  # large weights: errors show
    return model


IDS = torch.randint(0, 40, (37,), generator=torch.Generator().manual_seed(1))


@torch.no_grad()
def _incremental(model, cache, ids, chunks):
    out, t = [], 0
    for size in chunks:  # prefill pieces, then single tokens
        out.append(model(ids[None, t:t + size], cache=cache)[0])
        t += size
    return torch.cat(out)


@pytest.mark.parametrize("block_size", [1, 3, 4, 5, 16, 64])
def test_paged_logits_equal_kvcache_and_full_forward(block_size):
    model = small_model()
    chunks = [10, 1, 1, 7, *[1] * 18]  # 37 tokens: no multiple of 3, 4, 5, 16 or 64
    pool = P.BlockPool.for_model(model, n_blocks=40, block_size=block_size)
    paged = _incremental(model, P.PagedKVCache(pool), IDS, chunks)
    contiguous = _incremental(model, KV.KVCache.for_model(model, 37), IDS, chunks)
    with torch.no_grad():
        full = model(IDS[None])[0]
    torch.testing.assert_close(paged, contiguous, atol=1e-12, rtol=0)
    torch.testing.assert_close(paged, full, atol=1e-10, rtol=0)
    assert full.abs().max() > 1


def test_blocks_are_allocated_on_demand_and_freed():
    model = small_model()
    pool = P.BlockPool.for_model(model, n_blocks=12, block_size=4)
    a, b = P.PagedKVCache(pool), P.PagedKVCache(pool)
    with torch.no_grad():
        for n in range(1, 10):  # one token at a time: a new block exactly when the last one is full
            model(IDS[None, n - 1:n], cache=a)
            assert len(a.block_table) == math.ceil(n / 4) and a.seq_len == n
        model(IDS[None, :6], cache=b)
    assert pool.n_free == 12 - 3 - 2 and len(set(a.block_table) | set(b.block_table)) == 5
    keys, _ = b.update(0, torch.zeros(1, 2, 1, 8, dtype=torch.float64), torch.zeros(1, 2, 1, 8, dtype=torch.float64))
    assert keys.shape == (1, 2, 7, 8)  # update returns every stored token, like KVCache.update
    a.crop(5)  # back to 5 tokens: the third block goes back to the pool
    assert a.block_table and len(a.block_table) == 2 and a.seq_len == 5 and pool.n_free == 12 - 2 - 2
    with torch.no_grad():
        torch.testing.assert_close(model(IDS[None, 5:7], cache=a), model(IDS[None, :7])[:, 5:], atol=1e-10, rtol=0)
    a.free()
    assert pool.n_free == 12 - 2 and a.seq_len == 0 and a.block_table == []
    with pytest.raises(ValueError, match="free"):  # 11 tokens in blocks of 4 need 3, only 2 left after b's
        P.PagedKVCache(pool).update(0, *[torch.zeros(1, 2, 41, 8, dtype=torch.float64)] * 2)


def test_block_address_is_table_entry_and_offset():
    model = small_model()
    pool = P.BlockPool.for_model(model, n_blocks=20, block_size=3)
    other, cache = P.PagedKVCache(pool), P.PagedKVCache(pool)
    k = torch.randn(1, 2, 8, 8, dtype=torch.float64)
    other.update(0, k[:, :, :2], k[:, :, :2])  # interleave two sequences so that the blocks are not in order
    cache.update(0, k[:, :, :4], k[:, :, :4])
    other.update(0, k[:, :, 2:7], k[:, :, 2:7])
    cache.update(0, k[:, :, 4:], k[:, :, 4:])
    for p in range(8):  # a naive read: position p lives at block_table[p // 3], offset p % 3
        torch.testing.assert_close(pool.keys[0, cache.block_table[p // 3], :, p % 3], k[0, :, p], atol=0, rtol=0)
    assert cache.block_table != sorted(cache.block_table) or cache.block_table[0] != 0


@pytest.mark.parametrize("block_size", [2, 4, 7])
def test_prefix_caching_computes_only_new_tokens_with_identical_logits(block_size):
    model = small_model()
    pool = P.BlockPool.for_model(model, n_blocks=40, block_size=block_size)
    system = IDS[:23].tolist()
    first, second = system + [1, 2, 3], system + [9, 8]
    a = P.PagedKVCache(pool)
    logits_a, shared_a = P.paged_prefill(model, first, a)
    b = P.PagedKVCache(pool)
    used_before = pool.n_free
    logits_b, shared_b = P.paged_prefill(model, second, b)
    with torch.no_grad():
        full_b = model(torch.tensor([second]))[0]
    assert shared_a == 0 and shared_b == (23 // block_size) * block_size  # the full blocks of the system prompt
    assert logits_b.shape[0] == len(second) - shared_b  # prefill computed only the rest
    torch.testing.assert_close(logits_b, full_b[shared_b:], atol=1e-10, rtol=0)
    blocks_saved = shared_b // block_size
    assert b.block_table[:blocks_saved] == a.block_table[:blocks_saved]  # the same physical blocks
    assert used_before - pool.n_free == math.ceil(len(second) / block_size) - blocks_saved
    # a finished request's cached blocks stay findable, and its decoding continues correctly
    a.free()
    c = P.PagedKVCache(pool)
    _, shared_c = P.paged_prefill(model, first, c)
    assert shared_c == ((len(first) - 1) // block_size) * block_size
    with torch.no_grad():
        nxt = model(torch.tensor([[5]]), cache=c)[0]
        torch.testing.assert_close(nxt, model(torch.tensor([first + [5]]))[0, -1:], atol=1e-10, rtol=0)


def test_block_hash_depends_on_every_earlier_token():
    h1, h2 = P.block_hashes([1, 2, 3, 4, 5, 6, 7], 3), P.block_hashes([9, 2, 3, 4, 5, 6], 3)
    assert len(h1) == 2 and len(h2) == 2  # full blocks only
    assert h1[0] != h2[0] and h1[1] != h2[1]  # the same tokens 4, 5, 6 after a different first block
    assert P.block_hashes([1, 2, 3, 4, 5, 6], 3) == h1


def test_released_cached_blocks_are_evicted_oldest_first():
    model = small_model()
    pool = P.BlockPool.for_model(model, n_blocks=4, block_size=2)
    a = P.PagedKVCache(pool)
    P.paged_prefill(model, [1, 2, 3, 4, 5], a)  # 3 blocks, 2 of them full and registered
    a.free()
    assert pool.n_free == 4 and len(pool.cached) == 2
    b = P.PagedKVCache(pool)
    P.paged_prefill(model, [7, 8, 7, 8, 7], b)  # 3 blocks: the 2 free ones, then the oldest cached one
    old = P.block_hashes([1, 2, 3, 4], 2)
    assert pool.lookup(old[0]) is None and pool.lookup(old[1]) is not None
    P.paged_prefill(model, [6], P.PagedKVCache(pool))  # one more block: the other cached one goes
    assert pool.lookup(old[1]) is None and pool.n_free == 0


def _brute_force_memory(lengths, max_len, block_size):
    contiguous = paged = 0
    for n in lengths:
        contiguous += max_len  # reserved up front
        blocks = 0
        for t in range(n):  # allocate on demand, token by token
            if t == blocks * block_size:
                blocks += 1
        paged += blocks
    return contiguous, paged


def test_cache_memory_against_a_brute_force_count():
    rng = random.Random(0)
    for _ in range(200):
        max_len, block_size = rng.randint(1, 300), rng.randint(1, 40)
        lengths = [rng.randint(1, max_len) for _ in range(rng.randint(1, 9))]
        got = P.cache_memory(lengths, max_len, block_size)
        contiguous, blocks = _brute_force_memory(lengths, max_len, block_size)
        assert got["contiguous_slots"] == contiguous and got["paged_blocks"] == blocks
        assert got["paged_slots"] == blocks * block_size and got["used_slots"] == sum(lengths)
        assert 0 <= got["paged_waste"] <= (block_size - 1) * len(lengths)
        assert got["paged_waste"] <= got["contiguous_waste"] + (block_size - 1) * len(lengths)
    assert P.cache_memory([1, 16, 17], 64, 16) == {"contiguous_slots": 192, "paged_blocks": 4, "paged_slots": 64,
                                                  "used_slots": 34, "contiguous_waste": 158, "paged_waste": 30}


def test_bad_input():
    model = small_model()
    pool = P.BlockPool.for_model(model, n_blocks=4, block_size=2)
    with pytest.raises(ValueError, match="k must have shape"):
        P.PagedKVCache(pool).update(0, torch.zeros(2, 2, 1, 8), torch.zeros(2, 2, 1, 8))
    with pytest.raises(ValueError, match=r"lengths\[1\]"):
        P.cache_memory([3, 70], 64, 16)
    with pytest.raises(ValueError, match="empty cache"):
        c = P.PagedKVCache(pool)
        P.paged_prefill(model, [1, 2, 3], c)
        c.attach_prefix([1, 2, 3])


def test_crop_inside_a_shared_block_is_refused():
    model = small_model()
    pool = P.BlockPool.for_model(model, n_blocks=8, block_size=4)
    cache = P.PagedKVCache(pool)
    P.paged_prefill(model, IDS[:10].tolist(), cache)  # blocks 0 and 1 full and registered
    with pytest.raises(ValueError, match="copy-on-write"):
        cache.crop(6)
    cache.crop(9)  # inside the third block, which nobody shares
    cache.crop(4)  # at a block boundary
    assert cache.seq_len == 4 and len(cache.block_table) == 1
