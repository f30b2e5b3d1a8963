"""Chapter 6: word embeddings learned from co-occurrence, the word2vec family.

- **Skip-gram with negative sampling (SGNS)**: predict each context word c from the centre word w. For
  one (w, c) pair and K negatives n_1..n_K drawn from the unigram distribution raised to the 3/4 power,
  maximise  log s(u_c . v_w) + sum_k log s(-u_{n_k} . v_w)  (s = sigmoid): a *sum* of log-sigmoids, one
  binary classification per word, not a product. ``sgns_loss`` is its negative, averaged over a batch.
- **CBOW**: predict the centre word from the mean of its context vectors, with a full softmax.
- **fastText**: the input vector of a word is the mean of the vectors of the word itself and of its
  character n-grams (hashed into buckets), so a word never seen in training still gets a vector.
- **Hierarchical softmax**: p(w | h) as a product of binary decisions down a Huffman tree,
  O(log V) dot products instead of V.
- SGNS as matrix factorisation: with enough dimensions, its optimum has u_c . v_w = PMI(w, c) - log K
  (Levy & Goldberg 2014); :func:`fit_sgns_to_counts` optimises the expected objective on a count matrix.

Conventions: words are lowercased tokens of ``lmbook.data.sentences`` made of letters, digits and
underscores; windows do not cross sentences; the window size is fixed (word2vec samples it per word);
a negative that happens to equal the positive word is kept. Word vectors are the centre ("input")
vectors; cosine similarity compares them.

Left out on purpose: GloVe, hogwild multi-threaded SGD, learning-rate decay, phrase detection.
"""

from __future__ import annotations

import math
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .utils import progress

__all__ = ["Word2VecConfig", "WordVectors", "SkipGram", "CBOW", "sgns_loss", "build_vocab", "skipgram_pairs",
           "cbow_examples", "char_ngrams", "ngram_bucket", "train_word2vec", "huffman_code",
           "hierarchical_softmax_log_prob", "fit_sgns_to_counts"]


# ---------------------------------------------------------------------------------------------------------
# Data: vocabulary, subsampling, training examples
# ---------------------------------------------------------------------------------------------------------

def build_vocab(sentences, min_count: int = 5) -> tuple[list[str], np.ndarray]:
    """Words seen at least ``min_count`` times, most frequent first (ties alphabetical), and their counts."""
    counts = Counter(w for s in sentences for w in s)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    if not words:
        raise ValueError(f"no word occurs min_count={min_count} times; lower min_count or give more text")
    return words, np.array([counts[w] for w in words], dtype=np.int64)


def _to_ids(sentences, index: dict[str, int], counts: np.ndarray, subsample: float, rng) -> list[np.ndarray]:
    """Sentences as id arrays; out-of-vocabulary words are dropped, frequent words randomly discarded with
    probability 1 - sqrt(t / f(w)) (Mikolov et al. 2013b), f = relative frequency, t = ``subsample``."""
    keep_prob = np.ones(len(counts))
    if subsample > 0:
        freq = counts / counts.sum()
        keep_prob = np.minimum(1.0, np.sqrt(subsample / freq))
    out = []
    for s in sentences:
        ids = np.array([index[w] for w in s if w in index], dtype=np.int64)
        if subsample > 0 and len(ids):
            ids = ids[rng.random(len(ids)) < keep_prob[ids]]
        if len(ids) >= 2:
            out.append(ids)
    return out


def skipgram_pairs(sentences_ids: list[np.ndarray], window: int) -> np.ndarray:
    """All (centre, context) id pairs with 0 < |i - j| <= window inside each sentence: shape (N, 2)."""
    pairs = []
    for ids in sentences_ids:
        for offset in range(1, window + 1):
            if offset < len(ids):
                pairs.append(np.stack([ids[:-offset], ids[offset:]], 1))  # context to the right
                pairs.append(np.stack([ids[offset:], ids[:-offset]], 1))  # context to the left
    return np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)


def cbow_examples(sentences_ids: list[np.ndarray], window: int) -> tuple[np.ndarray, np.ndarray]:
    """CBOW examples: contexts (N, 2 window) padded with -1 where the sentence ends, and centres (N,)."""
    contexts, centres = [], []
    for ids in sentences_ids:
        padded = np.concatenate([np.full(window, -1), ids, np.full(window, -1)])
        for i in range(len(ids)):
            ctx = np.concatenate([padded[i:i + window], padded[i + window + 1:i + 2 * window + 1]])
            contexts.append(ctx)
            centres.append(ids[i])
    return np.array(contexts, dtype=np.int64).reshape(-1, 2 * window), np.array(centres, dtype=np.int64)


