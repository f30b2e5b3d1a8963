"""A paged KV cache (PagedAttention, Kwon et al. 2023) with prefix caching.

A contiguous cache (``lmbook.kv_cache.KVCache``) reserves max_len slots per sequence, whatever the sequence
ends up using. A paged cache cuts the memory into blocks of ``block_size`` token slots, like pages of
virtual memory:

    token at position p of a sequence  ->  block  table[p // block_size],  offset  p mod block_size

- :class:`BlockPool`: the physical memory, keys and values (n_layers, n_blocks, H_kv, block_size, d), a free
  list, a reference count per block, and the table of full blocks that can be shared (prefix caching);
- :class:`PagedKVCache`: one sequence's view of the pool, a block table that grows one block at a time.
  It plugs into ``lmbook.model.Transformer`` exactly like ``KVCache`` (``seq_len`` and ``update``);
  ``free()`` returns its blocks when the sequence finishes;
- prefix caching: a full block is named by the hash of its tokens and of the blocks before it, so two
  requests that share a prompt prefix (a system prompt) share its full blocks; :func:`paged_prefill`
  computes only the tokens after the shared blocks;
- :func:`cache_memory`: the slots a contiguous cache reserves for a list of request lengths against the
  slots the paged cache fills (waste < block_size per sequence).

Left out on purpose: batches (one PagedKVCache holds one sequence: ``lmbook.model`` has no padding mask, so
sequences of different lengths cannot share a forward pass), a kernel that reads the blocks in place (here
``update`` gathers them into a contiguous copy), copy-on-write (only full blocks are shared, so none is
written after sharing), swapping to CPU and preemption. Chapter 11.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch

from . import validate
from .kv_cache import _check_layer, _check_model

__all__ = ["BlockPool", "PagedKVCache", "block_hashes", "paged_prefill", "cache_memory"]


class BlockPool:
    """Physical KV memory: ``n_blocks`` blocks of ``block_size`` slots for every layer, keys and values
    (n_layers, n_blocks, H_kv, block_size, head_dim). Block b holds the same token positions in every layer.
    ``allocate()`` hands out a free block (reference count 1); ``release(b)`` drops one reference. A full
    block registered under its prefix hash (``register``) stays findable by ``lookup`` after its last
    reference goes, until a new allocation needs the memory (the least recently released goes first).
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, n_blocks: int, block_size: int,
                 dtype: torch.dtype = torch.float32, device=None):
        _check_pool(n_layers, n_kv_heads, head_dim, n_blocks, block_size, dtype, device)
        self.n_layers, self.n_kv_heads, self.head_dim = n_layers, n_kv_heads, head_dim
        self.n_blocks, self.block_size, self.dtype = n_blocks, block_size, dtype
        shape = (n_layers, n_blocks, n_kv_heads, block_size, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.free = list(range(n_blocks - 1, -1, -1))  # a stack: block 0 is handed out first
        self.refs = [0] * n_blocks  # sequences using each block
        self.cached: dict[int, int] = {}  # prefix hash -> block
        self.hash_of: dict[int, int] = {}  # block -> prefix hash
        self.evictable: OrderedDict[int, None] = OrderedDict()  # registered blocks nobody uses, oldest first

    @classmethod
    def for_model(cls, model, n_blocks: int, block_size: int, **kwargs):
        """A pool shaped for ``model`` (a Transformer): its layers, K/V heads, head size, dtype and device."""
        _check_model(model)
        c, weight = model.config, next(model.parameters())
        kwargs.setdefault("dtype", weight.dtype)
        kwargs.setdefault("device", weight.device)
        return cls(c.n_layers, c.n_kv_heads, c.head_dim, n_blocks, block_size, **kwargs)

    @property
    def n_free(self) -> int:
        """Blocks a new allocation can take: the free ones and the cached ones nobody uses."""
        return len(self.free) + len(self.evictable)

    def allocate(self) -> int:
        """A block for a new token range: a free one, else the least recently released cached one."""
        _check_room(self)
        if self.free:
            block = self.free.pop()
        elif self.evictable:
            block, _ = self.evictable.popitem(last=False)
            del self.cached[self.hash_of.pop(block)]  # its contents are about to be overwritten
        self.refs[block] = 1
        return block

    def share(self, block: int) -> None:
        """One more sequence uses ``block`` (a cached full block found by ``lookup``)."""
        _check_block(self, block, in_use=False)
        self.refs[block] += 1
        self.evictable.pop(block, None)

    def release(self, block: int) -> None:
        """One sequence less uses ``block``; at zero it is free again, or evictable if it is cached."""
        _check_block(self, block)
        self.refs[block] -= 1
        if self.refs[block] == 0:
            if block in self.hash_of:
                self.evictable[block] = None
            else:
                self.free.append(block)

    def register(self, prefix_hash: int, block: int) -> None:
        """Make full ``block`` findable under ``prefix_hash`` (the first block registered for a hash wins)."""
        _check_register_block(self, prefix_hash, block)
        if prefix_hash not in self.cached and block not in self.hash_of:
            self.cached[prefix_hash], self.hash_of[block] = block, prefix_hash

    def lookup(self, prefix_hash: int) -> int | None:
        """The cached block registered under ``prefix_hash``, or None."""
        _check_hash(prefix_hash)
        return self.cached.get(prefix_hash)

    def __repr__(self) -> str:
        return (f"BlockPool(blocks={self.n_blocks} x {self.block_size} slots, free={len(self.free)}, "
                f"cached={len(self.cached)}, in use={sum(r > 0 for r in self.refs)})")


def block_hashes(ids: list[int], block_size: int) -> list[int]:
    """The prefix hash of each FULL block of ids: h_i = hash((h_{i-1}, ids[i*bs : (i+1)*bs])), h_{-1} = None,
    so a block's name depends on every token before it, not only on its own."""
    _ids_list("ids", ids, empty=True, block_size=block_size)
    hashes, h = [], None
    for start in range(0, len(ids) - block_size + 1, block_size):
        h = hash((h, tuple(ids[start:start + block_size])))
        hashes.append(h)
    return hashes


class PagedKVCache:
    """One sequence's KV cache in a :class:`BlockPool`: ``block_table[i]`` is the pool block holding its
    positions i * block_size .. (i + 1) * block_size - 1, and ``lengths[l]`` the tokens stored for layer l.
    ``update(layer, k, v)`` (k, v: (1, H_kv, T, d)) writes the T new tokens into their blocks, taking a new
    block from the pool when the last one is full, and returns every stored key and value (1, H_kv, n, d),
    as ``KVCache.update`` does. ``free()`` gives the blocks back. Chapter 11.
    """

    def __init__(self, pool: BlockPool):
        _check_is_pool(pool)
        self.pool, self.block_size, self.n_layers = pool, pool.block_size, pool.n_layers
        self.block_table: list[int] = []
        self.lengths = [0] * pool.n_layers
        self.shared_tokens = 0  # tokens that came from cached blocks (prefix caching)

    @property
    def seq_len(self) -> int:
        """Tokens every layer has seen: the position of the next token."""
        return self.lengths[-1]

    def _slots(self, start: int, T: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(block, offset) of positions start .. start + T - 1, allocating blocks as the table runs out."""
        while len(self.block_table) * self.block_size < start + T:
            self.block_table.append(self.pool.allocate())
        pos = torch.arange(start, start + T)
        table = torch.tensor(self.block_table)
        return table[pos // self.block_size].to(self.pool.keys.device), (pos % self.block_size).to(
            self.pool.keys.device)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (1, H_kv, T, d) of T new tokens of ``layer``; return all stored (1, H_kv, n, d)."""
        _check_update(self, layer, k, v)
        start, T = self.lengths[layer], k.shape[2]
        blocks, offsets = self._slots(start, T)  # (T,), (T,)
        self.pool.keys[layer, blocks, :, offsets] = k[0].transpose(0, 1)  # (T, H_kv, d) into scattered slots
        self.pool.values[layer, blocks, :, offsets] = v[0].transpose(0, 1)
        self.lengths[layer] = n = start + T
        blocks, offsets = self._slots(0, n)  # every stored position, in order
        k_all = self.pool.keys[layer, blocks, :, offsets].transpose(0, 1)  # (H_kv, n, d): a gathered copy
        v_all = self.pool.values[layer, blocks, :, offsets].transpose(0, 1)
        return k_all[None], v_all[None]  # (1, H_kv, n, d)

    def attach_prefix(self, ids: list[int]) -> int:
        """Share the cached full blocks that match a prefix of ``ids`` (an empty cache only): returns the number
        of tokens now stored, a multiple of block_size, at most len(ids) - 1 (the last token is always
        computed, since its logits are needed)."""
        _check_attach(self, ids)
        for h in block_hashes(ids[:len(ids) - 1], self.block_size):
            block = self.pool.lookup(h)
            if block is None:
                break
            self.pool.share(block)
            self.block_table.append(block)
        self.lengths = [len(self.block_table) * self.block_size] * self.n_layers
        self.shared_tokens = self.seq_len
        return self.seq_len

    def register_blocks(self, ids: list[int]) -> None:
        """Register this sequence's full blocks (ids: the tokens it stores) for later requests to share."""
        _check_register(self, ids)
        for block, h in zip(self.block_table, block_hashes(ids, self.block_size), strict=False):
            self.pool.register(h, block)

    def crop(self, n: int) -> None:
        """Keep the first ``n`` tokens and give back the blocks after them (as ``KVCache.crop``). Cutting inside
        a registered (shareable) block is refused: the next write would change other sequences' tokens."""
        _check_crop(self, n)
        keep = math.ceil(min(n, self.seq_len) / self.block_size)
        for block in self.block_table[keep:]:
            self.pool.release(block)
        self.block_table = self.block_table[:keep]
        self.lengths = [min(length, n) for length in self.lengths]
        self.shared_tokens = min(self.shared_tokens, n)

    def free(self) -> None:
        """The sequence is finished: give every block back to the pool (cached ones stay findable)."""
        for block in self.block_table:
            self.pool.release(block)
        self.block_table, self.lengths, self.shared_tokens = [], [0] * self.n_layers, 0

    def __repr__(self) -> str:
        return f"PagedKVCache(seq_len={self.seq_len}, blocks={self.block_table}, block_size={self.block_size})"


@torch.no_grad()
def paged_prefill(model, ids: list[int], cache: PagedKVCache) -> tuple[torch.Tensor, int]:
    """Prefill an empty ``cache`` with the prompt ``ids`` (list of token ids), reusing cached prefix blocks.

    Only ids[shared:] go through the model, at positions shared .. len(ids) - 1; the full blocks are then
    registered for the next request. Returns (logits of the computed positions (len(ids) - shared, V),
    shared), so logits[-1] scores the token after the prompt.
    """
    _check_prefill(model, ids, cache)
    shared = cache.attach_prefix(ids)  # tokens whose K and V are already in the pool
    device = next(model.parameters()).device
    logits = model(torch.tensor([ids[shared:]], device=device), cache=cache)[0]  # (T - shared, V)
    cache.register_blocks(ids)
    return logits, shared


def cache_memory(lengths: list[int], max_len: int, block_size: int) -> dict:
    """Token slots for requests of ``lengths`` tokens: a contiguous cache reserves max_len per request,
    a paged one fills ceil(n / block_size) blocks of block_size slots per request. Returns a dict:
    contiguous_slots = len * max_len, paged_blocks = sum ceil(n_i / bs), paged_slots = paged_blocks * bs,
    used_slots = sum n_i, contiguous_waste = contiguous_slots - used_slots, and paged_waste = paged_slots -
    used_slots (internal fragmentation, < bs per request)."""
    _check_memory(lengths, max_len, block_size)
    used = sum(lengths)
    blocks = sum(math.ceil(n / block_size) for n in lengths)
    contiguous = len(lengths) * max_len
    return {"contiguous_slots": contiguous, "paged_blocks": blocks, "paged_slots": blocks * block_size,
            "used_slots": used, "contiguous_waste": contiguous - used, "paged_waste": blocks * block_size - used}


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_pool(n_layers, n_kv_heads, head_dim, n_blocks, block_size, dtype, device) -> None:
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),
                        ("n_blocks", n_blocks), ("block_size", block_size)):
        validate.integer(name, value)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype, got {validate.describe(dtype)}")
    if device is not None:
        try:
            torch.device(device)
        except (RuntimeError, TypeError, ValueError) as err:
            raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}") from err


