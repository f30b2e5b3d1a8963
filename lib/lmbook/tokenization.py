"""Chapter 5: byte-level byte-pair encoding (BPE), trained from scratch or loaded from a real model.

A BPE tokenizer cuts the text into chunks (:mod:`lmbook.pretokenization`), writes each chunk as bytes (the
256 base tokens, so no string is out of vocabulary) and replays its merges, in the order they were learned,
inside each chunk. Training repeatedly merges the most frequent adjacent pair of tokens
(:func:`learn_merges_naive`, by definition; :func:`learn_merges`, with incremental counts); each merge adds
one token, so N merges give at most 256 + N tokens, never N.

Conventions (those of Hugging Face ``tokenizers``, so that training gives the same merges and ids): byte
tokens 0..255 in the order of GPT-2's printable stand-ins (:func:`byte_order`); a tie in pair count goes to
the smallest (left id, right id); a pair is merged left to right without overlap ("aaa" -> "aa" "a");
training stops at ``vocab_size`` tokens or when the best pair occurs fewer than ``min_frequency`` times; two
merges that spell the same bytes (``ab``+``c`` and ``a``+``bc``) share one token id. Decoding replaces
invalid UTF-8 (a slice of ids that cuts a character in two) by U+FFFD, as ``tokenizers`` does; a lone
surrogate has no UTF-8 form and cannot be encoded.

SmolLM2's tokenizer is read by :mod:`lmbook.gguf_tokenizer`; WordPiece and Unigram are in :mod:`lmbook.unigram`.
Left out on purpose: BPE dropout, and a fast encoder for very long unbroken chunks (encoding a chunk is
quadratic in its length, which is fine for text cut by the pre-tokenizer).
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter, defaultdict
from itertools import pairwise
from numbers import Integral
from pathlib import Path

from . import validate
from .gguf_tokenizer import read_gguf_tokenizer, smollm2_gguf_path
from .pretokenization import _check_pre, byte_order, pretokenize

__all__ = ["BPETokenizer", "merge_pair", "learn_merges", "learn_merges_naive",
           "smollm2_gguf_path"]  # re-exported from gguf_tokenizer: pretrained and the experiments import it here
ERROR_HANDLERS = ("strict", "replace", "ignore", "backslashreplace")  # what decode does with invalid UTF-8


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each occurrence of ``pair`` in ``ids`` by ``new_id``, left to right, without overlap.

    ``merge_pair([5, 5, 5], (5, 5), 9)`` -> ``[9, 5]``. ``new_id`` must be a new token, not one of ``ids``.
    Chapter 5.
    """
    _check_merge_pair(ids, pair, new_id)
    out, i, (a, b) = [], 0, pair
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def learn_merges_naive(words: list[list[int]], counts: list[int], token_bytes: list[bytes], vocab_size: int,
                       min_frequency: int = 2) -> dict[tuple[int, int], int]:
    """BPE training by definition: recount every pair of every word before each merge (chapter 5).

    ``words`` are the distinct chunks as token ids, ``counts`` how often each occurs, ``token_bytes`` the
    spelling of each id (extended in place). Cost per merge: O(total word length). Returns {pair: new id}
    in merge order.
    """
    _check_learn_merges(words, counts, token_bytes, vocab_size, min_frequency)
    words, index, merges = [list(w) for w in words], {b: i for i, b in enumerate(token_bytes)}, {}
    while len(index) < vocab_size:
        pair_counts = Counter()
        for word, count in zip(words, counts, strict=True):
            for pair in pairwise(word):
                pair_counts[pair] += count
        if not pair_counts:
            break
        best = min(pair_counts, key=lambda p: (-pair_counts[p], p))  # most frequent; ties: smallest ids
        if pair_counts[best] < min_frequency:
            break
        merges[best] = _add_token(token_bytes, index, best)
        words = [merge_pair(w, best, merges[best]) for w in words]
    return merges


