"""Chapter 6: the hierarchical softmax, p(w | h) as a product of binary decisions down a Huffman tree.

Put the V words at the leaves of a binary tree with one vector n_j per inner node. Going left at node j has
probability s(n_j . h), right s(-n_j . h) (s = sigmoid); the two sum to 1 at every node, so the products
along the paths sum to 1 over all leaves. A word costs one dot product per level of the tree instead of V.
Word2vec builds the tree by Huffman's algorithm from the word counts (:func:`huffman_code`), so frequent
words get short paths: the count-weighted mean path length is within 1 of the entropy of the counts.

Left out on purpose: trees from word clusters (Morin & Bengio's WordNet tree, Mnih & Hinton's learned one)
and the training loop (the chapter times one forward and backward pass).
"""

from __future__ import annotations

import heapq
from numbers import Integral

import numpy as np
import torch
import torch.nn.functional as F

from . import validate

__all__ = ["huffman_code", "hierarchical_softmax_log_prob"]


def huffman_code(counts) -> tuple[torch.Tensor, torch.Tensor]:
    """A Huffman tree over V words, as the inputs of :func:`hierarchical_softmax_log_prob` (chapter 6).

    ``counts`` (V,): the word counts, non-negative ints (a list or a 1-D integer array). Returns ``paths``
    (V, L): the inner nodes (ids 0..V-2) from the root down to each word, and ``codes`` (V, L): the branch
    taken at each (0 = left, 1 = right), both padded with -1 to the longest path L. Ties are broken by
    insertion order, so the tree is deterministic.
    """
    counts = _check_counts(counts)
    paths, codes = [[] for _ in counts], [[] for _ in counts]
    stack = [(_huffman_tree(counts), [], [])]
    while stack:  # walk down from the root, recording the inner nodes and the branches taken
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
    """log p(w | h) = sum_j log s((1 - 2 code_j) n_j . h) over the inner nodes n_j on w's path (chapter 6).

    Shapes: h (B, d), node_vectors (V-1, d), paths and codes (B, L) padded with -1 -> (B,). Going left
    (code 0) has probability s(n . h), right s(-n . h); they sum to 1 at every node, so the probabilities
    of all V leaves sum to 1, at a cost of L dot products instead of V.
    """
    _check_hierarchical_softmax(h, node_vectors, paths, codes)
    mask = paths >= 0  # (B, L)
    nodes = node_vectors[paths.clamp(min=0)]  # (B, L, d)
    sign = 1.0 - 2.0 * codes.clamp(min=0).to(h.dtype)  # (B, L)
    scores = torch.einsum("bld,bd->bl", nodes, h) * sign  # (B, L)
    return (F.logsigmoid(scores) * mask).sum(-1)


def _huffman_tree(counts: list[int]) -> tuple:
    """Huffman's algorithm: join the two rarest subtrees under a new inner node until one tree is left.

    A leaf is ("leaf", word id), an inner node ("inner", node id, left, right); inner ids count up from 0.
    """
    heap = [(c, i, ("leaf", i)) for i, c in enumerate(counts)]
    heapq.heapify(heap)
    next_inner, serial = 0, len(counts)
    while len(heap) > 1:
        c0, _, left = heapq.heappop(heap)
        c1, _, right = heapq.heappop(heap)
        heapq.heappush(heap, (c0 + c1, serial, ("inner", next_inner, left, right)))
        next_inner, serial = next_inner + 1, serial + 1
    return heap[0][2]


# ----- checks ------------------------------------------------------------------------------------------

def _check_counts(counts) -> list[int]:
    """``counts`` as a list of Python ints: a list, tuple or 1-D integer array of at least 2 counts >= 0."""
    if isinstance(counts, torch.Tensor):
        counts = counts.numpy(force=True) if counts.dim() == 1 and not counts.is_floating_point() else counts
    if isinstance(counts, np.ndarray):
        if counts.ndim != 1 or counts.dtype.kind not in "iu":
            raise TypeError(f"counts must be a 1-D array of integer counts, got {validate.describe(counts)}")
        counts = counts.tolist()
    validate.sequence("counts", counts, what="word counts")
    for i, c in enumerate(counts):
        if isinstance(c, bool) or not isinstance(c, Integral):
            raise TypeError(f"counts[{i}] must be an int count, got {validate.describe(c)}")
        if c < 0:
            raise ValueError(f"counts[{i}] must be a count >= 0, got {c}")
    if len(counts) < 2:
        raise ValueError(f"counts must hold at least 2 words for a Huffman tree, got {len(counts)}")
    return [int(c) for c in counts]


def _check_hierarchical_softmax(h, node_vectors, paths, codes) -> None:
    """Only the node vectors on the given paths are checked for NaN and inf: the others are never read, and
    scanning all V-1 of them would cost more than the O(L) dot products the method is for."""
    validate.tensor("h", h, ndim=2)
    if not h.shape[1]:
        raise ValueError(f"h must be (B, d) with d >= 1, got shape {tuple(h.shape)}")
    validate.tensor("node_vectors", node_vectors, shape=(None, h.shape[1]), finite=False)
    if node_vectors.dtype != h.dtype:
        raise TypeError(f"node_vectors must have the dtype of h ({h.dtype}), got {node_vectors.dtype}")
    validate.tensor("paths", paths, kind="int", shape=(h.shape[0], None))
    validate.tensor("codes", codes, kind="int", shape=tuple(paths.shape))
    if paths.numel() and (paths.min() < -1 or paths.max() >= len(node_vectors)):
        raise ValueError(f"paths must hold inner-node ids in [0, {len(node_vectors) - 1}] or -1 for padding, "
                         f"found {paths.min().item()}..{paths.max().item()}")
    if not torch.equal(codes < 0, paths < 0) or (codes > 1).any() or (codes < -1).any():
        raise ValueError("codes must be 0 (left) or 1 (right) where paths holds a node, and -1 where paths "
                         f"is padded with -1, got values {sorted(set(codes.unique().tolist()))}")
    if not _all_finite(node_vectors[paths.clamp(min=0)]):  # (B, L, d): the rows the method reads
        raise ValueError("node_vectors must be finite, but a node on the paths holds NaN or inf")


def _all_finite(x: torch.Tensor) -> bool:
    """A finite sum proves every entry finite in one pass; only a sum that is not finite needs the exact test."""
    return bool(torch.isfinite(x.detach().sum())) or bool(torch.isfinite(x).all())