def _check_room(pool: BlockPool) -> None:
    if pool.n_free == 0:
        raise RuntimeError(f"out of KV blocks: all {pool.n_blocks} blocks are in use")


def _check_register_block(pool: BlockPool, prefix_hash, block) -> None:
    _check_hash(prefix_hash)
    _check_block(pool, block)


def _check_block(pool: BlockPool, block, in_use: bool = True) -> None:
    validate.integer("block", block, low=0, high=pool.n_blocks - 1)
    if in_use and pool.refs[block] == 0:
        raise ValueError(f"block {block} is not in use (reference count 0)")
    if not in_use and pool.refs[block] == 0 and block not in pool.hash_of:
        raise ValueError(f"block {block} is neither in use nor cached: there is nothing in it to share")


def _check_hash(prefix_hash) -> None:
    if isinstance(prefix_hash, bool) or not isinstance(prefix_hash, int):
        raise TypeError(f"prefix_hash must be an int (from block_hashes), got {validate.describe(prefix_hash)}")


def _check_is_pool(pool) -> None:
    if not isinstance(pool, BlockPool):
        raise TypeError(f"pool must be a BlockPool, got {validate.describe(pool)}")


def _check_update(cache: PagedKVCache, layer, k, v) -> None:
    _check_layer(cache, layer)
    pool = cache.pool
    for name, t in (("k", k), ("v", v)):
        validate.tensor(name, t, finite=False)  # no pass over the values: this runs in every layer at every step
        if t.dim() != 4 or t.shape[:2] != (1, pool.n_kv_heads) or t.shape[3] != pool.head_dim or t.shape[2] < 1:
            raise ValueError(f"{name} must have shape (1, n_kv_heads={pool.n_kv_heads}, T >= 1, head_dim="
                             f"{pool.head_dim}) (one sequence per PagedKVCache), got {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    need = math.ceil((cache.lengths[layer] + k.shape[2]) / cache.block_size) - len(cache.block_table)
    if need > pool.n_free:
        raise ValueError(f"k: {k.shape[2]} new tokens need {need} more blocks, but the pool has {pool.n_free} "
                         f"free of {pool.n_blocks}; free finished sequences or make a larger BlockPool")


def _check_crop(cache: PagedKVCache, n) -> None:
    validate.integer("n", n, low=0)
    last = cache.block_table[n // cache.block_size] if n < cache.seq_len and n % cache.block_size else None
    if last is not None and last in cache.pool.hash_of:
        raise ValueError(f"n={n} falls inside block {last}, a full block other requests may share; crop to a "
                         f"multiple of block_size={cache.block_size} (copy-on-write is left out)")


def _ids_list(name: str, ids, vocab_size: int | None = None, empty: bool = False, block_size=1) -> None:
    validate.integer("block_size", block_size)
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)) or not (ids or empty):
        raise TypeError(f"{name} must be a non-empty list of token ids, got {validate.describe(ids)}")
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int) or t < 0 or (vocab_size is not None and t >= vocab_size):
            bound = "" if vocab_size is None else f" < {vocab_size}"
            raise ValueError(f"{name}[{i}] must be a token id (an int >= 0{bound}), got {t!r}")


