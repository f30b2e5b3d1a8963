"""Chapter 13's figures: training curves of the spelling models, and cross-attention maps (target letters
against source letters)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from . import PALETTE

__all__ = ["LOSS_ALT", "CROSS_ALT", "MASKS_ALT", "ARCH_ALT", "draw_losses", "draw_cross_attention", "draw_masks",
           "draw_architecture"]

LOSS_ALT = ("Training loss per step, smoothed over 50 steps, on a logarithmic axis, for the encoder-decoder and the "
            "decoder-only model, each trained from three seeds on the same words: a line for seed 0 and a shaded band "
            "from the lowest to the highest seed. The encoder-decoder's band is barely visible; the decoder-only "
            "model's widens in the second half. Both losses fall steeply over the first few hundred steps and are "
            "still falling slowly at step 3,000; from about step 200 on, the decoder-only model's curve lies below "
            "the encoder-decoder's, ending near 0.15 against 0.36 nats per letter.")
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
    """Moving averages of per-step losses {name: {seed: [loss, ...]}} on a log axis: the first seed as a line, the
    band from the lowest to the highest seed shaded."""
    fig, ax = plt.subplots(figsize=figsize)
    for (name, by_seed), colour in zip(losses.items(), PALETTE, strict=False):
        kernel = np.ones(window) / window
        smooth = np.stack([np.convolve(np.asarray(v, dtype=float), kernel, mode="valid") for v in by_seed.values()])
        x = np.arange(window, smooth.shape[1] + window)
        ax.fill_between(x, smooth.min(0), smooth.max(0), color=colour, alpha=0.3, linewidth=0)
        ax.plot(x, smooth[0], color=colour, label=f"{name} (seed {next(iter(by_seed))}; band: {len(by_seed)} seeds)")
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


ARCH_ALT = ("Block diagram of the encoder-decoder. Left: the source letters plus positions pass through N encoder "
            "layers, each a self-attention with the padding mask and a feed-forward network: the memory. "
            "Right: the target so far passes through M decoder layers, each a causal self-attention, a "
            "cross-attention and a feed-forward network, then the output layer. An arrow carries the memory's keys "
            "and values, computed once per source, into each cross-attention.")


def _box(ax, x, y, w, h, text, color):
    ax.add_patch(plt.Rectangle((x, y), w, h, facecolor=color, edgecolor="black", linewidth=1.0))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=10, color="black")


def draw_architecture(figsize=(8.0, 4.6)):
    """The encoder-decoder as boxes: the encoder stack, the memory, and the decoder stack whose cross-attention
    reads the memory's keys and values; each attention box names its mask."""
    fig, ax = plt.subplots(figsize=figsize)
    fig.patch.set_facecolor("white")
    ax.set(xlim=(0, 10), ylim=(0, 10))
    ax.axis("off")
    light, mid = "#dbe9f6", "#fde3c8"
    ax.add_patch(plt.Rectangle((0.3, 2.2), 3.9, 3.8, facecolor="none", edgecolor="gray", linestyle="--"))
    ax.add_patch(plt.Rectangle((5.4, 1.6), 4.5, 6.0, facecolor="none", edgecolor="gray", linestyle="--"))
    _box(ax, 0.5, 0.4, 2.8, 1.0, "source letters x\n+ positions", "white")
    _box(ax, 0.5, 2.5, 2.8, 1.3, "self-attention\n(padding mask)", light)
    _box(ax, 0.5, 4.4, 2.8, 1.2, "feed-forward", light)
    ax.text(3.75, 4.1, "N\ntimes", ha="center", va="center", fontsize=10, color="black")
    _box(ax, 0.5, 7.6, 2.8, 1.0, "memory m", mid)
    _box(ax, 5.6, 0.2, 3.4, 1.0, "target so far\n+ positions", "white")
    _box(ax, 5.6, 1.9, 3.4, 1.2, "causal self-attention", light)
    _box(ax, 5.6, 3.6, 3.4, 1.9, "cross-attention:\nQ from the target,\nK, V from m\n(padding mask)", mid)
    _box(ax, 5.6, 6.0, 3.4, 1.2, "feed-forward", light)
    ax.text(9.45, 4.6, "M\ntimes", ha="center", va="center", fontsize=10, color="black")
    _box(ax, 5.6, 8.5, 3.4, 1.0, "output layer", "white")
    arrow = dict(arrowstyle="->", color="black", linewidth=1.2)
    for x, y0, y1 in [(1.9, 1.4, 2.5), (1.9, 3.8, 4.4), (1.9, 5.6, 7.6), (7.3, 1.2, 1.9), (7.3, 3.1, 3.6),
                      (7.3, 5.5, 6.0), (7.3, 7.2, 8.5)]:
        ax.annotate("", xy=(x, y1), xytext=(x, y0), arrowprops=arrow)
    ax.annotate("", xy=(5.6, 4.55), xytext=(3.3, 8.1), arrowprops=dict(arrow, connectionstyle="arc3,rad=-0.2"))
    ax.text(4.75, 8.6, "K, V: once\nper source", ha="center", va="center", fontsize=10, color="black")
    return fig
