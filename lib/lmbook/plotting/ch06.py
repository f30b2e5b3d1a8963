"""Chapter 6's figure helper: a labelled scatter plot of word vectors whose labels do not overlap."""

from __future__ import annotations

import numpy as np

from . import PALETTE

__all__ = ["labelled_scatter"]

# Offsets (points) tried in turn for each label: right, left, above, below, then the diagonals, then further out.
_OFFSETS = [(4, 2), (-4, 2), (0, 7), (0, -9), (5, 7), (-5, 7), (5, -9), (-5, -9),
            (10, 12), (-10, 12), (10, -14), (-10, -14), (0, 16), (0, -18)]


def labelled_scatter(ax, xy: np.ndarray, labels: list[str], groups: list[int], names: list[str],
                     bold: set | None = None) -> None:
    """Scatter xy (n, 2) coloured by groups[i] (legend: names), and place each label at the first offset
    from its point where it overlaps no label or point already drawn. Bold labels are placed first."""
    bold = bold or set()
    for g, name in enumerate(names):
        pts = xy[[i for i in range(len(xy)) if groups[i] == g]]
        ax.scatter(pts[:, 0], pts[:, 1], s=22, color=PALETTE[g % len(PALETTE)], label=name, zorder=3)
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    point_boxes = [ax.transData.transform(p) for p in xy]  # (x, y) in display units
    placed = []
    order = sorted(range(len(xy)), key=lambda i: labels[i] not in bold)
    for i in order:
        text = None
        for dx, dy in _OFFSETS:
            if text is not None:
                text.remove()
            text = ax.annotate(labels[i], xy[i], xytext=(dx, dy), textcoords="offset points",
                               ha="left" if dx > 0 else "right" if dx < 0 else "center", va="center",
                               fontsize=10 if labels[i] in bold else 8.5,
                               fontweight="bold" if labels[i] in bold else "normal",
                               color=PALETTE[groups[i] % len(PALETTE)] if labels[i] in bold else "black")
            box = text.get_window_extent(renderer).expanded(1.05, 1.1)
            hits_label = any(box.overlaps(other) for other in placed)
            hits_point = any(box.contains(px, py) for j, (px, py) in enumerate(point_boxes) if j != i)
            if not hits_label and not hits_point:
                break
        placed.append(text.get_window_extent(renderer))