def learn_merges(words: list[list[int]], counts: list[int], token_bytes: list[bytes], vocab_size: int,
                 min_frequency: int = 2) -> dict[tuple[int, int], int]:
    """The same merges as :func:`learn_merges_naive`, with incremental pair counts (chapter 5).

    Keep ``pair_counts`` and, for every pair, the words it occurs in (``where``). A merge only changes the
    words that hold the merged pair: subtract their old pairs, add their new ones. The best pair comes from a
    max-heap of (-count, pair), fixed lazily. Cost per merge: O(affected words + log #pairs), not O(corpus).
    """
    _check_learn_merges(words, counts, token_bytes, vocab_size, min_frequency)
    words, index, merges = [list(w) for w in words], {b: i for i, b in enumerate(token_bytes)}, {}
    pair_counts, where, heap = _count_pairs(words, counts)  # pair -> count, pair -> words, max-heap of counts
    while len(index) < vocab_size and (best := _pop_most_frequent(heap, pair_counts)) is not None:
        if pair_counts[best] < min_frequency:
            break
        new_id = merges[best] = _add_token(token_bytes, index, best)
        delta = defaultdict(int)  # pair -> change of its count
        for w in sorted(where.pop(best)):  # only the words that held the merged pair change
            old, words[w] = words[w], merge_pair(words[w], best, new_id)
            for pair in pairwise(old):
                delta[pair] -= counts[w]
            for pair in pairwise(words[w]):
                delta[pair] += counts[w]
                where[pair].add(w)
        _update_counts(pair_counts, heap, delta)
    return merges


def _add_token(token_bytes: list[bytes], index: dict[bytes, int], pair: tuple[int, int]) -> int:
    """The id of the merged token: a new id, or the existing one if another merge already spelled it."""
    merged = token_bytes[pair[0]] + token_bytes[pair[1]]
    if merged not in index:
        index[merged] = len(token_bytes)
        token_bytes.append(merged)
    return index[merged]


def _count_pairs(words: list[list[int]], counts: list[int]):
    """Count every adjacent pair, weighted by its word's count; index the words each pair occurs in (they
    may lose it later: the index is never pruned); and a heap of (-count, pair) to pop the best pair from."""
    pair_counts, where = defaultdict(int), defaultdict(set)  # pair -> count; pair -> ids of words holding it
    for w, word in enumerate(words):
        for pair in pairwise(word):
            pair_counts[pair] += counts[w]
            where[pair].add(w)
    heap = [(-c, pair) for pair, c in pair_counts.items()]
    heapq.heapify(heap)
    return pair_counts, where, heap


def _pop_most_frequent(heap: list, pair_counts: dict) -> tuple[int, int] | None:
    """Pop the pair of highest count (ties: smallest); a stale entry goes back in with its current count."""
    while heap:
        neg_count, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if -neg_count == count:
            return pair
        if count > 0:
            heapq.heappush(heap, (-count, pair))
    return None


def _update_counts(pair_counts: dict, heap: list, delta: dict) -> None:
    """Apply the count changes of one merge; a pair whose count went up gets a fresh heap entry."""
    for pair, d in delta.items():
        pair_counts[pair] += d
        if pair_counts[pair] <= 0:
            del pair_counts[pair]
        elif d > 0:
            heapq.heappush(heap, (-pair_counts[pair], pair))


