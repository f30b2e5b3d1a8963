"""Chapter 7's figure helper: an alignment matrix of attention weights (target words against source words)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["ALIGNMENT_ALT", "draw_alignment"]

ALIGNMENT_ALT = ("A four-by-four grid of attention weights: rows are the French words the decoder writes (le, chat, "
                 "noir, dort), columns the English source words (the, black, cat, sleeps), each cell printed with "
                 "its weight and shaded by it. The dark cells follow the diagonal except in the middle, where chat "
                 "takes most of its weight from cat and noir from black: the alignment crosses where French puts "
                 "the adjective after the noun.")


def draw_alignment(weights, source: list[str], target: list[str], ax=None, figsize=(4.2, 3.6)):
    """Draw weights (len(target), len(source)), each row one decoder step's distribution over the source
    words, as a shaded grid with the weight printed in every cell. Returns the figure."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2 or w.shape != (len(target), len(source)):
        raise ValueError(f"weights must have shape (len(target), len(source)) = ({len(target)}, {len(source)}), "
                         f"got {w.shape}")
    if not np.all(np.isfinite(w)) or w.min() < 0:
        raise ValueError("weights must be finite and non-negative")
    fig, ax = plt.subplots(figsize=figsize) if ax is None else (ax.figure, ax)
    ax.imshow(w, cmap="Blues", vmin=0, vmax=1)
    for (i, j), value in np.ndenumerate(w):
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=9,
                color="white" if value > 0.6 else "black")
    ax.set_xticks(range(len(source)), source)
    ax.set_yticks(range(len(target)), target)
    ax.set(xlabel="source word $h_j$", ylabel="target word written at step $t$")
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    ax.grid(False)
    return fig