# ---------------------------------------------------------------------------------------------------------
# fastText's character n-grams
# ---------------------------------------------------------------------------------------------------------

def char_ngrams(word: str, n_min: int = 3, n_max: int = 6) -> list[str]:
    """The character n-grams of ``<word>`` for n_min <= n <= n_max, shortest first; ``<`` and ``>`` mark the
    word's ends, so the prefix "<pl" differs from the inside "pla". The whole word ``<word>`` is a separate
    feature, not one of these (fastText adds it too). "playing", n = 3: <pl pla lay ayi yin ing ng>."""
    if not isinstance(word, str) or not word:
        raise ValueError(f"word must be a non-empty str, got {word!r}")
    if not 1 <= n_min <= n_max:
        raise ValueError(f"need 1 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
    w = f"<{word}>"
    return [w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n + 1) if w[i:i + n] != w]


def ngram_bucket(ngram: str, buckets: int) -> int:
    """fastText's bucket of an n-gram: 32-bit FNV-1a of its UTF-8 bytes, modulo ``buckets``.

    As in fastText's C++ code, each byte is sign-extended (read as a signed char) before the XOR, which
    differs from textbook FNV-1a for bytes >= 0x80.
    """
    h = 2166136261
    for b in ngram.encode("utf-8"):
        h = (h ^ (b - 256 if b >= 128 else b)) & 0xFFFFFFFF
        h = (h * 16777619) & 0xFFFFFFFF
    return h % buckets


# ---------------------------------------------------------------------------------------------------------
# Models and losses
# ---------------------------------------------------------------------------------------------------------

