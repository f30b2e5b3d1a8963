"""Answer keys for chapter 12 (positional encodings and context extension)."""

from __future__ import annotations

import math

import torch
from lmbook.positional import apply_rope, rope_inv_freq
from lmbook.teaching.checks import Case

from . import Key

# head size 128, base 1e6, 64 planes; plane i has wavelength 2 pi b^(2i/d_k). Training windows: 32,768 tokens.
FULL_TURNS = sum(2 * math.pi * 1e6 ** (2 * i / 128) <= 32768 for i in range(64))


def rope_complex(x, positions, base=10000.0):
    return apply_rope(x, positions, rope_inv_freq(x.shape[-1], base), pairing="interleaved")


def half_to_interleaved_rows(w, n_heads, rotary_dim):
    rows, d_in = w.shape
    heads = w.reshape(n_heads, rows // n_heads, d_in)  # (H, d_k, d_in)
    order = torch.arange(rotary_dim).reshape(2, rotary_dim // 2).T.flatten()  # 0, r/2, 1, r/2 + 1, ...
    rotated = heads[:, order]  # (H, r, d_in): rows i and i + r/2 side by side
    return torch.cat([rotated, heads[:, rotary_dim:]], dim=1).reshape(rows, d_in)  # the other rows stay


def rope_decay(head_dim, base, distances):
    theta = torch.tensor([base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
    distances = torch.as_tensor(distances, dtype=torch.float64)
    return torch.cos(distances[:, None] * theta).mean(dim=1)


def _hidden_rope_complex():
    g = torch.Generator().manual_seed(1208)
    return [
        Case((torch.tensor([[0.0, 1.0], [1.0, 1.0]]), torch.tensor([0, 2]))),  # turns +2 rad, position 0 stays
        Case((torch.randn(4, 10, generator=g), torch.tensor([0, 3, 6, 9]))),
        Case((torch.randn(1, 2, 3, 12, generator=g), torch.tensor([5, 50, 500])), {"base": 1000.0}),
        Case((torch.randn(2, 6, 4, generator=g), torch.arange(1, 7)), {"base": 10.0}),
    ]


def _hidden_half_to_interleaved():
    g = torch.Generator().manual_seed(1209)
    return [
        Case((torch.arange(16.0)[:, None], 2, 8)),  # two heads of 8, whole heads rotate: rows must not cross heads
        Case((torch.arange(6.0)[:, None].expand(6, 3).contiguous(), 1, 6)),  # head of 6: 0, 3, 1, 4, 2, 5
        Case((torch.arange(12.0)[:, None], 1, 4)),  # a quarter of the head rotates: 0, 2, 1, 3, 4, ..., 11
        Case((torch.randn(32, 3, generator=g), 4, 2)),  # rotary_dim 2: nothing moves
        Case((torch.randn(40, 2, generator=g, dtype=torch.float64), 2, 8)),
    ]


def _hidden_rope_decay():
    return [
        Case((4, 10000.0, [0, 5])),
        Case((32, 100000.0, [1, 64, 4096, 8192])),
        Case((6, 50.0, [7])),
        Case((128, 500000.0, [0, 2, 20, 200, 20000])),
    ]


KEYS = {
    "full_turns": Key(answer=FULL_TURNS),
    "rope_complex": Key(rope_complex, _hidden_rope_complex, giveaways=("apply_rope", "rotate_pairs")),
    "half_to_interleaved_rows": Key(half_to_interleaved_rows, _hidden_half_to_interleaved),
    "rope_decay": Key(rope_decay, _hidden_rope_decay),
}
