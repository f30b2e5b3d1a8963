"""Answer keys for chapter 11 (inference and the KV cache)."""

from __future__ import annotations

import math

import torch
from lmbook.teaching.checks import Case

from . import Key


def _kv_example() -> float:
    X = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], dtype=torch.float64)
    W_K = torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=torch.float64)
    scores = (X @ W_K) @ X[3] / math.sqrt(2)  # q_4 = x_4 W^Q with W^Q = I, against k_1 .. k_4
    return torch.softmax(scores, dim=0)[3].item()


def decode_step(q, K_cache, V_cache, k_new, v_new):
    K = torch.cat([K_cache, k_new[None]])  # (t + 1, d)
    V = torch.cat([V_cache, v_new[None]])
    return torch.softmax(K @ q / math.sqrt(q.shape[-1]), dim=0) @ V


def kept_positions(n_tokens, window, n_sinks):
    return list(range(min(n_sinks, n_tokens))) + list(range(max(n_sinks, n_tokens - window), n_tokens))


def quantize_per_channel(x):
    scale = x.abs().amax(dim=0, keepdim=True) / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(x / scale).clamp(-127, 127) * scale


def _hidden_decode_step():
    g = torch.Generator().manual_seed(20261101)

    def case(t, d, d_v, scale=1.0):
        K = torch.randn(t, d, generator=g, dtype=torch.float64)
        V = torch.randn(t, d_v, generator=g, dtype=torch.float64)
        q, k, v = (torch.randn(n, generator=g, dtype=torch.float64) * scale for n in (d, d, d_v))
        return Case((q, K, V, k, v))

    return [case(0, 6, 2), case(1, 3, 3, scale=2.0), case(5, 9, 4), case(12, 2, 7, scale=3.0), case(3, 32, 6)]


def _hidden_quantize_per_channel():
    g = torch.Generator().manual_seed(20261102)
    f64 = torch.float64
    outliers = torch.randn(9, 5, generator=g, dtype=f64)
    outliers[:, 0] *= 80  # a large channel
    outliers[:, 3] *= 1e-3  # and a tiny one
    zeros = torch.randn(4, 6, generator=g, dtype=f64)
    zeros[:, 4] = 0
    zeros[:, 0] = 0
    return [
        Case((outliers,)),
        Case((zeros,)),
        Case((torch.tensor([[-2.0, 0.1, 5.0], [1.0, 0.0, -0.5], [0.3, -0.2, 1.2]], dtype=f64),)),  # max |x| < 0
        Case((torch.randn(1, 8, generator=g, dtype=f64) * 3,)),  # one token: every entry is its column's max
        Case((torch.randn(20, 3, generator=g, dtype=f64) * torch.tensor([1.0, 10.0, 0.1], dtype=f64),)),
    ]


KEYS = {
    "kv_example": Key(answer=_kv_example()),
    "context_budget": Key(answer=40 * 2**30 / (8 * 2 * 80 * 8 * 128 * 2)),
    "decode_step": Key(decode_step, _hidden_decode_step,
                       giveaways=("scaled_dot_product_attention", "fast_attention", "flash_attention")),
    "kept_positions": Key(kept_positions, lambda: [
        Case((2, 5, 3)),  # fewer tokens than sinks
        Case((11, 7, 4)),  # exactly full
        Case((12, 7, 4)),  # one more than the slots
        Case((50, 10, 1)),
        Case((30, 3, 0)),  # a plain window
    ]),
    "quantize_per_channel": Key(quantize_per_channel, _hidden_quantize_per_channel, giveaways=("quantize_int8",)),
}
