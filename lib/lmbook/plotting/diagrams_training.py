"""Diagrams of what training sees and changes: BPE's merges, skip-gram's pairs, a LoRA layer and the DPO
loss (chapters 5, 6, 15 and 16). Import them from :mod:`lmbook.plotting.diagrams`."""

from __future__ import annotations

from ._draw import (
    BLUE,
    FONT,
    GREEN,
    INK,
    MONO,
    ORANGE,
    PINK,
    SKY,
    SMALL,
    VERMILION,
    arrow,
    box,
    canvas,
    label,
    path,
    text_width,
    trapezoid,
)

# SmolLM2's tokenizer on "return": the merges that apply, in the order BPE applies them (lowest rank first),
# with their ranks in its list of 48,900 merges. tests/test_diagrams.py checks them against the GGUF file.
RETURN_MERGES = [(("r", "e"), 5), (("u", "r"), 63), (("ur", "n"), 415), (("re", "t"), 3022), (("ret", "urn"), 5154)]


def _merge(symbols, pair):
    """``symbols`` with every adjacent occurrence of ``pair`` joined into one symbol."""
    out, i = [], 0
    while i < len(symbols):
        if tuple(symbols[i:i + 2]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def _tokens(ax, x, y, symbols, colour_of, pad=0.28, gap=0.08, size=FONT, family=MONO):
    """Symbols drawn left to right as boxes sized to their text, starting at x; returns each box's centre.
    ``colour_of(k)`` colours box k; boxes outlined in ink are left white."""
    centres = []
    for k, s in enumerate(symbols):
        w, colour = text_width(s, size, family) + pad, colour_of(k)
        box(ax, x + w / 2, y, w, 0.36, s, colour=colour, fill=0.0 if colour == INK else 0.3, size=size,
            family=family)
        centres.append(x + w / 2)
        x += w + gap
    return centres


def bpe_merges():
    """BPE encoding "return" with SmolLM2's merges, one merge per row (chapter 5).

    The word starts as its six bytes (here one character each). At every row the pair with the lowest rank
    among the adjacent pairs (highlighted) is merged: ("r","e") -> "re", ("u","r") -> "ur", ("ur","n") ->
    "urn", ("re","t") -> "ret", ("ret","urn") -> "return". Ranks are positions in SmolLM2's merge list,
    which training filled in order of pair frequency. Five merges leave one token."""
    fig, ax = canvas(6.9, 3.9)
    label(ax, 0.3, 3.6, "symbols", weight="bold", ha="left")
    label(ax, 3.4, 3.6, "next merge", weight="bold", ha="left")
    label(ax, 6.3, 3.6, "rank", weight="bold")
    symbols, y = list("return"), 3.05
    for pair, rank in RETURN_MERGES:
        k = next(k for k in range(len(symbols) - 1) if (symbols[k], symbols[k + 1]) == pair)
        _tokens(ax, 0.3, y, symbols, lambda j, k=k: ORANGE if j in (k, k + 1) else BLUE)
        label(ax, 3.4, y, f"{pair[0]!r} + {pair[1]!r} \u2192 {pair[0] + pair[1]!r}", SMALL, family=MONO,
              ha="left")
        label(ax, 6.3, y, f"{rank:,}", SMALL)
        symbols, y = _merge(symbols, pair), y - 0.52
    _tokens(ax, 0.3, y, symbols, lambda j: GREEN)
    label(ax, 3.4, y, "one token: no pair left", SMALL, ha="left")
    return fig


SENTENCE = "return an iterator over the keys of the dictionary".split()  # a sentence of the Python manual


def skipgram_window():
    """Skip-gram's training pairs from one sentence, with negative sampling (chapter 6).

    The centre word w = "iterator" and a window of m = 2 words on each side give four positive pairs (w, c),
    label 1. For each of them, K noise words n_k are drawn from the unigram distribution raised to the power
    3/4 (here K = 3 for the pair (iterator, over); the words shown are an illustrative draw), label 0."""
    fig, ax = canvas(8, 3.7)
    centre, m = 2, 2

    def colour(j):
        return ORANGE if j == centre else SKY if abs(j - centre) <= m else INK

    xs = _tokens(ax, 0.25, 3.0, SENTENCE, colour, gap=0.1, family="DejaVu Sans")
    for j in range(centre - m, centre + m + 1):
        label(ax, xs[j], 3.42, "$w$" if j == centre else "$c$", SMALL)
    ax.plot([0.25, 0.25, xs[centre + m] + 0.33, xs[centre + m] + 0.33], [2.65, 2.52, 2.52, 2.65], color=SKY,
            linewidth=2)
    label(ax, xs[centre], 2.3, f"window: $m = {m}$ words on each side of the centre word $w$", SMALL, ha="left")
    label(ax, 0.25, 1.85, "positive pairs $(w, c)$, label 1:", SMALL, ha="left")
    context = [SENTENCE[j] for j in range(centre - m, centre + m + 1) if j != centre]
    _tokens(ax, 0.25, 1.45, [f"(iterator, {c})" for c in context], lambda j: GREEN, pad=0.2, gap=0.12, size=SMALL,
            family="DejaVu Sans")
    label(ax, 0.25, 0.85, "$K = 3$ noise words for (iterator, over), label 0:", SMALL, ha="left")
    _tokens(ax, 0.25, 0.45, ["(iterator, a)", "(iterator, module)", "(iterator, is)"], lambda j: VERMILION,
            pad=0.2, gap=0.12, size=SMALL, family="DejaVu Sans")
    label(ax, 4.95, 0.45, "drawn with probability $\\propto \\mathrm{count}(v)^{3/4}$", SMALL, ha="left")
    return fig


def lora_bypass():
    """A LoRA layer: the frozen W beside the trainable low-rank path B A, scaled by alpha / r (chapter 15).

    The input x (d_in) goes through the frozen W (d_out x d_in) and, in parallel, through A (r x d_in,
    random at the start) and B (d_out x r, zero at the start), scaled by alpha / r; the two are summed:
    y = x W^T + (alpha / r) x A^T B^T, with x a row as in the chapter (the bias is left out). Since B = 0 at
    the start, the adapted layer starts equal to the base; after training, W' = W + (alpha / r) B A."""
    fig, ax = canvas(8, 3.9)
    box(ax, 0.55, 1.95, 0.75, 0.8, "$x$\n$d_{in}$", colour=INK, fill=0.0)
    box(ax, 3.05, 3.0, 3.0, 0.75, "$W$  (frozen)\n$d_{out} \\times d_{in}$", colour=BLUE, fill=0.3)
    trapezoid(ax, 2.05, 0.95, 0.9, 1.0, 0.35, ORANGE)
    trapezoid(ax, 3.4, 0.95, 0.9, 0.35, 1.0, ORANGE)
    label(ax, 2.05, 0.95, "$A$")
    label(ax, 3.4, 0.95, "$B$")
    label(ax, 2.0, 0.2, "$r \\times d_{in}$, random", SMALL)
    label(ax, 3.45, 0.2, "$d_{out} \\times r$, starts at 0", SMALL)
    label(ax, 2.72, 1.62, "trainable, rank $r$", SMALL)
    box(ax, 4.75, 0.95, 0.8, 0.5, "$\\times\\, \\alpha / r$", colour=ORANGE, fill=0.3)
    path(ax, [(0.93, 2.1), (1.15, 2.1), (1.15, 3.0), (1.55, 3.0)])
    path(ax, [(0.93, 1.8), (1.15, 1.8), (1.15, 0.95), (1.6, 0.95)])
    arrow(ax, (2.5, 0.95), (2.95, 0.95))
    arrow(ax, (3.85, 0.95), (4.35, 0.95))
    path(ax, [(4.55, 3.0), (5.6, 3.0), (5.6, 2.2)])
    path(ax, [(5.15, 0.95), (5.6, 0.95), (5.6, 1.7)])
    box(ax, 5.6, 1.95, 0.5, 0.5, "$+$", colour=INK, fill=0.0)
    arrow(ax, (5.85, 1.95), (6.35, 1.95))
    box(ax, 6.8, 1.95, 0.8, 0.8, "$y$\n$d_{out}$", colour=INK, fill=0.0)
    label(ax, 4.9, 3.62, "$y = x W^\\top + (\\alpha / r)\\, x A^\\top B^\\top$")
    label(ax, 6.8, 1.0, "merged later:\n$W' = W + (\\alpha / r)\\, B A$", SMALL)
    return fig


def dpo_pipeline():
    """The DPO loss for one preference pair, from the data to the number (chapter 16).

    A prompt x with a chosen reply y_w and a rejected reply y_l is scored by the trained policy pi_theta and
    the frozen reference pi_ref: four sequence log-probabilities. Per reply, policy minus reference is a
    log-ratio; beta times (chosen minus rejected) is the implicit-reward margin r_w - r_l, and
    -log sigma(margin) is the loss. No reward model is trained and nothing is sampled."""
    fig, ax = canvas(8, 4.7)
    box(ax, 0.7, 3.9, 1.1, 0.45, "prompt $x$", colour=INK, fill=0.0, size=SMALL)
    box(ax, 0.7, 3.3, 1.1, 0.45, "chosen $y_w$", colour=GREEN, size=SMALL)
    box(ax, 0.7, 2.7, 1.1, 0.45, "rejected $y_l$", colour=VERMILION, size=SMALL)
    ax.plot([1.25, 1.4, 1.4, 1.25], [3.95, 3.95, 2.65, 2.65], color=INK, linewidth=1.6)
    box(ax, 2.45, 3.85, 1.35, 0.65, "$\\pi_\\theta$\ntrainable", colour=ORANGE, fill=0.3)
    box(ax, 2.45, 2.75, 1.35, 0.65, "$\\pi_{\\mathrm{ref}}$\nfrozen", colour=BLUE, fill=0.3)
    for y in (3.85, 2.75):
        path(ax, [(1.4, 3.3), (1.6, 3.3), (1.6, y), (1.77, y)])
    cols, rows = (4.55, 6.95), (3.85, 2.75)
    for x, head in zip(cols, ("chosen $y_w$", "rejected $y_l$"), strict=True):
        label(ax, x, 4.45, head, SMALL)
        label(ax, x, 3.3, "$-$", 16)
    for y, model, colour in zip(rows, ("\\theta", "\\mathrm{ref}"), (ORANGE, BLUE), strict=True):
        arrow(ax, (3.15, y), (3.6, y))
        path(ax, [(3.35, y), (3.35, y + 0.38), (6.95, y + 0.38), (6.95, y + 0.25)])  # and to the rejected reply
        for x, reply in zip(cols, ("w", "l"), strict=True):
            box(ax, x, y, 1.9, 0.5, f"$\\log \\pi_{{{model}}}(y_{reply} \\mid x)$", colour=colour, size=SMALL)
    for x, reply in zip(cols, ("w", "l"), strict=True):
        arrow(ax, (x, 2.5), (x, 2.1))
        box(ax, x, 1.85, 1.9, 0.5, f"log-ratio of $y_{reply}$", colour=PINK, size=SMALL)
        arrow(ax, (x, 1.6), (5.75 + (x - 5.75) * 0.35, 1.0))
    label(ax, 5.75, 1.85, "$-$", 16)
    box(ax, 5.75, 0.72, 2.3, 0.55, "$\\times\\,\\beta$: $\\hat r_w - \\hat r_l$", colour=PINK, size=SMALL)
    arrow(ax, (4.6, 0.72), (4.1, 0.72))
    box(ax, 3.3, 0.72, 1.6, 0.55, "$-\\log \\sigma(\\cdot)$", colour=INK, fill=0.0, size=SMALL)
    arrow(ax, (2.5, 0.72), (2.0, 0.72))
    box(ax, 1.2, 0.72, 1.5, 0.55, "loss $\\mathcal{L}_{\\mathrm{DPO}}$", colour=INK, fill=0.0, size=SMALL)
    label(ax, 0.15, 1.85, "No reward model, no sampling:\nfour log-probabilities of\nfixed replies per pair.",
          SMALL, ha="left")
    return fig
