"""Chapter 6: dense retrieval, a text as one vector and search as cosine similarity; and how to score a ranking.

- :func:`mean_vector`: a bag of words (or tokens) as the mean of their vectors, the simplest text embedding;
- :func:`hidden_states` and :func:`mean_pooled_states`: a language model's residual stream after each layer
  (:class:`lmbook.model.Transformer`, e.g. SmolLM2), averaged over a text's tokens (the first, an attention
  sink, left out);
- :func:`cosine_rank`: every document ranked for every query by cosine similarity;
- :func:`average_precision` (its mean over queries is MAP) and :func:`evaluate`, which reports P@1, MRR and MAP
  with chapter 2's measures from :mod:`lmbook.ranking`.

Fusion with BM25 is chapter 2's :func:`lmbook.ranking.reciprocal_rank_fusion`. Left out on purpose: trained
retrievers (contrastive bi-encoders such as DPR), approximate nearest-neighbour indexes, and re-ranking.
"""

from __future__ import annotations

import numpy as np
import torch

from . import validate
from .model import embed, next_positions, rope_angles
from .ranking import _check_ranked, _check_ranking, precision_at_k, reciprocal_rank

__all__ = ["mean_vector", "hidden_states", "mean_pooled_states", "cosine_rank", "average_precision", "evaluate"]


def mean_vector(tokens, vectors: np.ndarray, index: dict) -> np.ndarray:
    """(1/n) sum of vectors[index[t]] over the n tokens t that ``index`` knows; zeros (d,) if it knows none.

    vectors (V, d); index maps a token to its row. Repeated tokens count once per occurrence.
    """
    _check_mean_vector(tokens, vectors, index)
    rows = [index[t] for t in tokens if t in index]
    return vectors[rows].mean(0) if rows else np.zeros(vectors.shape[1], dtype=vectors.dtype)  # (d,)


@torch.no_grad()
def hidden_states(model, ids: torch.Tensor) -> torch.Tensor:
    """The residual stream x_0 = E[ids], x_l = block_l(x_{l-1}) of a :class:`Transformer` for ids (T,):
    shape (L + 1, T, d), row 0 the static embeddings, row L the input of the final norm (chapter 9)."""
    _check_hidden_states(model, ids)
    ids = ids[None]  # (1, T)
    positions = next_positions(ids, None)  # (T,)
    x = embed(model, ids, positions)  # (1, T, d)
    rope = None if model.inv_freq is None else rope_angles(positions, model.inv_freq, x.dtype)
    states = [x[0]]
    for block in model.blocks:
        x = block(x, rope, None)
        states.append(x[0])
    return torch.stack(states)  # (L + 1, T, d)


def mean_pooled_states(model, ids: torch.Tensor, layers) -> np.ndarray:
    """The mean over tokens 1 .. T-1 of the residual stream after each of ``layers``: (len(layers), d), float64.

    Token 0 is left out (unless T = 1): a causal model parks attention on the first position, whose state
    grows a norm a hundred times or more the others' (an "attention sink") and would dominate the mean. Start
    ``ids`` with a BOS token (SmolLM2's tokenizer adds none), so that the token left out is not a word of the text.
    """
    states = hidden_states(model, ids)  # (L + 1, T, d)
    _check_layers(layers, len(states) - 1)
    kept = states[list(layers), 1:] if states.shape[1] > 1 else states[list(layers)]  # (len(layers), T', d)
    return kept.double().mean(1).cpu().numpy()  # (len(layers), d)


def cosine_rank(queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """cos(q, d) = q.d / (|q| |d|) for queries (Q, d) and docs (N, d); returns (Q, N) document indices, each
    row best first (ties keep document order). Computed in float64; a zero vector has cosine 0 with all."""
    _check_cosine_rank(queries, docs)
    q = np.asarray(queries, dtype=np.float64)
    k = np.asarray(docs, dtype=np.float64)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)  # (Q, d), unit rows
    k = k / np.maximum(np.linalg.norm(k, axis=1, keepdims=True), 1e-12)  # (N, d)
    return np.argsort(-(q @ k.T), axis=1, kind="stable")  # (Q, N)


