"""Self-checks for chapter 9 (the Transformer language model)."""

from __future__ import annotations

import numpy as np

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_double_softmax_floor", "check_count_parameters", "check_residual_jacobian_norm", "check_wsd_lr"]

answer_check("double_softmax_floor",
             hint="evaluate the loss at the best input the double softmax can get, a one-hot vector on the target; "
                  "in the log-sum-exp the target's own term is e^1, not e^0, and the other |V| - 1 terms are e^0 = 1; "
                  "here |V| = 3.")


def check_double_softmax_floor(answer) -> None:
    """The smallest cross-entropy (nats) a model can reach when softmax outputs are fed to a loss that applies
    log-softmax again, for a vocabulary of |V| = 3 tokens."""
    check_answer("double_softmax_floor", answer)


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


def _layers(seed, depth, dim, gain):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((dim, dim)) * gain / np.sqrt(dim) for _ in range(depth)]


function_check("residual_jacobian_norm", lambda: [
    Case((_layers(1, 10, 8, 0.5), 0.0), hint="alpha = 0 makes every block the identity: the norm is exactly 1."),
    Case((_layers(3, 6, 5, 2.0), 0.3), hint="multiply in order, J = J_L ... J_2 J_1: the first layer's "
                                            "Jacobian is on the right. Matrix products do not commute."),
    Case((_layers(2, 10, 8, 0.5), 1.0), hint="each block's Jacobian is I + alpha W_l, not alpha (I + W_l)."),
    Case((_layers(4, 20, 6, 0.5), 0.1), hint="the spectral norm is the largest singular value, "
                                             "np.linalg.norm(J, 2), not the Frobenius norm."),
    Case((_layers(5, 3, 4, 1.0), -0.5)),
], rtol=1e-9, atol=1e-12)


def check_residual_jacobian_norm(fn) -> None:
    """residual_jacobian_norm(layers, alpha): the spectral norm of (I + alpha W_L) ... (I + alpha W_1)."""
    run_check("residual_jacobian_norm", fn)


function_check("wsd_lr", lambda: [
    Case((0, 1.0, 10, 100, 20), hint="the warm-up is linear and reaches the peak at step warmup - 1: step s < warmup"
                                     " gets peak (s + 1) / warmup."),
    Case((9, 1.0, 10, 100, 20), hint="the last warm-up step reaches the peak."),
    Case((50, 3e-3, 10, 100, 20), hint="between the warm-up and the decay the rate stays at the peak."),
    Case((79, 3e-3, 10, 100, 20), hint="the decay covers only the last decay_steps steps (80 .. 99 here)."),
    Case((80, 1.0, 10, 100, 20), hint="the first decay step is already below the peak: peak (1 - 1/decay_steps)."),
    Case((99, 1.0, 10, 100, 20), hint="the last step reaches peak * min_lr_ratio (0 by default)."),
    Case((95, 2.0, 0, 100, 10), {"min_lr_ratio": 0.1}, hint="decay linearly from the peak to peak * min_lr_ratio; "
                                                            "warmup_steps = 0 means no warm-up."),
], rtol=1e-12, atol=1e-15)


def check_wsd_lr(fn) -> None:
    """wsd_lr(step, peak_lr, warmup_steps, total_steps, decay_steps, min_lr_ratio=0.0): warm-up, stable, decay."""
    run_check("wsd_lr", fn)
