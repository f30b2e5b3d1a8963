"""Diagrams of attention and what is built on it: one head's data flow, the split into heads, the KV
cache and rotary positions (chapters 7, 11 and 12). Import them from :mod:`lmbook.plotting.diagrams`."""

from __future__ import annotations

import math

from ._draw import (BLUE, FONT, GREEN, INK, MONO, ORANGE, PINK, SMALL, VERMILION, arrow, box, canvas, grid, label,
                    path, tint)

HEADS = (BLUE, ORANGE, GREEN)  # one colour per head


def _scores(i, j):
    """A fixed, made-up pattern of scores for the small T x T grids, in [0, 1]."""
    return 0.25 + 0.6 * ((3 * i + 5 * j) % 7) / 6


def qkv_dataflow():
    """One causal attention head, from X to its output, with the shape of every matrix (chapter 7).

    X (T x d) is projected by W_Q, W_K (d x d_k) and W_V (d x d_v) to Q, K and V; the scores
    Q K^T / sqrt(d_k) (T x T) are masked above the diagonal, a softmax over each row gives A, and A V is the
    output (T x d_v). The small grids are T x T with T = 4."""
    fig, ax = canvas(8, 4.3)
    box(ax, 0.55, 2.1, 0.8, 0.8, "$X$\n$T \\times d$")
    names = [("Q", "k"), ("K", "k"), ("V", "v")]
    for (name, sub), y in zip(names, (3.45, 2.1, 0.75), strict=True):
        arrow(ax, (0.95, 2.1), (1.35, y))
        box(ax, 1.85, y, 1.0, 0.75, f"$W_{name}$\n$d \\times d_{sub}$", colour=GREEN)
        arrow(ax, (2.35, y), (2.7, y))
        box(ax, 3.15, y, 0.9, 0.75, f"${name}$\n$T \\times d_{sub}$", colour=ORANGE)
    cell, top = 0.2, 3.25
    panels = [(4.55, "$QK^\\top/\\sqrt{d_k}$", "$T \\times T$"), (5.95, "causal mask", "$-\\infty$ above\nthe diagonal"),
              (7.3, "softmax rows", "$A$: $T \\times T$")]
    fills = [lambda i, j: tint(BLUE, _scores(i, j)),
             lambda i, j: tint(BLUE, _scores(i, j)) if j <= i else VERMILION,
             lambda i, j: tint(PINK, 0.25 + 0.75 / (i + 1)) if j <= i else "white"]
    for (x, title, below), fill in zip(panels, fills, strict=True):
        grid(ax, x - 2 * cell, top, 4, 4, cell, fill)
        label(ax, x, top + 0.25, title)
        label(ax, x, top - 4 * cell - 0.12, below, SMALL, va="top")
    arrow(ax, (3.6, 3.45), (4.1, 2.95))
    arrow(ax, (3.6, 2.1), (4.1, 2.65))
    arrow(ax, (5.0, 2.85), (5.5, 2.85))
    arrow(ax, (6.4, 2.85), (6.85, 2.85))
    path(ax, [(3.6, 0.75), (6.58, 0.75)])
    arrow(ax, (7.3, 1.95), (7.3, 1.15))
    box(ax, 7.25, 0.75, 1.3, 0.8, "output $AV$\n$T \\times d_v$", colour=VERMILION)
    label(ax, 5.1, 0.95, "values", SMALL)
    return fig


def head_split_merge():
    """Multi-head attention as reshapes: split d into H slices, attend per head, merge (chapter 7).

    A (B, T, d) tensor such as Q = X W_Q is viewed as (B, T, H, d_head), with d = H d_head, and transposed
    to (B, H, T, d_head), so each head is a separate T x d_head matrix. Every head attends on its own; the
    outputs are transposed back, reshaped to (B, T, d) and multiplied by W_O. Drawn with T = 4, H = 3 and
    d_head = 3; the colours are the heads' slices of d."""
    fig, ax = canvas(8, 4.6)
    cell, T, dh = 0.17, 4, 3

    def by_head(i, j):
        return tint(HEADS[j // dh], 0.45)

    def head_grids(top, x0):
        for h in range(3):
            grid(ax, x0 + h * 0.82, top, T, dh, cell, lambda i, j, h=h: tint(HEADS[h], 0.45))
            label(ax, x0 + h * 0.82 + 0.25, top + 0.2, f"head {h + 1}", SMALL)

    grid(ax, 0.25, 4.0, T, 3 * dh, cell, by_head)
    label(ax, 1.02, 3.08, "(B, T, d)", SMALL, family=MONO)
    label(ax, 1.02, 4.3, "$Q = XW_Q$ (also $K$, $V$)", SMALL)
    arrow(ax, (1.9, 3.66), (2.55, 3.66), text="view", offset=(0, 0.24), family=MONO)
    grid(ax, 2.7, 4.0, T, 3 * dh, cell, by_head, gaps=(dh, 2 * dh))
    label(ax, 3.55, 3.08, "(B, T, H, d_head)", SMALL, family=MONO)
    label(ax, 3.55, 4.3, "$d = H \\cdot d_{\\mathrm{head}}$", SMALL)
    arrow(ax, (4.5, 3.66), (5.3, 3.66), text="transpose\n(1, 2)", offset=(0, 0.36), family=MONO)
    head_grids(4.0, 5.45)
    label(ax, 6.52, 3.08, "(B, H, T, d_head)", SMALL, family=MONO)
    arrow(ax, (6.52, 2.9), (6.52, 2.45))
    box(ax, 6.52, 2.15, 2.6, 0.55, "attention, each head alone", colour=VERMILION)
    arrow(ax, (6.52, 1.85), (6.52, 1.45))
    head_grids(1.1, 5.45)
    label(ax, 6.52, 0.18, "(B, H, T, d_head)", SMALL, family=MONO)
    arrow(ax, (5.3, 0.76), (4.5, 0.76), text="transpose,\nreshape", offset=(0, 0.36), family=MONO)
    grid(ax, 2.7, 1.1, T, 3 * dh, cell, by_head)
    label(ax, 3.47, 0.18, "(B, T, d)", SMALL, family=MONO)
    arrow(ax, (2.55, 0.76), (1.85, 0.76))
    box(ax, 1.15, 0.76, 1.2, 0.6, "$W_O$: $d \\times d$", colour=GREEN)
    label(ax, 1.15, 0.18, "→ (B, T, d)", SMALL, family=MONO)
    return fig
