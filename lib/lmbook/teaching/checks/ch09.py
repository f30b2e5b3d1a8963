"""Self-checks for chapter 9 (the Transformer language model and decoding)."""

from __future__ import annotations

import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_deepnorm_alpha", "check_rms_norm", "check_count_parameters", "check_top_p_filter",
           "check_distinct_n"]

answer_check("deepnorm_alpha",
             hint="DeepNorm up-weights the skip path, x_{l+1} = LN(alpha x_l + G(x_l)), so alpha > 1: "
                  "alpha = (2M)^(1/4) for M decoder layers, not 1/sqrt(2M).")


def check_deepnorm_alpha(answer) -> None:
    """DeepNorm's skip-path weight alpha for a 100-layer decoder-only model: (2M)^(1/4) with M = 100."""
    check_answer("deepnorm_alpha", answer)


def _rms_norm_cases():
    g = torch.Generator().manual_seed(6)
    return [
        Case((torch.randn(4, 8, generator=g, dtype=torch.float64), torch.ones(8, dtype=torch.float64)),
             hint="divide each row by its root mean square sqrt(mean(x^2) + eps); do not subtract the mean."),
        Case((torch.randn(4, 8, generator=g, dtype=torch.float64) + 3.0, torch.ones(8, dtype=torch.float64)),
             hint="RMSNorm does not subtract the mean: that is LayerNorm. Divide by sqrt(mean(x^2) + eps)."),
        Case((torch.randn(2, 5, 6, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)),
             hint="normalise each token over its features (the last axis), then multiply by the gain."),
        Case((torch.zeros(1, 4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)),
             hint="an all-zero vector must stay zero: add eps inside the square root, not after it."),
        Case((torch.full((1, 4), 1e-4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)), {"eps": 1e-2},
             hint="use the eps you are given, inside the square root."),
    ]


function_check("rms_norm", _rms_norm_cases, rtol=1e-9, atol=1e-12)


def check_rms_norm(fn) -> None:
    """rms_norm(x, weight, eps=1e-6) = x / sqrt(mean(x^2 over the last axis) + eps) * weight."""
    run_check("rms_norm", fn)


function_check("count_parameters", lambda: [
    Case((100, 16, 1, 2, 2, 32)),
    Case((100, 16, 2, 4, 2, 40), hint="with GQA, W_K and W_V map d_model to n_kv_heads * head_dim only."),
    Case((100, 16, 2, 4, 1, 40, False), hint="untied embeddings: the output matrix is a second V x d table."),
    Case((49152, 576, 30, 9, 3, 1536), hint="SmolLM2-135M has 134,515,008 parameters; a SwiGLU FFN has "
                                             "three d x d_ff matrices, and every block has two norms."),
    Case((2404, 128, 2, 4, 4, 344), hint="do not forget the final norm before the output layer."),
], rtol=0, atol=0)


def check_count_parameters(fn) -> None:
    """count_parameters(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff, tie_embeddings=True) for a
    Llama-style model: RMSNorm, no biases, SwiGLU, grouped-query attention, final norm."""
    run_check("count_parameters", fn)


def _top_p_filter_cases():
    g = torch.Generator().manual_seed(7)
    toy = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64))
    return [
        Case((toy, 0.7), hint="0.5 < 0.7, so the second token (0.3) is needed too: keep the token that *crosses* "
                              "p, not only those whose cumulative mass stays below it."),
        Case((toy, 0.1), hint="the most probable token is always kept, even if its probability exceeds p."),
        Case((toy.flip(-1), 0.9), hint="sort by probability first: the logits need not be in order."),
        Case((toy, 1.0), hint="p = 1 keeps every token."),
        Case((torch.randn(3, 20, generator=g, dtype=torch.float64) * 2, 0.6), hint="filter each row separately."),
    ]


function_check("top_p_filter", _top_p_filter_cases, rtol=0, atol=0)


def check_top_p_filter(fn) -> None:
    """top_p_filter(logits (B, V), p): keep the fewest most probable tokens whose total probability is >= p;
    set every other logit to -inf."""
    run_check("top_p_filter", fn)


function_check("distinct_n", lambda: [
    Case(([[1, 2, 3, 4]], 1)),
    Case(([[1, 2, 1, 2, 1]], 2), hint="count every n-gram occurrence in the denominator, repeats included."),
    Case(([[1, 2, 3], [1, 2, 4]], 2), hint="pool the n-grams of all sequences before counting distinct ones."),
    Case(([[5, 5, 5, 5, 5, 5]], 3), hint="a sequence of length L has L - n + 1 n-grams."),
    Case(([[1, 2], [3, 4, 5]], 2), hint="n-grams never cross from one sequence into the next."),
])


def check_distinct_n(fn) -> None:
    """distinct_n(sequences, n) = number of distinct n-grams / number of n-grams, over all sequences together."""
    run_check("distinct_n", fn)