def sgns_loss(center: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
    """Skip-gram negative-sampling loss, averaged over the batch (chapter 6).

    loss = -mean_b [ log s(u_+ . v) + sum_k log s(-u_k . v) ],  s = sigmoid.
    Shapes: center v (B, d), positive u_+ (B, d), negatives u_k (B, K, d). ``F.logsigmoid`` keeps it
    finite for large scores, where log(sigmoid(x)) would give log(0).
    """
    if center.dim() != 2 or positive.shape != center.shape:
        raise ValueError(f"center and positive must both be (B, d), got {tuple(center.shape)} and "
                         f"{tuple(positive.shape)}")
    if negatives.dim() != 3 or negatives.shape[0] != center.shape[0] or negatives.shape[2] != center.shape[1]:
        raise ValueError(f"negatives must be (B, K, d) = ({center.shape[0]}, K, {center.shape[1]}), "
                         f"got {tuple(negatives.shape)}")
    pos = (center * positive).sum(-1)  # (B,)
    neg = torch.einsum("bkd,bd->bk", negatives, center)  # (B, K)
    return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()


class SkipGram(nn.Module):
    """Two tables: centre vectors v (the word vectors) and context vectors u, both (V, d).

    Initialised as in word2vec: v uniform in [-0.5/d, 0.5/d], u zero. With ``buckets`` > 0 (fastText) the
    centre vector of word w is the mean of v[w] and of the bucket vectors of its character n-grams,
    given by ``ngram_index`` (V, M) padded with -1.
    """

    def __init__(self, vocab_size: int, dim: int, buckets: int = 0, ngram_index: torch.Tensor | None = None):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("dim", dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.center = nn.Embedding(vocab_size, dim)
        self.context = nn.Embedding(vocab_size, dim)
        nn.init.uniform_(self.center.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.context.weight)
        self.ngrams = None
        if buckets:
            if ngram_index is None or ngram_index.shape[0] != vocab_size:
                raise ValueError("fastText needs ngram_index, a (vocab_size, M) tensor of bucket ids")
            self.ngrams = nn.EmbeddingBag(buckets + 1, dim, mode="sum", padding_idx=buckets)  # last row pads
            nn.init.uniform_(self.ngrams.weight, -0.5 / dim, 0.5 / dim)
            with torch.no_grad():
                self.ngrams.weight[buckets].zero_()
            index = ngram_index.clone()
            index[index < 0] = buckets
            self.register_buffer("ngram_index", index)

    def word_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        """Centre vectors of ``ids`` (B,) -> (B, d), n-grams included for fastText."""
        v = self.center(ids)
        if self.ngrams is None:
            return v
        unique, inverse = torch.unique(ids, return_inverse=True)  # compose each distinct word once
        grams = self.ngram_index[unique]  # (U, M)
        n = 1 + (grams != self.ngrams.padding_idx).sum(-1, keepdim=True)  # (U, 1): the word + its n-grams
        return (v + self.ngrams(grams)[inverse]) / n[inverse]

    def forward(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """The SGNS loss for centre ids (B,), context ids (B,) and negative ids (B, K)."""
        return sgns_loss(self.word_vectors(center), self.context(context), self.context(negatives))


class CBOW(nn.Module):
    """Continuous bag of words: h = mean of the context vectors, scores u = W' h, softmax over V.

    loss = -log softmax(W' h)[centre], averaged over the batch. Word order inside the window is ignored.
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        self.center = nn.Embedding(vocab_size + 1, dim, padding_idx=vocab_size)  # row V pads short contexts
        self.output = nn.Linear(dim, vocab_size, bias=False)
        nn.init.uniform_(self.center.weight, -0.5 / dim, 0.5 / dim)
        with torch.no_grad():
            self.center.weight[vocab_size].zero_()
        nn.init.zeros_(self.output.weight)

    def forward(self, contexts: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
        """contexts (B, C) with -1 for padding, centres (B,) -> mean cross-entropy."""
        pad = self.center.padding_idx
        ids = torch.where(contexts < 0, torch.full_like(contexts, pad), contexts)
        n = (contexts >= 0).sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
        h = self.center(ids).sum(1) / n  # (B, d)
        return F.cross_entropy(self.output(h), centres)


# ---------------------------------------------------------------------------------------------------------
# Training and querying
# ---------------------------------------------------------------------------------------------------------

@dataclass
class Word2VecConfig:
    model: str = "skipgram"  # "skipgram" (negative sampling), "cbow" (full softmax) or "fasttext"
    dim: int = 50  # embedding size d
    window: int = 4  # context words on each side
    negatives: int = 5  # K negatives per positive pair (skip-gram, fastText)
    power: float = 0.75  # negatives ~ count^power
    min_count: int = 5  # rarer words are dropped from the vocabulary
    subsample: float = 1e-3  # t of frequent-word subsampling; 0 turns it off
    epochs: int = 5
    batch_size: int = 4096
    lr: float = 0.02  # Adam
    n_min: int = 3  # fastText n-gram lengths
    n_max: int = 5
    buckets: int = 20000  # fastText hash buckets (fastText's default is 2,000,000)
    seed: int = 0


@dataclass
class WordVectors:
    """Trained word vectors: ``vectors[i]`` is the vector of ``words[i]``."""

    words: list[str]
    vectors: np.ndarray  # (V, d)
    counts: np.ndarray  # (V,)
    losses: list[float] = field(default_factory=list)  # mean training loss per epoch
    ngram_vectors: np.ndarray | None = None  # fastText: (buckets, d)
    config: Word2VecConfig | None = None

    def __post_init__(self):
        self.index = {w: i for i, w in enumerate(self.words)}
        norms = np.linalg.norm(self.vectors, axis=1, keepdims=True)
        self._unit = self.vectors / np.maximum(norms, 1e-12)

    def vector(self, word: str) -> np.ndarray:
        """The vector of ``word``; for fastText also of an unseen word (the mean of its n-gram vectors)."""
        if word in self.index and self.ngram_vectors is None:
            return self.vectors[self.index[word]]
        if self.ngram_vectors is None:
            raise ValueError(f"{word!r} is not in the vocabulary of {len(self.words)} words (min_count="
                             f"{self.config.min_count if self.config else '?'}); fastText vectors cover OOV words")
        if word in self.index:
            return self.vectors[self.index[word]]
        c = self.config
        grams = [ngram_bucket(g, c.buckets) for g in char_ngrams(word, c.n_min, c.n_max)]
        return self.ngram_vectors[grams].mean(0)

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words' vectors."""
        va, vb = self.vector(a), self.vector(b)
        return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb) + 1e-12))

    def nearest(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` vocabulary words most cosine-similar to ``word`` (itself excluded), best first."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        v = self.vector(word)
        sims = self._unit @ (v / (np.linalg.norm(v) + 1e-12))
        order = [i for i in np.argsort(-sims, kind="stable") if self.words[i] != word]
        return [(self.words[i], round(float(sims[i]), 6)) for i in order[:k]]


@contextmanager
def _one_thread():
    """Run torch on one CPU thread, then restore the setting. Word2vec's batches are tiny: a second thread
    only adds synchronisation (and on a busy machine, much more), and the result stops depending on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_word2vec(sentences, config: Word2VecConfig | None = None, device=None, **overrides) -> WordVectors:
    """Train skip-gram (SGNS), CBOW or fastText vectors on ``sentences`` (lists of words), chapter 6.

    ``train_word2vec(sents, model="cbow", epochs=2)`` overrides fields of :class:`Word2VecConfig`.
    Deterministic for a given seed on a given device (on the CPU it runs on one thread).
    """
    with _one_thread():
        return _train(sentences, config, device, overrides)


def _train(sentences, config, device, overrides) -> WordVectors:
    config = config or Word2VecConfig()
    for name in overrides:
        if name not in config.__dataclass_fields__:
            raise ValueError(f"unknown option {name!r}; Word2VecConfig has {list(config.__dataclass_fields__)}")
    config = replace(config, **overrides)  # a copy: the caller's config is left as it was
    if config.model not in ("skipgram", "cbow", "fasttext"):
        raise ValueError(f"model must be 'skipgram', 'cbow' or 'fasttext', got {config.model!r}")
    device = torch.device(device or "cpu")
    words, counts = build_vocab(sentences, config.min_count)
    index = {w: i for i, w in enumerate(words)}
    rng = np.random.default_rng(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)
    V = len(words)
    if config.model == "cbow":
        model = CBOW(V, config.dim)
    elif config.model == "fasttext":
        grams = [[ngram_bucket(g, config.buckets) for g in char_ngrams(w, config.n_min, config.n_max)]
                 for w in words]
        index_matrix = torch.full((V, max(map(len, grams))), -1, dtype=torch.long)
        for i, g in enumerate(grams):
            index_matrix[i, :len(g)] = torch.tensor(g)
        model = SkipGram(V, config.dim, buckets=config.buckets, ngram_index=index_matrix)
    else:
        model = SkipGram(V, config.dim)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    noise = torch.tensor(counts, dtype=torch.float64) ** config.power
    noise /= noise.sum()
    losses = []
    for _ in progress(range(config.epochs), desc=config.model):
        ids = _to_ids(sentences, index, counts, config.subsample, rng)  # a fresh subsample each epoch
        if config.model == "cbow":
            ctx, tgt = cbow_examples(ids, config.window)
            data = (torch.from_numpy(ctx), torch.from_numpy(tgt))
        else:
            pairs = torch.from_numpy(skipgram_pairs(ids, config.window))
            data = (pairs[:, 0], pairs[:, 1])
        order = torch.randperm(len(data[0]), generator=gen)
        total, n = 0.0, 0
        for start in range(0, len(order), config.batch_size):
            batch = order[start:start + config.batch_size]
            if config.model == "cbow":
                loss = model(data[0][batch].to(device), data[1][batch].to(device))
            else:
                neg = torch.multinomial(noise, len(batch) * config.negatives, replacement=True, generator=gen)
                loss = model(data[0][batch].to(device), data[1][batch].to(device),
                             neg.view(len(batch), config.negatives).to(device))  # (B, K)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, n = total + loss.item() * len(batch), n + len(batch)
        losses.append(total / n)
    with torch.no_grad():
        all_ids = torch.arange(V, device=device)
        vectors = model.word_vectors(all_ids) if config.model != "cbow" else model.center.weight[:V].detach()
        fasttext = config.model == "fasttext"
        ngram_vectors = model.ngrams.weight[:-1].detach().cpu().numpy() if fasttext else None
    return WordVectors(words, vectors.cpu().numpy(), counts, losses, ngram_vectors, config)


# ---------------------------------------------------------------------------------------------------------
# Hierarchical softmax
# ---------------------------------------------------------------------------------------------------------

def huffman_code(counts) -> tuple[torch.Tensor, torch.Tensor]:
    """A Huffman tree over V words, as the inputs of :func:`hierarchical_softmax_log_prob`.

    Returns ``paths`` (V, L): the inner nodes (ids 0..V-2) from the root down to each word, and ``codes``
    (V, L): the branch taken at each (0 = left, 1 = right), both padded with -1 to the longest path L.
    Frequent words get short paths: the count-weighted mean path length is within 1 of the entropy (in
    bits) of the word distribution. Ties are broken by insertion order, so the tree is deterministic.
    """
    import heapq

    counts = [int(c) for c in counts]
    if len(counts) < 2:
        raise ValueError(f"a Huffman tree needs at least 2 words, got {len(counts)}")
    heap = [(c, i, ("leaf", i)) for i, c in enumerate(counts)]
    heapq.heapify(heap)
    next_inner, serial = 0, len(counts)
    while len(heap) > 1:  # join the two rarest subtrees under a new inner node
        c0, _, left = heapq.heappop(heap)
        c1, _, right = heapq.heappop(heap)
        heapq.heappush(heap, (c0 + c1, serial, ("inner", next_inner, left, right)))
        next_inner, serial = next_inner + 1, serial + 1
    paths, codes = [[] for _ in counts], [[] for _ in counts]
    stack = [(heap[0][2], [], [])]
    while stack:
        node, path, code = stack.pop()
        if node[0] == "leaf":
            paths[node[1]], codes[node[1]] = path, code
            continue
        _, inner, left, right = node
        stack.append((left, path + [inner], code + [0]))
        stack.append((right, path + [inner], code + [1]))
    L = max(map(len, paths))
    return (torch.tensor([p + [-1] * (L - len(p)) for p in paths]),
            torch.tensor([c + [-1] * (L - len(c)) for c in codes]))


def hierarchical_softmax_log_prob(h: torch.Tensor, node_vectors: torch.Tensor, paths: torch.Tensor,
                                  codes: torch.Tensor) -> torch.Tensor:
    """log p(w | h) = sum_j log s((1 - 2 code_j) n_j . h) over the inner nodes n_j on w's path.

    Shapes: h (B, d), node_vectors (V-1, d), paths and codes (B, L) padded with -1 -> (B,). Going left
    (code 0) has probability s(n . h), right s(-n . h); they sum to 1 at every node, so the probabilities
    of all V leaves sum to 1, at a cost of L dot products instead of V.
    """
    mask = paths >= 0  # (B, L)
    nodes = node_vectors[paths.clamp(min=0)]  # (B, L, d)
    sign = 1.0 - 2.0 * codes.clamp(min=0).to(h.dtype)  # (B, L)
    scores = torch.einsum("bld,bd->bl", nodes, h) * sign
    return (F.logsigmoid(scores) * mask).sum(-1)


# ---------------------------------------------------------------------------------------------------------
# SGNS as implicit matrix factorisation
# ---------------------------------------------------------------------------------------------------------

def fit_sgns_to_counts(counts, dim: int, negatives: int = 5, steps: int = 2000, lr: float = 0.05,
                       seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimise the expected SGNS loss on a pair-count matrix (Levy & Goldberg 2014) by full-batch Adam with a
    cosine-decayed learning rate.

    loss(W, C) = -sum_{w,c} [ #(w,c) log s(W_w . C_c) + K #(w) #(c) / |D| log s(-W_w . C_c) ]
    with #(w), #(c) the row and column sums and |D| the total (negatives drawn from the context
    marginal, power 1). Its optimum, where the dimension allows, is W_w . C_c = PMI(w, c) - log K.
    Returns W (V, dim) and C (V', dim), in float64.
    """
    counts = torch.as_tensor(np.asarray(counts), dtype=torch.float64)
    if counts.dim() != 2 or (counts < 0).any() or counts.sum() == 0:
        raise ValueError("counts must be a non-negative 2-D matrix with at least one pair")
    g = torch.Generator().manual_seed(seed)
    W = (torch.randn(counts.shape[0], dim, generator=g, dtype=torch.float64) * 0.1).requires_grad_()
    C = (torch.randn(counts.shape[1], dim, generator=g, dtype=torch.float64) * 0.1).requires_grad_()
    expected_negatives = negatives * torch.outer(counts.sum(1), counts.sum(0)) / counts.sum()  # (V, V')
    optimizer = torch.optim.Adam([W, C], lr=lr)
    # A cosine decay to 0. At a constant rate Adam's per-coordinate steps need not shrink as the gradient
    # vanishes: it keeps moving by up to lr, in directions set by rounding, so the end point would differ
    # between CPUs.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / steps)))
    with _one_thread():
        for _ in range(steps):
            x = W @ C.T
            loss = -(counts * F.logsigmoid(x) + expected_negatives * F.logsigmoid(-x)).sum() / counts.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    return W.detach(), C.detach()


def _shifted_pmi(counts, negatives: int) -> np.ndarray:
    """PMI(w, c) - log K from a count matrix, -inf where the count is 0 (used by the tests)."""
    counts = np.asarray(counts, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(counts * counts.sum() / np.outer(counts.sum(1), counts.sum(0))) - math.log(negatives)
