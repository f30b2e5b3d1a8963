"""Chapter 14's figures: the load of each expert over training, as a heatmap per run."""

from __future__ import annotations

import numpy as np
from matplotlib import colors

__all__ = ["load_heatmaps"]


def load_heatmaps(axes, panels: list[tuple[str, list[int], np.ndarray]], top_k: int) -> None:
    """One heatmap per axis: panels holds (title, recorded steps, load (steps, E)), the fraction of the k N
    assignments that went to each expert. The colour scale is white at the fair share 1/E, blue below it (idle
    at 0) and red above it, up to 1/k, the most an expert can take (a token picks k different experts)."""
    image = None
    for ax, (title, steps, load) in zip(axes, panels, strict=True):
        load = np.asarray(load, dtype=float)  # (steps, E)
        extent = (steps[0], steps[-1] + (steps[1] - steps[0]), load.shape[1] - 0.5, -0.5)
        fair = 1 / load.shape[1]  # white at the fair share 1/E: blue below it (idle at 0), red above it
        image = ax.imshow(load.T, aspect="auto", cmap="RdBu_r", extent=extent, interpolation="nearest",
                          norm=colors.TwoSlopeNorm(vcenter=fair, vmin=0, vmax=1 / top_k))
        ax.set(title=title, xlabel="training step", ylabel="expert" if ax is axes[0] else "")
        ax.set_yticks(range(load.shape[1]))
        ax.grid(False)
    colorbar = axes[0].figure.colorbar(image, ax=list(axes), shrink=0.9)
    colorbar.set_label("share of assignments (white: the fair share 1/E)")
