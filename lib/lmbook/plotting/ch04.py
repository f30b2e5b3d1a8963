"""Chapter 4's figures: the Viterbi trellis with its back-pointers, and a tagger's confusion matrix."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from . import PALETTE

__all__ = ["TRELLIS_ALT", "CONFUSION_ALT", "BILSTM_ALT", "draw_trellis", "draw_confusion", "draw_bilstm"]

TRELLIS_ALT = ("A grid with one column per word of the sentence and one row per tag. Each node shows its best log "
               "score; a thin grey arrow joins it to its back-pointer in the previous column, and the best path, "
               "found by following the back-pointers from the best final node, is drawn thick in orange.")
CONFUSION_ALT = ("A heat map of gold tags (rows) against predicted tags (columns), each row normalised to sum to "
                 "one, with the diagonal removed so that the errors stand out; the darkest cells are the most "
                 "frequent confusions.")

BILSTM_ALT = ("A diagram with one column per word. From bottom to top: the word; its input vector x_t, a word "
              "embedding joined to a character-CNN vector; a row of forward LSTM states linked by arrows from left "
              "to right; a row of backward states linked from right to left; the two states of each word joined "
              "and mapped by a linear layer to tag scores, with the predicted tag on top.")


def draw_bilstm(words, tags, *, figsize=(8.0, 3.9)):
    """A schematic BiLSTM tagger over ``words``: inputs, forward and backward states, joined into tag scores."""
    T = len(words)
    fig, ax = plt.subplots(figsize=figsize)
    rows = [(1, "x_t = [word emb ; char CNN]", "#eeeeee"), (2, "forward  h→_t", "#d6e6f5"),
            (3, "backward h←_t", "#fde6d6"), (4, "softmax(W [h→_t ; h←_t] + b)", "#e3f1dc")]
    for t, (w, tag) in enumerate(zip(words, tags, strict=True)):
        ax.text(t, 0, w, ha="center", va="center", fontsize=11, style="italic")
        ax.text(t, 5, tag, ha="center", va="center", fontsize=11, weight="bold")
        for y, _, colour in rows:
            ax.add_patch(plt.Rectangle((t - 0.3, y - 0.28), 0.6, 0.56, fc=colour, ec="0.4", lw=0.8))
        for y0, y1, x, colour in [(0.2, 0.72, t, "0.4"), (1.28, 1.72, t, "0.4"), (4.28, 4.75, t, "0.4"),
                                  (1.28, 2.72, t + 0.4, "0.6"), (2.28, 3.72, t - 0.4, PALETTE[0]),
                                  (3.28, 3.72, t, PALETTE[1])]:  # x_t feeds both directions; both feed the output
            ax.annotate("", xy=(x, y1), xytext=(x, y0), arrowprops=dict(arrowstyle="->", color=colour, lw=0.9))
    for t in range(T - 1):
        for y, (x0, x1), colour in [(2, (t + 0.3, t + 0.7), PALETTE[0]), (3, (t + 0.7, t + 0.3), PALETTE[1])]:
            ax.annotate("", xy=(x1, y), xytext=(x0, y), arrowprops=dict(arrowstyle="->", color=colour, lw=1.6))
    for y, label, _ in rows:
        ax.text(T - 0.55, y, label, ha="left", va="center", fontsize=9)
    ax.set_xlim(-0.5, T + 1.9)
    ax.set_ylim(-0.5, 5.5)
    ax.axis("off")
    return fig


def draw_trellis(words, tags, result, *, figsize=(8.0, 3.8)):
    """Draw ``result`` (a :class:`lmbook.tagging.ViterbiResult`) over ``words`` (columns) and ``tags`` (rows)."""
    T, K = result.scores.shape
    fig, ax = plt.subplots(figsize=figsize)
    for t in range(1, T):
        for k in range(K):
            j = result.backpointers[t, k]
            ax.annotate("", xy=(t - 0.28, -k), xytext=(t - 1 + 0.28, -j),
                        arrowprops=dict(arrowstyle="->", color="0.65", lw=0.9))
    for t in range(1, T):
        a, b = result.path[t - 1], result.path[t]
        ax.annotate("", xy=(t - 0.28, -b), xytext=(t - 1 + 0.28, -a),
                    arrowprops=dict(arrowstyle="->", color=PALETTE[1], lw=2.6))
    for t in range(T):
        for k in range(K):
            on_path = result.path[t] == k
            ax.text(t, -k, f"{result.scores[t, k]:.1f}", ha="center", va="center", fontsize=9,
                    bbox=dict(boxstyle="round,pad=0.25", fc="#fde6d6" if on_path else "white",
                              ec=PALETTE[1] if on_path else "0.6", lw=1.6 if on_path else 0.8))
    ax.set_xticks(range(T), words)
    ax.set_yticks([-k for k in range(K)], tags)
    ax.xaxis.tick_top()
    ax.set_xlim(-0.5, T - 0.5)
    ax.set_ylim(-K + 0.5, 0.5)
    ax.grid(False)
    for side in ("left", "bottom", "top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    ax.set_xlabel("log delta[t, k]: the best score of a path ending in tag k at word t; arrows: back-pointers")
    return fig


def draw_confusion(matrix: np.ndarray, tags, *, title: str = "", figsize=(6.4, 5.4)):
    """A row-normalised confusion matrix (gold rows, predicted columns) with the diagonal blanked."""
    rates = matrix / np.maximum(matrix.sum(1, keepdims=True), 1)
    np.fill_diagonal(rates, np.nan)
    fig, ax = plt.subplots(figsize=figsize)
    image = ax.imshow(rates, cmap="Blues", vmin=0)
    ax.set_xticks(range(len(tags)), tags, rotation=90)
    ax.set_yticks(range(len(tags)), tags)
    ax.set(xlabel="predicted tag", ylabel="gold tag", title=title)
    ax.grid(False)
    fig.colorbar(image, ax=ax, shrink=0.8, label="share of the gold tag's words")
    return fig
