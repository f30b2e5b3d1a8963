"""Answer keys for chapter 15 (LoRA)."""

from __future__ import annotations

import torch
from lmbook.teaching.checks import Case

from . import Key

# LoRA with r = 16 on gate_proj, up_proj and down_proj of Llama-2-7B (32 blocks, d = 4096, d_ff = 11008):
# r (in + out) per matrix.
MLP_LORA_COUNT = 32 * 3 * 16 * (4096 + 11008)


def captured_energy(delta, r):
    s = torch.linalg.svdvals(delta.double())
    return (s[:r].pow(2).sum() / s.pow(2).sum()).item()


def lora_from_delta(delta, r):
    u, s, vh = torch.linalg.svd(delta.double(), full_matrices=False)
    root = s[:r].sqrt()
    return u[:, :r] * root, root[:, None] * vh[:r]  # B (out, r), A (r, in); B @ A is the truncated SVD


def multi_adapter_forward(x, weight, As, Bs, scalings, adapter_ids):
    rows = []
    for i in range(x.shape[0]):
        k = int(adapter_ids[i])
        rows.append(x[i] @ weight.T + scalings[k] * (x[i] @ As[k].T) @ Bs[k].T)
    return torch.stack(rows)


def _randn(g, *shape):
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _hidden_captured_energy():
    g = torch.Generator().manual_seed(1509)
    rank_one = _randn(g, 9, 1) @ _randn(g, 1, 6)
    return [
        Case((torch.diag(torch.tensor([1.0, 4.0], dtype=torch.float64)), 1)),  # the largest is not first: 16 / 17
        Case((torch.diag(torch.tensor([0.5, 0.0, 2.0, 1.0], dtype=torch.float64)), 2)),
        Case((_randn(g, 10, 4), 2)),
        Case((rank_one + 1e-2 * _randn(g, 9, 6), 1)),
        Case((_randn(g, 3, 7), 3)),  # r = min(m, n): 1.0
    ]


def _hidden_lora_from_delta():
    g = torch.Generator().manual_seed(1510)
    return [
        Case((_randn(g, 8, 3), 2)),
        Case((_randn(g, 3, 8), 1)),
        Case((_randn(g, 10, 6), 3)),
        Case((_randn(g, 5, 5), 5)),  # r = min(out, in): delta itself
        Case((_randn(g, 6, 2) @ _randn(g, 2, 4), 2)),  # a rank-2 delta is recovered exactly at r = 2
    ]


def _hidden_multi_adapter():
    g = torch.Generator().manual_seed(1511)

    def setup(n, t, d_in, d_out, r, scalings, ids):
        x, w = _randn(g, n, t, d_in), _randn(g, d_out, d_in)
        As = [_randn(g, r, d_in) for _ in scalings]
        Bs = [_randn(g, d_out, r) for _ in scalings]
        return x, w, As, Bs, list(scalings), torch.tensor(ids)

    return [
        Case(setup(3, 2, 5, 4, 2, [2.0], [0, 0, 0])),
        Case(setup(5, 3, 4, 6, 2, [0.25, 1.5, 3.0, 0.75], [3, 1, 1, 0, 3])),  # adapter 2 unused
        Case(setup(2, 4, 3, 2, 1, [1.0, 0.0], [1, 0])),  # scaling 0: the base layer alone
        Case(setup(4, 1, 7, 5, 4, [0.5, 2.5], [0, 1, 1, 0])),
    ]


KEYS = {
    "mlp_lora_count": Key(answer=MLP_LORA_COUNT),
    "captured_energy": Key(captured_energy, _hidden_captured_energy, giveaways=("energy_kept",)),
    "lora_from_delta": Key(lora_from_delta, _hidden_lora_from_delta),
    "multi_adapter_forward": Key(multi_adapter_forward, _hidden_multi_adapter),
}
