"""Chapter 3: PageRank by power iteration, the Google matrix, personalised PageRank, and the graph of
cross-references between the topics of the Python manual.

Conventions, the same as networkx's ``pagerank`` (so the tests use it as an exact oracle):

- a graph is an adjacency matrix A, dense or scipy sparse, with A[i, j] >= 0 the weight of the link i -> j;
- the random surfer's step is P = A with each row divided by its sum (row-stochastic);
- a **dangling** node (no out-links, row sum 0) jumps to the distribution ``dangling``, which defaults to the
  teleport distribution ``personalization``, which defaults to uniform;
- scores form a probability vector (they sum to 1), a row vector x with x <- x G.

Left out on purpose: HITS and other link-analysis scores, Monte Carlo and incremental PageRank, block and
aggregation methods for web-scale graphs, and fetching real web links (the manual's own references are the
real graph here).
"""

from __future__ import annotations

import re
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from . import validate

__all__ = ["PageRankResult", "transition_matrix", "google_matrix", "pagerank", "headings", "cross_references"]


class PageRankResult(NamedTuple):
    """What :func:`pagerank` returns: the scores, the L1 change of each iteration, and whether it converged."""

    scores: np.ndarray  # (n,), non-negative, sums to 1
    changes: list  # ||x_t - x_{t-1}||_1 for t = 1, 2, ...
    converged: bool


def transition_matrix(adjacency) -> tuple[sp.csr_matrix, np.ndarray]:
    """The surfer's step P[i, j] = A[i, j] / sum_k A[i, k], a sparse (n, n) matrix, and the boolean mask of the
    dangling nodes, whose rows of P stay 0 (chapter 3)."""
    _check_adjacency(adjacency)
    A = sp.csr_matrix(adjacency, dtype=np.float64)  # (n, n)
    out_weight = np.asarray(A.sum(axis=1)).ravel()  # (n,)
    is_dangling = out_weight == 0
    inverse = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=~is_dangling)
    return sp.csr_matrix(sp.diags(inverse) @ A), is_dangling


def google_matrix(adjacency, damping: float = 0.85, personalization=None, dangling=None) -> np.ndarray:
    """G = d (P + m w^T) + (1 - d) 1 v^T, dense (n, n) and row-stochastic: follow a link with probability d,
    from a dangling node (m its mask) jump by w, and teleport by v with probability 1 - d (chapter 3)."""
    _check_pagerank(adjacency, damping, personalization, dangling)
    P, is_dangling = transition_matrix(adjacency)
    v, w = _teleport(P.shape[0], personalization, dangling)
    S = P.toarray() + np.outer(is_dangling, w)  # (n, n): every row sums to 1
    return damping * S + (1 - damping) * np.outer(np.ones(P.shape[0]), v)


def pagerank(adjacency, damping: float = 0.85, personalization=None, dangling=None, tol: float = 1e-10,
             max_iter: int = 1000) -> PageRankResult:
    """Power iteration x <- d (x P + (x . m) w) + (1 - d) v from the uniform x, until ||x_t - x_{t-1}||_1 < tol:
    x G without forming G, one sparse product per step (chapter 3). d is in [0, 1) (0: pure teleport);
    ``personalization`` (v) and ``dangling`` (w) are weights >= 0 per node, normalised here; w defaults to v,
    v to uniform."""
    _check_pagerank(adjacency, damping, personalization, dangling, tol, max_iter)
    P, is_dangling = transition_matrix(adjacency)
    n = P.shape[0]
    v, w = _teleport(n, personalization, dangling)
    P_T = P.T.tocsr()  # x P computed as P^T x
    x, changes = np.full(n, 1.0 / n), []
    for _ in range(max_iter):
        new = damping * (P_T @ x + x[is_dangling].sum() * w) + (1 - damping) * v  # (n,)
        changes.append(float(np.abs(new - x).sum()))
        x = new
        if changes[-1] < tol:
            return PageRankResult(x, changes, True)
    warnings.warn(f"pagerank did not converge to tol={tol} in {max_iter} iterations", stacklevel=2)
    return PageRankResult(x, changes, False)


def _teleport(n: int, personalization, dangling) -> tuple[np.ndarray, np.ndarray]:
    """(v, w): the teleport and dangling distributions, normalised; w defaults to v, v to uniform."""
    v = np.full(n, 1.0 / n) if personalization is None else np.asarray(personalization, float) / np.sum(
        personalization)
    w = v if dangling is None else np.asarray(dangling, float) / np.sum(dangling)
    return v, w


# ----- the manual's cross-references ------------------------------------------------------------------

_UNDERLINE = re.compile(r"([*=\-~^])\1{2,}")


def _normal(text: str) -> str:
    """Drop the double quotes that mark code in the manual's plain text and collapse runs of whitespace."""
    return re.sub(r"\s+", " ", text.replace('"', "")).strip()


