"""Self-checks for chapter 15 (LoRA)."""

from __future__ import annotations

import numpy as np
import torch

from ._core import Case, answer_check, check_answer, function_check, run_check

__all__ = ["check_mlp_lora_count", "check_captured_energy", "check_lora_from_delta", "check_multi_adapter_forward"]

answer_check("mlp_lora_count",
             hint="a LoRA on an in -> out layer trains A (r x in) and B (out x r). Write down the shape of "
                  "each MLP matrix from d and d_ff, and count every block.")


def check_mlp_lora_count(answer) -> None:
    """Trainable parameters of LoRA with r = 16 on gate_proj, up_proj and down_proj of Llama-2-7B
    (32 blocks, d = 4096, d_ff = 11008)."""
    check_answer("mlp_lora_count", answer)


def _captured_energy_cases():
    g = torch.Generator().manual_seed(9)
    low = torch.randn(12, 2, generator=g, dtype=torch.float64) @ torch.randn(2, 10, generator=g, dtype=torch.float64)
    return [
        Case((torch.diag(torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64)), 1),
             hint="square the singular values: ||delta||_F^2 = sum of s_i^2, so rank 1 keeps 9 / 14 here."),
        Case((torch.diag(torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64)), 2),
             hint="keep the r LARGEST singular values; torch.linalg.svdvals returns them in descending order."),
        Case((torch.randn(8, 5, generator=g, dtype=torch.float64), 1),
             hint="rank r means the top r singular values: s[:r], not s[:r + 1] or s[r]."),
        Case((low + 1e-3 * torch.randn(12, 10, generator=g, dtype=torch.float64), 2),
             hint="a rank-2 matrix plus a little noise: rank 2 should keep almost everything."),
        Case((torch.randn(6, 9, generator=g, dtype=torch.float64), 6), hint="r = min(m, n) keeps all of it: 1.0."),
    ]


function_check("captured_energy", _captured_energy_cases, rtol=1e-9, atol=1e-12)


def check_captured_energy(fn) -> None:
    """captured_energy(delta (m, n), r) = (s_1^2 + ... + s_r^2) / (s_1^2 + ... + s_k^2): the share of
    ||delta||_F^2 that the best rank-r approximation keeps (Eckart-Young), a float in [0, 1]."""
    run_check("captured_energy", fn)


def _lora_from_delta_cases():
    g = torch.Generator().manual_seed(10)
    return [
        Case((torch.randn(6, 4, generator=g, dtype=torch.float64), 2),
             hint="B must be (out, r) = U_r diag(s_r)^(1/2) and A (r, in) = diag(s_r)^(1/2) V_r^T (or put all "
                  "of s on one side); delta's rows are outputs."),
        Case((torch.randn(5, 9, generator=g, dtype=torch.float64), 3),
             hint="keep the top r singular triplets: U[:, :r], s[:r], Vh[:r] (Vh already holds V^T)."),
        Case((torch.randn(7, 7, generator=g, dtype=torch.float64), 1), hint="rank 1: B is one column, A one row."),
        Case((torch.randn(4, 6, generator=g, dtype=torch.float64), 4),
             hint="r = min(out, in) reproduces delta exactly."),
    ]


def _shapes_and_product(output):
    """What is compared of a (B, A) pair: both shapes and the product B @ A (None if they do not multiply)."""
    if not (isinstance(output, (list, tuple)) and len(output) == 2):
        raise ValueError("lora_from_delta must return the pair (B, A) of two matrices")
    B, A = (np.asarray(m, dtype=np.float64) for m in output)
    fits = B.ndim == A.ndim == 2 and B.shape[1] == A.shape[0] and B.shape[0] * A.shape[1] <= 10**6  # no huge B A
    product = B @ A if fits else None
    return {"B": tuple(B.shape), "A": tuple(A.shape), "BA": product}


function_check("lora_from_delta", _lora_from_delta_cases, rtol=1e-8, atol=1e-10, project=_shapes_and_product)


def check_lora_from_delta(fn) -> None:
    """lora_from_delta(delta (out, in), r) -> (B (out, r), A (r, in)) with B @ A the best rank-r
    approximation of delta (a truncated SVD). The check compares shapes and the product B @ A."""
    run_check("lora_from_delta", fn)


def _multi_adapter_cases():
    g = torch.Generator().manual_seed(11)

    def setup(n, t, d_in, d_out, r, k, ids):
        x = torch.randn(n, t, d_in, generator=g, dtype=torch.float64)
        w = torch.randn(d_out, d_in, generator=g, dtype=torch.float64)
        As = [torch.randn(r, d_in, generator=g, dtype=torch.float64) for _ in range(k)]
        Bs = [torch.randn(d_out, r, generator=g, dtype=torch.float64) for _ in range(k)]
        return x, w, As, Bs, [0.5 * (j + 1) for j in range(k)], torch.tensor(ids)

    return [
        Case(setup(2, 3, 4, 5, 2, 1, [0, 0]),
             hint="one adapter: y = x W^T + s (x A^T) B^T; the scale s multiplies the LoRA path only."),
        Case(setup(3, 2, 4, 5, 2, 2, [1, 0, 1]),
             hint="each row i uses its own adapter adapter_ids[i], with its own scaling."),
        Case(setup(4, 1, 6, 3, 1, 3, [2, 2, 0, 1]), hint="B is (out, r) and A is (r, in): x A^T, then B^T."),
        Case(setup(1, 5, 3, 3, 3, 2, [1]), hint="keep the token axis: the output is (N, T, out)."),
    ]


function_check("multi_adapter_forward", _multi_adapter_cases, rtol=1e-9, atol=1e-12)


def check_multi_adapter_forward(fn) -> None:
    """multi_adapter_forward(x (N, T, in), weight (out, in), As [K x (r, in)], Bs [K x (out, r)], scalings [K],
    adapter_ids (N,)) -> (N, T, out): row i uses adapter k = adapter_ids[i]: x_i W^T + s_k x_i A_k^T B_k^T."""
    run_check("multi_adapter_forward", fn)