def average_precision(ranked, relevant: set) -> float:
    """AP = (1/|R|) sum over the ranks k of the relevant documents in ``ranked`` of P@k, R = ``relevant``;
    a relevant document that is never retrieved adds 0. Its mean over queries is MAP."""
    _check_ranked(ranked, relevant)
    hits, total = 0, 0.0
    for k, doc in enumerate(ranked, start=1):
        if doc in relevant:
            hits += 1
            total += hits / k  # P@k at the rank of each relevant document
    return total / len(relevant)


def evaluate(rankings, relevant_sets) -> dict[str, float]:
    """Mean P@1, MRR and MAP of ``rankings`` (one list of document ids per query, best first) against
    ``relevant_sets`` (one set of relevant ids per query)."""
    _check_evaluate(rankings, relevant_sets)
    pairs = list(zip(rankings, relevant_sets, strict=True))
    return {"P@1": float(np.mean([precision_at_k(r, rel, 1) for r, rel in pairs])),
            "MRR": float(np.mean([reciprocal_rank(r, rel) for r, rel in pairs])),
            "MAP": float(np.mean([average_precision(r, rel) for r, rel in pairs]))}


# ----- argument checks ---------------------------------------------------------------------------------

def _check_array(name: str, value, ndim: int) -> None:
    if not isinstance(value, np.ndarray) or value.ndim != ndim or not np.issubdtype(value.dtype, np.floating):
        raise TypeError(f"{name} must be a {ndim}-D float numpy array, got {validate.describe(value)}")
    if value.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {value.shape}")
    if not np.isfinite(value).all():
        raise ValueError(f"{name} must be finite, but it holds NaN or inf")


def _check_mean_vector(tokens, vectors, index) -> None:
    validate.strings("tokens", tokens, empty=True)
    _check_array("vectors", vectors, 2)
    if not isinstance(index, dict) or not index:
        raise TypeError(f"index must be a non-empty dict from token to row of vectors, got {validate.describe(index)}")
    bad = [t for t in tokens if t in index and not 0 <= index[t] < len(vectors)]
    if bad:
        raise ValueError(f"index maps {bad[0]!r} to row {index[bad[0]]}, outside the {len(vectors)} rows of vectors")


def _check_hidden_states(model, ids) -> None:
    if not hasattr(model, "blocks") or not hasattr(model, "tok_emb"):
        raise TypeError(f"model must be an lmbook.model.Transformer, got {validate.describe(model)}")
    validate.token_ids("ids", ids, model.config.vocab_size, ndim=1)
    if ids.numel() == 0:
        raise ValueError("ids must hold at least one token id, got an empty tensor")


def _check_layers(layers, n_layers: int) -> None:
    validate.sequence("layers", layers, what="layer numbers")
    for i, layer in enumerate(layers):
        validate.integer(f"layers[{i}]", layer, low=0, high=n_layers)


def _check_cosine_rank(queries, docs) -> None:
    _check_array("queries", queries, 2)
    _check_array("docs", docs, 2)
    if queries.shape[1] != docs.shape[1]:
        raise ValueError(f"queries and docs must have the same width d, got {queries.shape[1]} and {docs.shape[1]}")


def _check_evaluate(rankings, relevant_sets) -> None:
    validate.sequence("rankings", rankings, what="rankings, one per query")
    validate.sequence("relevant_sets", relevant_sets, what="sets of relevant ids, one per query")
    for i, ranking in enumerate(rankings):
        _check_ranking(f"rankings[{i}]", ranking)
    if len(rankings) != len(relevant_sets):
        raise ValueError(f"rankings and relevant_sets must have one entry per query each, got {len(rankings)} "
                         f"and {len(relevant_sets)}")
