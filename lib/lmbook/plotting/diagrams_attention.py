"""Diagrams of attention and what is built on it: one head's data flow, the split into heads, the KV
cache and rotary positions (chapters 7, 11 and 12). Import them from :mod:`lmbook.plotting.diagrams`."""

from __future__ import annotations

import math

from matplotlib.patches import Arc, Circle

from ._draw import (
    BLUE,
    FONT,
    GREEN,
    INK,
    MONO,
    ORANGE,
    PINK,
    SMALL,
    VERMILION,
    arrow,
    box,
    canvas,
    grid,
    label,
    path,
    tint,
)

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
    panels = [(4.55, "$QK^\\top/\\sqrt{d_k}$", "$T \\times T$"),
              (5.95, "causal mask", "$-\\infty$ above\nthe diagonal"), (7.3, "softmax rows", "$A$: $T \\times T$")]
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

    A (B, T, d) tensor such as Q = X W_Q is viewed as (B, T, H, d_k), with d = H d_k, and transposed
    to (B, H, T, d_k), so each head is a separate T x d_k matrix. Every head attends on its own; the
    outputs are transposed back, reshaped to (B, T, d) and multiplied by W_O. Drawn with T = 4, H = 3 and
    d_k = 3; the colours are the heads' slices of d."""
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
    label(ax, 3.55, 3.08, "(B, T, H, d_k)", SMALL, family=MONO)
    label(ax, 3.55, 4.3, "$d = H \\cdot d_k$", SMALL)
    arrow(ax, (4.5, 3.66), (5.3, 3.66), text="transpose\n(1, 2)", offset=(0, 0.36), family=MONO)
    head_grids(4.0, 5.45)
    label(ax, 6.52, 3.08, "(B, H, T, d_k)", SMALL, family=MONO)
    arrow(ax, (6.52, 2.9), (6.52, 2.45))
    box(ax, 6.52, 2.15, 2.6, 0.55, "attention, each head alone", colour=VERMILION)
    arrow(ax, (6.52, 1.85), (6.52, 1.45))
    head_grids(1.1, 5.45)
    label(ax, 6.52, 0.18, "(B, H, T, d_k)", SMALL, family=MONO)
    arrow(ax, (5.3, 0.76), (4.5, 0.76), text="transpose,\nreshape", offset=(0, 0.36), family=MONO)
    grid(ax, 2.7, 1.1, T, 3 * dh, cell, by_head)
    label(ax, 3.47, 0.18, "(B, T, d)", SMALL, family=MONO)
    arrow(ax, (2.55, 0.76), (1.85, 0.76))
    box(ax, 1.15, 0.76, 1.2, 0.6, "$W_O$: $d \\times d$", colour=GREEN)
    label(ax, 1.15, 0.18, "output (B, T, d)", SMALL, family=MONO)
    label(ax, 0.25, 2.15, "Every head sees all $T$ positions,\nbut only its own $d_k$ features.",
          SMALL, ha="left")
    return fig


def _rows(ax, x, names, colours, top=3.2, w=0.7, step=0.36, size=FONT):
    """A column of matrix rows drawn as labelled bars, the first at height ``top``."""
    for k, (name, colour) in enumerate(zip(names, colours, strict=True)):
        box(ax, x, top - k * step, w, 0.28, name, colour=colour, fill=0.35, size=size)


def kv_cache_append():
    """One decoding step with a KV cache, next to the same step without one (chapter 11).

    Step t = 5 generates x_6 from the newest known token x_5. With a cache, k_1..k_4 and v_1..v_4 are
    read from the cache, only q_5, k_5 and v_5 are computed, k_5 and v_5 are appended, and q_5 is scored
    against all five keys: work that grows like t. Without a cache, the step recomputes the queries, keys
    and values of all t tokens and all t x t scores, although only the last row is new: work like t^2."""
    fig, ax = canvas(8, 4.6)
    ax.plot([4.3, 4.3], [0.85, 4.4], color=INK, linewidth=1.2)
    label(ax, 2.15, 4.2, "with a KV cache, step $t = 5$", weight="bold")
    label(ax, 6.15, 4.2, "without a cache, same step", weight="bold")
    old, new = [BLUE] * 4, [ORANGE]
    for x, head, name in [(1.95, "keys", "k"), (3.3, "values", "v")]:
        label(ax, x, 3.62, head, SMALL)
        _rows(ax, x, [f"${name}_{j}$" for j in range(1, 6)], old + new)
    box(ax, 0.55, 1.76, 0.6, 0.28, "$q_5$", colour=ORANGE, fill=0.35)
    label(ax, 0.55, 2.12, "query", SMALL)
    for j in range(5):
        arrow(ax, (0.86, 1.76), (1.58, 3.2 - 0.36 * j), lw=1.1)
    box(ax, 0.55, 0.95, 0.6, 0.4, "$x_5$", colour=ORANGE, fill=0.35)
    arrow(ax, (0.55, 1.15), (0.55, 1.6))
    path(ax, [(0.85, 0.95), (1.95, 0.95), (1.95, 1.6)])
    path(ax, [(1.95, 0.95), (3.3, 0.95), (3.3, 1.6)])
    label(ax, 2.62, 0.72, "append $k_5$, $v_5$", SMALL)
    label(ax, 2.15, 0.3, "1 query $\\times$ 5 keys: work $\\propto t$", SMALL)
    for x, name in [(4.85, "x"), (5.7, "q"), (6.55, "k"), (7.4, "v")]:
        _rows(ax, x, [f"${name}_{j}$" for j in range(1, 6)], [ORANGE] * 5, w=0.6)
    label(ax, 4.85, 3.62, "tokens", SMALL)
    arrow(ax, (5.2, 3.62), (5.55, 3.62), lw=1.4)
    label(ax, 6.55, 3.62, "all recomputed", SMALL)
    label(ax, 6.15, 1.2, "5 $\\times$ 5 scores, only row 5 is new:\n work $\\propto t^2$", SMALL)
    for y, colour, text in [(0.55, BLUE, "read from the cache"), (0.2, ORANGE, "computed in this step")]:
        box(ax, 4.75, y, 0.3, 0.22, colour=colour, fill=0.35)
        label(ax, 5.0, y, text, SMALL, ha="left")
    return fig


