"""Chapter 3's figure helpers: a small directed graph, and an undirected word graph, drawn with their nodes sized
by a score (PageRank)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Circle, FancyArrowPatch

from . import PALETTE

__all__ = ["draw_graph", "draw_word_graph"]


def draw_graph(ax, positions: dict, edges, scores: dict | None = None, above=(), bend: float = 0.12):
    """Draw the nodes at ``positions`` {name: (x, y)} and the links ``edges`` [(source, target), ...] on ``ax``;
    a node's area grows with ``scores[name]``, which is written under it (above it for the names in ``above``).
    Links in both directions are bent apart so that both arrows show."""
    scores = scores or {name: 1 / len(positions) for name in positions}
    top = max(scores.values())
    radius = {name: 0.09 + 0.16 * np.sqrt(scores[name] / top) for name in positions}
    pairs = set(edges)
    for a, b in edges:
        p0, p1 = np.array(positions[a], float), np.array(positions[b], float)
        u = (p1 - p0) / np.linalg.norm(p1 - p0)
        ax.add_patch(FancyArrowPatch(p0 + radius[a] * u, p1 - (radius[b] + 0.03) * u, arrowstyle="-|>",
                                     mutation_scale=14, color="#444444", linewidth=1.4, shrinkA=0, shrinkB=0,
                                     connectionstyle=f"arc3,rad={bend if (b, a) in pairs else 0}", zorder=1))
    for name, (x, y) in positions.items():
        ax.add_patch(Circle((x, y), radius[name], color=PALETTE[0], alpha=0.85, zorder=2))
        ax.text(x, y, name, ha="center", va="center", color="white", fontsize=12, fontweight="bold", zorder=3)
        up = name in above
        ax.text(x, y + (1 if up else -1) * (radius[name] + 0.05), f"{scores[name]:.3f}", ha="center",
                va="bottom" if up else "top", fontsize=10, zorder=3)
    xs, ys = zip(*positions.values(), strict=True)
    ax.set(xlim=(min(xs) - 0.6, max(xs) + 0.6), ylim=(min(ys) - 0.75, max(ys) + 0.5), aspect="equal")
    ax.axis("off")
    return ax


def draw_word_graph(ax, words: list, adjacency, scores):
    """Draw an undirected graph of ``words`` (the symmetric ``adjacency``, dense or sparse) on a circle, in the
    given order, each node's area growing with its score and its word written outside the circle."""
    A = adjacency.toarray() if hasattr(adjacency, "toarray") else np.asarray(adjacency)
    scores = np.asarray(scores, dtype=float)
    angle = np.pi / 2 - 2 * np.pi * np.arange(len(words)) / len(words)  # clockwise from the top
    xy = np.c_[np.cos(angle), np.sin(angle)]  # (V, 2)
    for i, j in zip(*np.triu(A, 1).nonzero(), strict=True):
        ax.plot(*xy[[i, j]].T, color="#777777", lw=1, zorder=1)
    ax.scatter(*xy.T, s=40 + 1400 * scores / scores.max(), color=PALETTE[0], alpha=0.85, zorder=2)
    for (x, y), word, a in zip(xy, words, angle, strict=True):
        ax.text(1.17 * x, 1.17 * y, word, ha="left" if np.cos(a) > 0.2 else "right" if np.cos(a) < -0.2 else "center",
                va="center", fontsize=10)
    ax.set(xlim=(-1.7, 1.7), ylim=(-1.3, 1.3), aspect="equal")
    ax.axis("off")
    return ax
