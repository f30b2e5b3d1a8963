"""Pictures of the mechanisms the book teaches, drawn by code: each function returns a matplotlib Figure.

In a notebook, ``diagrams.qkv_dataflow();`` shows the figure; the cell's metadata carries its alt text
(``{"mystnb": {"image": {"alt": ALT_TEXT["qkv_dataflow"]}}}``), and a test checks that the two agree.
The diagrams are fixed drawings, identical on every call: no data, no randomness. Their notation follows
book/notation.md and the chapter each belongs to. The drawing primitives are in ``_draw.py``; the
diagrams themselves in ``diagrams_attention.py`` and ``diagrams_training.py``.
"""

from .diagrams_attention import head_split_merge, kv_cache_append, qkv_dataflow, rope_rotation
from .diagrams_training import bpe_merges, dpo_pipeline, lora_bypass, skipgram_window

__all__ = ["ALT_TEXT", "bpe_merges", "dpo_pipeline", "head_split_merge", "kv_cache_append", "lora_bypass",
           "qkv_dataflow", "rope_rotation", "skipgram_window"]

# One or two sentences per diagram for a reader who cannot see it; notebooks copy them into their metadata.
ALT_TEXT = {
    "bpe_merges": (
        "Six rows show BPE encoding the word 'return' with SmolLM2's merges. It starts as the characters "
        "r, e, t, u, r, n; each row highlights the pair merged next: r+e to 're' (rank 5), u+r to 'ur' (63), "
        "ur+n to 'urn' (415), re+t to 'ret' (3,022) and ret+urn to 'return' (5,154), leaving one token."),
    "skipgram_window": (
        "The sentence 'return an iterator over the keys of the dictionary' with the centre word 'iterator' "
        "highlighted and a window of two words on each side marked. Below, its four positive pairs "
        "(iterator, return), (iterator, an), (iterator, over) and (iterator, the) with label 1, and three "
        "noise pairs such as (iterator, module) with label 0, drawn from counts raised to the power 3/4."),
    "qkv_dataflow": (
        "Data flow of one attention head. X (T by d) is multiplied by W_Q, W_K and W_V to give Q, K (T by d_k) "
        "and V (T by d_v); Q K transposed over the square root of d_k gives a T by T score grid, the causal "
        "mask sets the cells above its diagonal to minus infinity, a softmax over each row gives A, and A "
        "times V is the output, T by d_v."),
    "head_split_merge": (
        "A (B, T, d) tensor drawn as a grid whose d columns are coloured in three slices, one per head. It is "
        "viewed as (B, T, H, d_k), transposed to (B, H, T, d_k), three separate small grids, each "
        "attends on its own, and the outputs are transposed and reshaped back to (B, T, d) and multiplied "
        "by W_O."),
    "kv_cache_append": (
        "Left, a decoding step with a KV cache at t = 5: keys k_1 to k_4 and values v_1 to v_4 are read "
        "from the cache, the new token x_5 adds k_5 and v_5, and its query q_5 has arrows to all five keys; "
        "work grows like t. Right, the same step without a cache recomputes x, q, k and v for all five "
        "tokens, 5 by 5 scores of which only the last row is new; work grows like t squared."),
    "rope_rotation": (
        "Three circles. In a fast plane (theta 1) and a slow plane (theta 0.3) a vector is drawn at "
        "positions m = 0 to 3, turned by m theta each time. In the third, a query at m and a key at n for "
        "(0, 2) and (3, 5) are separated by the same angle 2 theta, because the score depends on n - m only."),
    "lora_bypass": (
        "A LoRA layer. The input x feeds a large frozen block W (d_out by d_in) and, in parallel, a "
        "trainable path of two trapezoids, A (r by d_in, random) narrowing to rank r and B (d_out by r, "
        "starting at 0) widening back, scaled by alpha over r; a plus node sums the two paths into y."),
    "dpo_pipeline": (
        "The DPO loss for one pair. A prompt x with chosen reply y_w and rejected reply y_l goes into the "
        "trainable policy pi_theta and the frozen reference pi_ref, giving four log-probabilities; policy "
        "minus reference gives a log-ratio per reply, the chosen minus the rejected log-ratio is multiplied "
        "by beta, and minus log sigmoid of it is the loss. A note says no reward model and no sampling."),
}