def headings(text: str) -> list[tuple[str, bool]]:
    """The headings of a topic, as (title, is_the_topic_title): a line underlined by ``***`` is the topic's
    own title, ``===``, ``---`` and the others mark its subsections (chapter 3)."""
    validate.string("text", text, empty=True)
    lines = text.split("\n")
    return [(_normal(lines[i]), lines[i + 1][0] == "*") for i in range(len(lines) - 1)
            if lines[i].strip() and _UNDERLINE.fullmatch(lines[i + 1])]


def cross_references(documents: dict) -> tuple[list, sp.csr_matrix, list]:
    """The graph of which topic refers to which: (names, A, links), A[i, j] the number of references from
    topic i to topic j, and links the evidence as (source, cited title, targets) (chapter 3).

    The manual's text keeps a reference as the cited section's title after a cue: "section T", "see T",
    "see also T", "described in T" or "the T section". T resolves to the topics whose own title it is, else to
    those that hold it as a subsection; a reference to k topics adds 1/k to each; a topic citing itself is
    dropped."""
    _check_documents(documents)
    names = list(documents)
    own, sub = {}, {}  # title -> the topics whose own title it is / that hold it as a subsection
    for name, text in documents.items():
        for title, is_own in headings(text):
            (own if is_own else sub).setdefault(title, set()).add(name)
    owners = {title: sorted(own.get(title) or sub[title]) for title in own.keys() | sub.keys()}
    titles = "|".join(re.escape(t) for t in sorted(owners, key=lambda t: (-len(t), t))) or "(?!)"  # longest first
    cue = re.compile(rf"(?:\b[Ss]ections?|\b[Ss]ee(?: also)?|\bdescribed in)\s+(?:the\s+)?({titles})\b"
                     rf"|\b[Tt]he\s+({titles})\s+section\b")
    A, links = sp.lil_matrix((len(names), len(names))), []
    for i, name in enumerate(names):
        for match in cue.finditer(_normal(documents[name])):
            title = match.group(1) or match.group(2)
            targets = owners[title]
            if name in targets:
                continue
            links.append((name, title, targets))
            for target in targets:
                A[i, names.index(target)] += 1 / len(targets)
    return names, A.tocsr(), links


# ----- argument checks ---------------------------------------------------------------------------------

def _check_adjacency(adjacency) -> None:
    if not (isinstance(adjacency, np.ndarray) or sp.issparse(adjacency)):
        raise TypeError(f"adjacency must be a square numpy array or scipy sparse matrix, got "
                        f"{validate.describe(adjacency)}")
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1] or adjacency.shape[0] == 0:
        raise ValueError(f"adjacency must be a non-empty square (n, n) matrix, got shape {adjacency.shape}")
    values = adjacency.data if sp.issparse(adjacency) else adjacency
    if not np.issubdtype(values.dtype, np.number) or np.issubdtype(values.dtype, np.complexfloating):
        raise TypeError(f"adjacency must hold real link weights, got dtype {values.dtype}")
    if values.size and (not np.isfinite(values).all() or (values < 0).any()):
        raise ValueError("adjacency must hold finite link weights >= 0 (A[i, j] is the weight of i -> j)")


def _check_distribution(name: str, weights, n: int) -> None:
    if weights is None:
        return
    if isinstance(weights, (str, bytes, dict)) or not isinstance(weights, (list, tuple, np.ndarray)):
        raise TypeError(f"{name} must be a list or array of {n} weights >= 0, got {validate.describe(weights)}")
    array = np.asarray(weights)
    if array.shape != (n,) or not np.issubdtype(array.dtype, np.number) or array.dtype == bool:
        raise ValueError(f"{name} must hold {n} numbers (one per node), got {validate.describe(weights)}")
    if not np.isfinite(array).all() or (array < 0).any() or array.sum() <= 0:
        raise ValueError(f"{name} must hold finite weights >= 0 with a positive sum, got {validate.describe(weights)}")


def _check_pagerank(adjacency, damping, personalization, dangling, tol=1e-10, max_iter=1) -> None:
    _check_adjacency(adjacency)
    validate.number("damping", damping, low=0, high=1, high_open=True)  # d = 1 has no unique answer
    _check_distribution("personalization", personalization, adjacency.shape[0])
    _check_distribution("dangling", dangling, adjacency.shape[0])
    validate.number("tol", tol, low=0, low_open=True)
    validate.integer("max_iter", max_iter)


def _check_documents(documents) -> None:
    if not isinstance(documents, dict):
        raise TypeError(f"documents must be a dict of topic name -> text, got {validate.describe(documents)}")
    if not documents:
        raise ValueError("documents is empty: there is no topic to link")
    for name, text in documents.items():
        validate.string(f"documents[{name!r}]", text, empty=True)
