"""Drawing primitives for the book's diagrams: a canvas measured in inches, boxes, arrows, matrices drawn
as grids of cells, and labels.

Every diagram is drawn on one axes that fills the figure, with data units equal to inches, so a box of
width 1 is one inch wide at any size and a font size in points says how much room a label needs. Colours
are the book's Okabe-Ito palette; fills are light tints of it, mixed with white so that they stay opaque.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb
from matplotlib.font_manager import FontProperties
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Polygon, Rectangle
from matplotlib.textpath import TextPath

from . import PALETTE

BLUE, VERMILION, GREEN, PINK, ORANGE, SKY = PALETTE[:6]
INK = "#1a1a1a"  # all text and outlines: near-black on the white background
FONT = 12  # labels inside boxes
SMALL = 10.5  # notes and shapes; the smallest size any diagram uses
MONO = "DejaVu Sans Mono"  # tokens and code


def canvas(width: float, height: float):
    """A white figure of ``width`` x ``height`` inches and one axes over all of it, in inch units."""
    # A do-nothing layout engine: with layout="none", savefig would restore the rc default (constrained).
    fig = plt.figure(figsize=(width, height), facecolor="white", layout=PlaceHolderLayoutEngine(True, True))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set(xlim=(0, width), ylim=(0, height))
    ax.axis("off")
    return fig, ax


def tint(colour: str, amount: float = 0.25) -> tuple[float, float, float]:
    """``colour`` mixed with white: ``amount`` 1 is the colour itself, 0 is white."""
    return tuple(1 - amount * (1 - c) for c in to_rgb(colour))


def text_width(text: str, size: float = FONT, family: str = "DejaVu Sans") -> float:
    """The width in inches that ``text`` takes at ``size`` points, measured from the glyphs' outlines."""
    return TextPath((0, 0), text, size=size, prop=FontProperties(family=family)).get_extents().width / 72


def label(ax, x: float, y: float, text: str, size: float = FONT, **kw):
    """Text centred at (x, y) in the book's ink colour, unless ``ha``/``va``/``color`` say otherwise."""
    kw = {"ha": "center", "va": "center", "color": INK, **kw}
    return ax.text(x, y, text, fontsize=size, **kw)


def box(ax, x: float, y: float, w: float, h: float, text: str = "", colour: str = BLUE, fill: float = 0.2,
        size: float = FONT, **text_kw):
    """A rounded box of w x h inches centred at (x, y), outlined in ``colour`` and filled with its tint."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                facecolor=tint(colour, fill), edgecolor=colour, linewidth=1.8))
    if text:
        label(ax, x, y, text, size, **text_kw)
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)  # left, bottom, right, top


def arrow(ax, start, end, colour: str = INK, lw: float = 1.6, text: str = "", offset=(0.0, 0.14),
          size: float = SMALL, **text_kw):
    """An arrow from ``start`` to ``end``, with an optional label at its middle moved by ``offset``."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color=colour, linewidth=lw,
                                 shrinkA=0, shrinkB=0))
    if text:
        mid = ((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1])
        label(ax, *mid, text, size, **text_kw)


def path(ax, points, colour: str = INK, lw: float = 1.6):
    """An arrow along a polyline: straight segments through ``points``, the head at the last one."""
    for a, b in zip(points[:-2], points[1:-1], strict=False):
        ax.plot([a[0], b[0]], [a[1], b[1]], color=colour, linewidth=lw, solid_capstyle="butt")
    arrow(ax, points[-2], points[-1], colour, lw)


def grid(ax, x: float, y: float, rows: int, cols: int, cell: float, fill, gaps=()):
    """A matrix as a rows x cols grid of square cells, its top-left corner at (x, y).

    ``fill(i, j)`` gives cell (i, j)'s face colour (row i from the top). ``gaps`` lists columns before
    which a gap of half a cell is left, to show an axis cut into slices. Returns the grid's extent
    (left, bottom, right, top)."""
    shift = 0.0
    for j in range(cols):
        shift += cell / 2 if j in gaps else 0.0
        for i in range(rows):
            ax.add_patch(Rectangle((x + j * cell + shift, y - (i + 1) * cell), cell, cell, facecolor=fill(i, j),
                                   edgecolor="white", linewidth=1.0))
    starts = [0, *sorted(gaps), cols]
    done = 0.0
    for a, b in zip(starts, starts[1:], strict=False):  # one dark outline around each slice
        done += cell / 2 if a in gaps else 0.0
        ax.add_patch(Rectangle((x + a * cell + done, y - rows * cell), (b - a) * cell, rows * cell,
                               facecolor="none", edgecolor=INK, linewidth=1.4))
    return (x, y - rows * cell, x + cols * cell + shift, y)


def trapezoid(ax, x: float, y: float, w: float, h_left: float, h_right: float, colour: str, fill: float = 0.3):
    """A trapezoid centred at (x, y), h_left tall on its left side and h_right on its right: a matrix that
    maps a wide vector to a narrow one, or back."""
    corners = [(x - w / 2, y - h_left / 2), (x + w / 2, y - h_right / 2), (x + w / 2, y + h_right / 2),
               (x - w / 2, y + h_left / 2)]
    ax.add_patch(Polygon(corners, closed=True, facecolor=tint(colour, fill), edgecolor=colour, linewidth=1.8))
