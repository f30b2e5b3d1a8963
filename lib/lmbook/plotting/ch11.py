"""Chapter 11's diagrams: a paged cache's block table, and one target pass of speculative decoding."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from . import PALETTE

__all__ = ["BLOCK_TABLE_ALT", "DRAFT_VERIFY_ALT", "draw_block_table", "draw_draft_verify"]

BLOCK_TABLE_ALT = ("Left, the sequence's token positions cut into logical blocks 0, 1, 2 and so on, the last one "
                   "partly filled; right, the pool's physical blocks in a column, grey where other sequences hold "
                   "them, blue for this sequence's blocks, white where free, as a key below the figure says. An arrow "
                   "goes from each logical block to "
                   "the physical block that the block table names: the first two arrows cross, because the blocks "
                   "that other sequences gave back are reused last freed first, and consecutive positions land in "
                   "whatever blocks were free.")
DRAFT_VERIFY_ALT = ("A row of boxes: the context, the last known token, then four draft tokens d1 to d4. One target "
                    "pass reads the last token and the drafts through the cache; an arrow rises from each input box "
                    "to the target's choice for the next position: c1 from the last token, c2 from d1, and so on "
                    "up to c5 from d4. c1 equals d1 and c2 equals d2, so d1 and d2 are kept (green); c3 differs from "
                    "d3 (red), so c3 replaces d3, d3 and d4 are cropped from the cache (hatched), and c4 and c5 go "
                    "unused (c5 would be the bonus token had all four drafts been kept). The pass yields three "
                    "tokens.")


def draw_block_table(block_table: list[int], block_size: int, seq_len: int, n_blocks: int, held=(), figsize=(8, 4)):
    """Logical blocks of one sequence (left) and the pool's physical blocks (right), joined by the block table."""
    fig, ax = plt.subplots(figsize=figsize)
    for i, physical in enumerate(block_table):
        filled = min(block_size, seq_len - i * block_size)
        ax.add_patch(Rectangle((0, -i - 0.4), 3, 0.8, fc="white", ec="black"))
        ax.add_patch(Rectangle((0, -i - 0.4), 3 * filled / block_size, 0.8, fc=PALETTE[0], alpha=0.35))
        first, last = i * block_size, i * block_size + filled - 1
        span = f"positions {first}-{last}" if filled > 1 else f"position {first}"
        ax.text(1.5, -i, span, ha="center", va="center")
        ax.text(-0.2, -i, f"block {i}", ha="right", va="center")
        ax.add_artist(FancyArrowPatch((3.05, -i), (6.95, -physical * len(block_table) / n_blocks),
                                      arrowstyle="-|>", mutation_scale=12, color=PALETTE[1], lw=1))
    scale = len(block_table) / n_blocks
    for b in range(n_blocks):
        colour = "lightgrey" if b in held else (PALETTE[0] if b in block_table else "white")
        ax.add_patch(Rectangle((7, -b * scale - 0.4 * scale), 2, 0.8 * scale, fc=colour, ec="black",
                               alpha=0.6 if b in block_table else 1))
        ax.text(9.2, -b * scale, f"physical {b}", va="center")
    ax.text(1.5, 0.8, "the sequence (logical blocks)", ha="center")
    ax.text(8, 0.8, "the pool", ha="center")
    ax.text(5, 0.8, "block table", ha="center", color=PALETTE[1])
    key = [Patch(fc=PALETTE[0], alpha=0.6, ec="black", label="this sequence's blocks"),
           Patch(fc="lightgrey", ec="black", label="held by other sequences"),
           Patch(fc="white", ec="black", label="free")]
    ax.legend(handles=key, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False)
    ax.set(xlim=(-2, 11.5), ylim=(-len(block_table) - 0.2, 1.2))
    ax.axis("off")
    return fig


def draw_draft_verify(figsize=(9, 3)):
    """One target pass of greedy speculative decoding with k = 4 drafts, two of them accepted: the logits at
    each input give the target's choice for the next position, so c_i rises from the box before d_i."""
    fig, ax = plt.subplots(figsize=figsize)
    boxes = [("context", "white"), ("last", "white"), ("d1", PALETTE[2]), ("d2", PALETTE[2]), ("d3", PALETTE[1]),
             ("d4", "white")]
    choices = ["", "c1 = d1", "c2 = d2", "c3 ≠ d3", "c4\n(unused)", "c5 (unused;\nbonus if all kept)"]
    for i, (label, colour) in enumerate(boxes):
        width = 2 if i == 0 else 1
        x = 0 if i == 0 else 1.2 + i * 1.2
        hatch = "//" if label in ("d3", "d4") else None
        ax.add_patch(Rectangle((x, 0), width, 0.8, fc=colour, ec="black", alpha=0.5 if colour != "white" else 1,
                               hatch=hatch))
        ax.text(x + width / 2, 0.4, label, ha="center", va="center")
        if choices[i]:  # the target's choice after this input, compared with the next box
            grey = "(unused" in choices[i]
            ax.text(x + width / 2, 1.25, choices[i], ha="center", va="bottom", fontsize=9,
                    color="dimgrey" if grey else "black")
            ax.annotate("", (x + width / 2, 1.2), (x + width / 2, 0.85),
                        arrowprops={"arrowstyle": "->", "color": "dimgrey" if grey else "black"})
    ax.text(1.2 + 4 * 1.2 + 0.5, -0.5, "c3 replaces d3; d3, d4 cropped from the cache", ha="center", fontsize=9)
    ax.text(2.4, 2.2, "one target pass over [last, d1 .. d4]: the logits at each input choose the next token",
            ha="left", fontsize=9)
    ax.text(0, -0.5, "yield: d1, d2, c3 (3 tokens)", fontsize=9)
    ax.set(xlim=(-0.2, 8.8), ylim=(-0.9, 2.5))
    ax.axis("off")
    return fig
