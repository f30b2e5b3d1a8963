"""One figure style for the whole book.

Figures have an opaque white background so they stay readable when the site is in dark mode,
a colour-blind-safe palette (Okabe-Ito), and fonts large enough for a phone screen.
Alt text lives in each figure cell's metadata (``mystnb.image.alt``). The submodule
:mod:`lmbook.plotting.diagrams` draws the book's pictures of mechanisms (attention, the KV cache, RoPE,
BPE, skip-gram, LoRA, DPO) and holds their alt text.
"""

from __future__ import annotations

import matplotlib as mpl

__all__ = ["PALETTE", "use_style"]

# Okabe & Ito (2008), distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def use_style() -> None:
    """Apply the book's matplotlib style to every figure drawn afterwards."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 90,
            "savefig.dpi": 90,
            "figure.facecolor": "white",
            "axes.facecolor": "white",
            "savefig.facecolor": "white",
            "axes.prop_cycle": mpl.cycler(color=PALETTE),
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 11,
            "axes.titlesize": 12,
            "legend.frameon": False,
            "figure.constrained_layout.use": True,
            "svg.hashsalt": "lmbook",  # reproducible SVG ids
        }
    )