class BPETokenizer:
    """A byte-level BPE tokenizer: ``tok = BPETokenizer.train(text, vocab_size=1000)``, ``tok.encode(s)``.

    ``vocab`` maps id -> bytes, ``merges`` maps (left id, right id) -> merged id in merge order (rank =
    position), ``special_tokens`` maps strings such as ``"<|im_start|>"`` to ids; they are matched whole in
    the text before pre-tokenization. ``pre`` names the pre-tokenizer (see :func:`pretokenize`).
    """

    def __init__(self, vocab: dict[int, bytes], merges: dict[tuple[int, int], int], pre: str = "gpt2",
                 special_tokens: dict[str, int] | None = None):
        _check_tokenizer(vocab, merges, pre, special_tokens)
        self.vocab, self.merges, self.pre = dict(vocab), dict(merges), pre
        self.special_tokens = dict(special_tokens or {})
        specials = set(self.special_tokens.values())
        # A trained tokenizer has all 256 bytes; SmolLM2's has 235 (no token for bytes that never occur in
        # UTF-8 text, such as 0xC0, nor for a few control characters): text holding those cannot be encoded.
        self._byte_id = {tok[0]: i for i, tok in self.vocab.items() if len(tok) == 1 and i not in specials}
        self._rank = {pair: r for r, pair in enumerate(self.merges)}
        longest_first = sorted(self.special_tokens, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, longest_first))) if specials else None
        self._cache: dict[str, list[int]] = {}  # chunk -> ids: real text repeats its chunks a lot

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return (f"BPETokenizer({len(self.vocab)} tokens, {len(self.merges)} merges, pre={self.pre!r}, "
                f"{len(self.special_tokens)} special)")

    @classmethod
    def train(cls, text: str, vocab_size: int, min_frequency: int = 2, *, pre: str = "gpt2",
              naive: bool = False) -> BPETokenizer:
        """Learn merges on ``text`` until the vocabulary has ``vocab_size`` tokens (chapter 5).

        The vocabulary starts as the 256 bytes, so ``vocab_size`` >= 256 and ``vocab_size - 256`` merges are
        made (more if two merges spell the same token; fewer if no pair occurs ``min_frequency`` times).
        ``naive=True`` uses the recount-everything loop (slow; the definition).
        """
        _check_train(text, vocab_size, min_frequency, pre, naive)
        order = byte_order()
        token_bytes = [bytes([b]) for b in order]
        byte_id = {b: i for i, b in enumerate(order)}
        chunks = Counter(pretokenize(text, pre))
        words = [[byte_id[b] for b in chunk.encode("utf-8")] for chunk in chunks]
        learn = learn_merges_naive if naive else learn_merges
        merges = learn(words, list(chunks.values()), token_bytes, vocab_size, min_frequency)
        return cls(dict(enumerate(token_bytes)), merges, pre=pre)

    @classmethod
    def from_gguf(cls, path: str | Path | None = None) -> BPETokenizer:
        """The tokenizer in a GGUF model file (default: SmolLM2-135M-Instruct), see :mod:`.gguf_tokenizer`."""
        return cls(**read_gguf_tokenizer(smollm2_gguf_path() if path is None else path))

    def _encode_chunk(self, chunk: str) -> list[int]:
        """Bytes -> ids, then apply the merge of lowest rank present, until none applies."""
        _check_encodable(chunk, self._byte_id)
        ids = [self._byte_id[b] for b in chunk.encode("utf-8")]
        while len(ids) >= 2:
            pair = min(pairwise(ids), key=lambda p: self._rank.get(p, math.inf))
            if pair not in self._rank:
                break
            ids = merge_pair(ids, pair, self.merges[pair])
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: split off special tokens, pre-tokenize, BPE each chunk (cached by chunk)."""
        validate.string("text", text, empty=True)
        out = []
        parts = self._special_re.split(text) if self._special_re else [text]
        found = self._special_re.findall(text) if self._special_re else []
        for k, part in enumerate(parts):
            for chunk in pretokenize(part, self.pre):
                if chunk not in self._cache:
                    self._cache[chunk] = self._encode_chunk(chunk)
                out.extend(self._cache[chunk])
            if k < len(found):
                out.append(self.special_tokens[found[k]])
        return out

    def decode_bytes(self, ids: list[int]) -> bytes:
        """The bytes the ids spell. Raises ValueError naming the first unknown id."""
        _check_ids(ids, self.vocab)
        return b"".join(self.vocab[int(i)] for i in ids)

    def decode(self, ids: list[int], errors: str = "replace") -> str:
        """The text the ids spell. Invalid UTF-8 (a cut character) becomes U+FFFD, unless errors="strict"."""
        validate.choice("errors", errors, ERROR_HANDLERS)
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def tokens(self, text: str) -> list[str]:
        """The pieces ``text`` is cut into, each decoded alone (a cut character shows as \\x escapes)."""
        return [self.vocab[i].decode("utf-8", errors="backslashreplace") for i in self.encode(text)]


# ----- checks ------------------------------------------------------------------------------------------

def _is_id(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _check_merge_pair(ids, pair, new_id) -> None:
    # The common case in one cheap test: training calls merge_pair for every word at every merge.
    if (type(ids) is list and type(pair) is tuple and len(pair) == 2 and type(new_id) is int and new_id >= 0
            and {type(pair[0]), type(pair[1]), *map(type, ids)} == {int} and min(pair) >= 0 and min(ids, default=0) >= 0
            and new_id not in ids and new_id not in pair):
        return
    validate.sequence("ids", ids, empty=True, what="token ids")
    if not all(_is_id(i) and i >= 0 for i in ids):
        raise TypeError(f"ids must hold token ids (ints >= 0), got {validate.describe(ids)}")
    if not isinstance(pair, tuple) or len(pair) != 2 or not all(_is_id(i) and i >= 0 for i in pair):
        raise TypeError(f"pair must be a tuple of two ids >= 0 (left, right), got {validate.describe(pair)}")
    validate.integer("new_id", new_id, low=0)
    if new_id in ids or new_id in pair:
        raise ValueError(f"new_id must be a new token id, not one already in ids or pair, got {new_id}")


def _check_learn_merges(words, counts, token_bytes, vocab_size, min_frequency) -> None:
    if not isinstance(token_bytes, list) or not token_bytes or not all(isinstance(b, bytes) and b for b in token_bytes):
        raise TypeError(f"token_bytes must be a list of non-empty bytes (extended in place), "
                        f"got {validate.describe(token_bytes)}")
    if len(set(token_bytes)) != len(token_bytes):
        raise ValueError("token_bytes must spell each token differently, but two entries are equal")
    validate.sequence("words", words, what="words (lists of token ids)")
    validate.sequence("counts", counts, what="counts")
    if len(counts) != len(words):
        raise ValueError(f"counts must have one count per word: {len(words)} words, got {len(counts)} counts")
    for k, (word, count) in enumerate(zip(words, counts, strict=True)):
        validate.sequence(f"words[{k}]", word, empty=True, what="token ids")
        if not all(_is_id(i) and 0 <= i < len(token_bytes) for i in word):
            raise ValueError(f"words[{k}] must hold token ids in [0, {len(token_bytes) - 1}] (the ids of "
                             f"token_bytes), got {validate.describe(word)}")
        validate.integer(f"counts[{k}]", count, low=1)
    validate.integer("vocab_size", vocab_size, low=len(token_bytes))
    validate.integer("min_frequency", min_frequency, low=1)


def _check_int(name: str, value, low: int) -> None:
    validate.integer(name, value, low=None)
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")


def _check_train(text, vocab_size, min_frequency, pre, naive) -> None:
    validate.string("text", text)  # an empty text has nothing to learn merges from
    _check_utf8("text", text)
    _check_int("vocab_size", vocab_size, 256)
    _check_int("min_frequency", min_frequency, 1)
    _check_pre(pre)
    validate.boolean("naive", naive)


def _check_utf8(name: str, text: str) -> None:
    try:  # a lone surrogate (U+D800..U+DFFF) is not a Unicode scalar value and has no UTF-8 form
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{name} holds a lone surrogate at {err.start}, which has no UTF-8 form") from None


def _check_encodable(chunk: str, byte_id: dict[int, int]) -> None:
    _check_utf8("text", chunk)
    if any(b not in byte_id for b in chunk.encode("utf-8")):
        bad = next(ch for ch in chunk if any(b not in byte_id for b in ch.encode("utf-8")))
        raise ValueError(f"text holds {bad!r} (U+{ord(bad):04X}), which this tokenizer cannot encode: its "
                         f"UTF-8 bytes {bad.encode('utf-8')!r} include a byte that has no token in the vocabulary")


def _check_ids(ids, vocab) -> None:
    validate.sequence("ids", ids, empty=True, what="token ids (ints)")
    for i in ids:
        if not _is_id(i):
            raise TypeError(f"ids must be ints, got {validate.describe(i)}")
        if int(i) not in vocab:
            raise ValueError(f"ids holds an unknown token id {int(i)}: ids run from 0 to {len(vocab) - 1}")


def _check_tokenizer(vocab, merges, pre, special_tokens) -> None:
    if not isinstance(vocab, dict) or not vocab or not all(
            _is_id(i) and i >= 0 and isinstance(t, bytes) and t for i, t in vocab.items()):
        raise TypeError(f"vocab must be a non-empty dict {{id >= 0: bytes}}, got {validate.describe(vocab)}")
    if not isinstance(merges, dict):
        raise TypeError(f"merges must be a dict {{(left, right): id}}, got {validate.describe(merges)}")
    for pair, new_id in merges.items():
        if not (isinstance(pair, tuple) and len(pair) == 2) or vocab.get(new_id) != vocab.get(
                pair[0], b"?") + vocab.get(pair[1], b"?"):
            raise ValueError(f"merges must spell vocab: merge {pair!r} -> {new_id!r} does not spell "
                             "vocab[left] + vocab[right]")
    _check_pre(pre)
    if special_tokens is not None and (not isinstance(special_tokens, dict) or not all(
            isinstance(s, str) and s and vocab.get(i) == s.encode("utf-8") for s, i in special_tokens.items())):
        raise ValueError(f"special_tokens must map non-empty strs to the vocab ids that spell them, "
                         f"got {validate.describe(special_tokens)}")
