"""Answer keys for chapter 9 (the Transformer language model)."""

from __future__ import annotations

import math

import numpy as np
from lmbook.teaching.checks import Case

from . import Key


def count_parameters(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff, tie_embeddings=True):
    head_dim = d_model // n_heads
    attention = 2 * d_model * n_heads * head_dim + 2 * d_model * n_kv_heads * head_dim  # W_Q, W_O; W_K, W_V
    block = attention + 3 * d_model * d_ff + 2 * d_model  # SwiGLU's three matrices, two RMSNorm gains
    embeddings = vocab_size * d_model * (1 if tie_embeddings else 2)
    return embeddings + n_layers * block + d_model  # + the final norm


def residual_jacobian_norm(layers, alpha):
    jacobian = np.eye(len(layers[0]))
    for W in layers:  # J = (I + alpha W_L) ... (I + alpha W_1)
        jacobian = (np.eye(len(W)) + alpha * np.asarray(W)) @ jacobian
    return float(np.linalg.norm(jacobian, 2))


def wsd_lr(step, peak_lr, warmup_steps, total_steps, decay_steps, min_lr_ratio=0.0):
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    decay_start = total_steps - decay_steps
    if step < decay_start:
        return peak_lr
    done = (step - decay_start + 1) / decay_steps  # 1/decay_steps .. 1
    return peak_lr + (peak_lr * min_lr_ratio - peak_lr) * done


def _layers(seed, depth, dim, gain):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((dim, dim)) * gain / np.sqrt(dim) for _ in range(depth)]


KEYS = {
    "double_softmax_floor": Key(answer=math.log(math.e + 3 - 1) - 1),  # |V| = 3
    "count_parameters": Key(count_parameters, lambda: [
        Case((50, 8, 3, 2, 1, 24)),
        Case((1000, 64, 4, 8, 2, 172, False)),
        Case((256, 32, 1, 4, 4, 88, False)),
        Case((32000, 4096, 32, 32, 8, 14336)),
        Case((128256, 2048, 16, 32, 8, 8192)),
    ], giveaways=("num_parameters", "Transformer")),
    "residual_jacobian_norm": Key(residual_jacobian_norm, lambda: [
        Case((_layers(11, 30, 6, 0.5), 0.0)),
        Case((_layers(12, 12, 7, 1.5), 1.0)),
        Case((_layers(13, 5, 3, 3.0), 0.7)),
        Case((_layers(14, 40, 5, 0.5), 0.05)),
        Case((_layers(15, 8, 6, 1.0), 2.0)),
    ]),
    "wsd_lr": Key(wsd_lr, lambda: [
        Case((3, 0.5, 4, 50, 10)),
        Case((4, 0.5, 4, 50, 10)),
        Case((39, 0.5, 4, 50, 10)),
        Case((45, 0.5, 4, 50, 10), {"min_lr_ratio": 0.2}),
        Case((49, 0.5, 4, 50, 10), {"min_lr_ratio": 0.2}),
        Case((0, 1e-3, 0, 10, 10)),
    ]),
}