def _check_attach(cache: PagedKVCache, ids) -> None:
    _ids_list("ids", ids)
    if cache.seq_len or cache.block_table:
        raise ValueError(f"ids: attach_prefix needs an empty cache, this one holds {cache.seq_len} tokens")


def _check_register(cache: PagedKVCache, ids) -> None:
    _ids_list("ids", ids)
    if len(ids) != cache.seq_len:
        raise ValueError(f"ids must be the {cache.seq_len} tokens the cache stores, got {len(ids)} ids")


def _check_prefill(model, ids, cache) -> None:
    _check_model(model)
    _ids_list("ids", ids, model.config.vocab_size)
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"cache must be a PagedKVCache, got {validate.describe(cache)}")
    if cache.pool.n_layers != model.config.n_layers or cache.pool.head_dim != model.config.head_dim:
        raise ValueError(f"cache: its pool has {cache.pool.n_layers} layers of head_dim {cache.pool.head_dim}, the "
                         f"model {model.config.n_layers} of {model.config.head_dim}; use BlockPool.for_model")


def _check_memory(lengths, max_len, block_size) -> None:
    validate.integer("max_len", max_len)
    validate.integer("block_size", block_size)
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, (list, tuple)) or not lengths:
        raise TypeError(f"lengths must be a non-empty list of ints, got {validate.describe(lengths)}")
    for i, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= max_len:
            raise ValueError(f"lengths[{i}] must be an int in [1, max_len={max_len}], got {n!r}")