def _plane(ax, cx, cy, title, r=0.85):
    """One RoPE plane: the circle a pair (x_2i, x_2i+1) moves on when it is rotated, and a title."""
    ax.add_patch(Circle((cx, cy), r, fill=False, edgecolor=INK, linewidth=1.2))
    ax.add_patch(Circle((cx, cy), 0.04, color=INK))
    label(ax, cx, cy + r + 0.55, title)


def _vector(ax, cx, cy, angle, length, colour, text="", half_width=0.25):
    """An arrow from the centre at ``angle``, its label just beyond the tip (``half_width`` in inches)."""
    c, s = math.cos(angle), math.sin(angle)
    arrow(ax, (cx, cy), (cx + length * c, cy + length * s), colour, lw=2.2)
    if text:
        label(ax, cx + length * c + c * (0.08 + half_width), cy + length * s + s * 0.2, text, SMALL)


def rope_rotation():
    """RoPE in one plane: the pair (x_{2i}, x_{2i+1}) turned by m theta_i at positions m = 0..3 (chapter 12).

    Left, a fast plane (theta_i = 1 radian per position) and, middle, a slow one (theta_i = 0.3): the same
    vector at positions 0 to 3. Right, a query (blue) at m and a key (vermillion) at n for (m, n) = (0, 2)
    and (3, 5): both pairs are 2 positions apart, so the angle between them, and their dot product, is the
    same. In symbols q~_m^T k~_n = q^T R(n - m) k."""
    fig, ax = canvas(8, 3.5)
    cy = 1.85
    for cx, theta, title in [(1.6, 1.0, "fast plane: $\\theta_i = 1$"), (4.05, 0.3, "slow plane: $\\theta_i = 0.3$")]:
        _plane(ax, cx, cy, title)
        for m in range(4):
            _vector(ax, cx, cy, 0.3 + m * theta, 0.85, BLUE, f"$m={m}$")
    cx, theta, base = 6.75, 0.8, 0.4  # q and k start at the same angle, base
    _plane(ax, cx, cy, "query at $m$, key at $n$")
    for (m, n), r in [((0, 2), 0.3), ((3, 5), 0.3)]:
        _vector(ax, cx, cy, base + m * theta, 0.85, BLUE, f"$\\tilde q_{m}$", half_width=0.1)
        _vector(ax, cx, cy, base + n * theta, 0.62, VERMILION, f"$\\tilde k_{n}$", half_width=0.1)
        ax.add_patch(Arc((cx, cy), 2 * r, 2 * r, theta1=math.degrees(base + m * theta),
                         theta2=math.degrees(base + n * theta), color=INK, linewidth=1.4))
        mid = base + (m + n) / 2 * theta
        label(ax, cx + 0.5 * math.cos(mid), cy + 0.5 * math.sin(mid), "$2\\theta_i$", SMALL)
    label(ax, 4.0, 0.5, "Plane $i$ is a pair of coordinates, $(x_{2i}, x_{2i+1})$ or $(x_i, x_{i+d/2})$; "
          "at position $m$ it is turned by $m\\theta_i$: $\\tilde q_m = R(m)\\,q_m$.", SMALL)
    label(ax, 4.0, 0.18, "$\\tilde q_m^{\\top} \\tilde k_n = q_m^{\\top} R(n-m)\\, k_n$ depends on $n - m$ only: "
          "(0, 2) and (3, 5) meet at the same angle.", SMALL)
    return fig
