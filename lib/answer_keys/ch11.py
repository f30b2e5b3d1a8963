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


def quantize_per_channel(x):
    scale = x.abs().amax(dim=0, keepdim=True) / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(x / scale).clamp(-127, 127) * scale


def spec_tokens_per_pass(alpha: float = 0.8, k: int = 4) -> float:
    """E[tokens per target pass] = sum_{i=0}^{k} alpha^i = (1 - alpha^(k+1)) / (1 - alpha)."""
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def lookup_draft(ids, n, k):
    for start in range(len(ids) - n - 1, -1, -1):  # latest first; the suffix itself starts at len - n
        if ids[start:start + n] == ids[len(ids) - n:]:
            return list(ids[start + n:start + n + k])
    return []


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
    # Llama 3.1 8B's shape, 16-bit weights in the same 40 GiB, a batch of 32: 6,425 tokens; int8 with scales: 12,461
    "context_budget": Key(answer=(40 * 2**30 - 2 * 8 * 10**9) // (32 * 2 * 32 * 8 * 128 * 2)),
    "context_budget_int8": Key(answer=(40 * 2**30 - 2 * 8 * 10**9) // (32 * 2 * 32 * 8 * (128 + 4))),
    "quantize_per_channel": Key(quantize_per_channel, _hidden_quantize_per_channel, giveaways=("quantize_int8",)),
    "spec_tokens_per_pass": Key(answer=spec_tokens_per_pass(), giveaways=("expected_tokens_per_pass",)),
    "lookup_draft": Key(lookup_draft, lambda: [
        Case(([1, 2, 3, 1, 2, 3, 1, 2], 2, 4)),  # a repeating text: the latest match
        Case(([9, 8, 7, 6, 5], 1, 3)),  # no match
        Case(([1, 1, 2, 1, 1], 2, 2)),
        Case(([2, 3, 4, 2, 3, 4, 5, 2, 3, 4], 3, 1)),
        Case(([5, 5], 1, 3)),
        Case(([6, 7, 6, 7, 6], 3, 2)),  # the latest match overlaps the suffix
    ], giveaways=("prompt_lookup_draft",)),
}
