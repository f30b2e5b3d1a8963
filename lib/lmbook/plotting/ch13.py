"""Chapter 13's figures: training curves of the spelling models, and cross-attention maps (target letters
against source letters)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from . import PALETTE

__all__ = ["LOSS_ALT", "CROSS_ALT", "MASKS_ALT", "draw_losses", "draw_cross_attention", "draw_masks"]

LOSS_ALT = ("Training loss per step, smoothed over 50 steps, on a logarithmic axis, for the encoder-decoder and the "
            "decoder-only model trained on the same noisy words. Both fall quickly over the first few hundred "
            "steps and then slowly; the encoder-decoder's curve lies below the decoder-only model's.")
CROSS_ALT = ("Heat maps, one per example: rows are the letters the decoder wrote (then the end mark), columns the "
             "letters of the misspelt source; darker cells get more cross-attention weight, averaged over the heads "
             "of the last decoder layer. The dark cells mostly follow a diagonal, shifted where a letter was "
             "inserted or deleted.")

MASKS_ALT = ("Three grids of queries (rows) against keys (columns), filled where attention is allowed: the encoder's "
             "self-attention over a padded source (every real query sees every real key, padded keys are empty), "
             "the decoder's causal self-attention (a lower triangle), and cross-attention from target positions to "
             "the source (every row the same, padded source keys empty).")


def draw_masks(masks: dict, figsize=(9.0, 3.0)):
    """masks: {title: (allowed (queries, keys) bool array, query label, key label)}: one grid each."""
    fig, axes = plt.subplots(1, len(masks), figsize=figsize)
    for ax, (title, (allowed, ylabel, xlabel)) in zip(np.atleast_1d(axes), masks.items(), strict=False):
        a = np.asarray(allowed, dtype=float)
        ax.imshow(a, cmap="Blues", vmin=0, vmax=1.4)
        ax.set_xticks(range(a.shape[1]))
        ax.set_yticks(range(a.shape[0]))
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        ax.grid(False)
    return fig


def draw_losses(losses: dict, window: int = 50, figsize=(6.4, 3.4)):
    """Moving averages of the per-step losses {name: [loss, ...]} on a log axis."""
    fig, ax = plt.subplots(figsize=figsize)
    for (name, values), colour in zip(losses.items(), PALETTE, strict=False):
        v = np.asarray(values, dtype=float)
        smooth = np.convolve(v, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window, len(v) + 1), smooth, color=colour, label=name)
    ax.set(yscale="log", xlabel="training step", ylabel="cross-entropy (nats per letter)")
    ax.legend()
    return fig


def draw_cross_attention(examples, figsize=(9.0, 3.2)):
    """examples: [(source str, output str, weights (len(output) + 1, len(source)))]: one heat map each."""
    fig, axes = plt.subplots(1, len(examples), figsize=figsize)
    for ax, (src, out, w) in zip(np.atleast_1d(axes), examples, strict=False):
        ax.imshow(np.asarray(w), cmap="Blues", vmin=0, aspect="auto")
        ax.set_xticks(range(len(src)), list(src))
        ax.set_yticks(range(len(out) + 1), list(out) + ["</s>"])
        ax.set_xlabel(f"source: {src}")
        ax.set_title(f"output: {out}")
        ax.grid(False)
    axes[0].set_ylabel("decoder step (letter written)") if len(examples) > 1 else None
    return fig
