"""Chapter 5's figure: the lattice of a word's segmentations under a Unigram model, with alpha, beta and the
posterior of one span."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..unigram import unigram_forward_backward
from . import PALETTE

__all__ = ["LATTICE_ALT", "draw_lattice"]

LATTICE_ALT = ("The positions 0 to n between the characters of a word are nodes on a line; each piece of the "
               "vocabulary that spells a substring from position i to j is an arc from node i to node j, labelled "
               "with the piece and its probability. Under each node are alpha (all segmentations of the prefix, "
               "computed left to right) and beta (all segmentations of the suffix, right to left). One arc is "
               "drawn thick in orange, with its posterior alpha(i) p(x) beta(j) / Z.")


def draw_lattice(word: str, logp: dict[str, float], span: tuple[int, int], *, figsize=(8.0, 3.6)):
    """Draw the segmentation lattice of ``word`` under ``logp`` (piece -> log p); highlight the arc ``span``."""
    n, (s, e) = len(word), span
    log_alpha, log_beta = unigram_forward_backward(word, logp)  # validates word and logp
    if not (0 <= s < e <= n and word[s:e] in logp):
        raise ValueError(f"span must be (i, j) with 0 <= i < j <= {n} and word[i:j] a piece, got {span!r}")
    alpha, beta, z = [math.exp(a) for a in log_alpha], [math.exp(b) for b in log_beta], math.exp(log_alpha[-1])
    fig, ax = plt.subplots(figsize=figsize)
    for i in range(n):
        for j in range(i + 1, n + 1):
            if word[i:j] not in logp:
                continue
            on, d = (i, j) == (s, e), j - i
            below = d == 1  # single characters under the line, longer pieces above it, higher when longer
            apex = -0.32 if below else 0.16 * d + 0.06  # a quadratic Bezier peaks at rad * d / 2
            ax.annotate("", xy=(j - 0.06, 0), xytext=(i + 0.06, 0),
                        arrowprops=dict(arrowstyle="->", color=PALETTE[1] if on else PALETTE[0],
                                        lw=2.6 if on else 1.0, connectionstyle=f"arc3,rad={-2 * apex / d:.3f}"))
            ax.text((i + j) / 2, apex + (-0.04 if below else 0.0), f"{word[i:j]} {math.exp(logp[word[i:j]]):.2g}",
                    ha="center", va="top" if below else "center", fontsize=8, color=PALETTE[1] if on else "0.2",
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none"))
    for i in range(n + 1):
        ax.plot(i, 0, "o", color="black", ms=7, zorder=3)
        ax.text(i, 0.1, str(i), ha="center", va="bottom", fontsize=9)
        ax.text(i, -0.62, f"{alpha[i]:.3g}", ha="center", va="top", fontsize=8, color=PALETTE[2])
        ax.text(i, -0.85, f"{beta[i]:.3g}", ha="center", va="top", fontsize=8, color=PALETTE[3])
    ax.text(-0.35, -0.62, "alpha", ha="right", va="top", fontsize=8, color=PALETTE[2])
    ax.text(-0.35, -0.85, "beta", ha="right", va="top", fontsize=8, color=PALETTE[3])
    posterior = alpha[s] * math.exp(logp[word[s:e]]) * beta[e] / z
    ax.set_title(f"Z = alpha({n}) = beta(0) = {z:.3g};  posterior of '{word[s:e]}' at ({s}, {e}): "
                 f"alpha({s}) p beta({e}) / Z = {posterior:.3f}", fontsize=9)
    ax.set_xlim(-1.2, n + 0.4)
    ax.set_ylim(-1.1, 0.16 * n + 0.25)
    ax.axis("off")
    return fig
