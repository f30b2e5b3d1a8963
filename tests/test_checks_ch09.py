"""Chapter 9's self-checks accept the right answer and reject plausible wrong ones with a message."""

import math

import numpy as np
from check_helpers import verdict
from lmbook import checks
from lmbook.model import Transformer, TransformerConfig


def test_double_softmax_floor(capsys):
    floor = math.log(math.e + 2) - 1  # |V| = 3
    ok, out = verdict(capsys, checks.check_double_softmax_floor, floor, "double_softmax_floor")
    assert ok and "✓" in out
    ok, out = verdict(capsys, checks.check_double_softmax_floor, math.log(3), "double_softmax_floor")  # uniform
    assert not ok and "one-hot" in out
    ok, out = verdict(capsys, checks.check_double_softmax_floor, math.log(3) - 1, "double_softmax_floor")  # e^0 for e^1
    assert not ok and "e^1, not e^0" in out
    left_out = math.log(2) - 1  # the target's own term left out
    assert not verdict(capsys, checks.check_double_softmax_floor, left_out, "double_softmax_floor")[0]
    assert not verdict(capsys, checks.check_double_softmax_floor, floor / math.log(2), "double_softmax_floor")[0]
    smollm2 = math.log(math.e + 49151) - 1
    assert not verdict(capsys, checks.check_double_softmax_floor, smollm2, "double_softmax_floor")[0]


def test_count_parameters(capsys):
    def good(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff, tie_embeddings=True):
        cfg = TransformerConfig(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                                n_kv_heads=n_kv_heads, d_ff=d_ff, tie_embeddings=tie_embeddings)
        if vocab_size > 10000:  # SmolLM2: count without building 134M parameters
            hd = d_model // n_heads
            block = 2 * d_model * d_model + 2 * d_model * n_kv_heads * hd + 3 * d_model * d_ff + 2 * d_model
            return vocab_size * d_model + n_layers * block + d_model
        return Transformer(cfg).num_parameters()  # the real model is the reference for the small cases

    ok, out = verdict(capsys, checks.check_count_parameters, good, "count_parameters")
    assert ok, out

    def mha_only(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff, tie_embeddings=True):  # ignores GQA
        block = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
        return vocab_size * d_model * (1 if tie_embeddings else 2) + n_layers * block + d_model

    ok, out = verdict(capsys, checks.check_count_parameters, mha_only, "count_parameters")
    assert not ok and "n_kv_heads" in out

    def no_final_norm(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff, tie_embeddings=True):
        return good(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff, tie_embeddings) - d_model

    assert not verdict(capsys, checks.check_count_parameters, no_final_norm, "count_parameters")[0]


def test_residual_jacobian_norm(capsys):
    def good(layers, alpha):  # an independent form: push the identity through the blocks one column at a time
        out = np.eye(len(layers[0]))
        for W in layers:
            out = out + alpha * (np.asarray(W) @ out)
        return np.linalg.svd(out, compute_uv=False)[0]

    assert verdict(capsys, checks.check_residual_jacobian_norm, good, "residual_jacobian_norm")[0]

    def scaled_identity(layers, alpha):  # alpha (I + W) instead of I + alpha W
        out = np.eye(len(layers[0]))
        for W in layers:
            out = alpha * (np.eye(len(W)) + W) @ out
        return np.linalg.norm(out, 2)

    ok, out = verdict(capsys, checks.check_residual_jacobian_norm, scaled_identity, "residual_jacobian_norm")
    assert not ok and "identity" in out

    def reversed_order(layers, alpha):
        out = np.eye(len(layers[0]))
        for W in layers:
            out = out @ (np.eye(len(W)) + alpha * W)
        return np.linalg.norm(out, 2)

    ok, out = verdict(capsys, checks.check_residual_jacobian_norm, reversed_order, "residual_jacobian_norm")
    assert not ok and "in order" in out

    def frobenius(layers, alpha):
        out = np.eye(len(layers[0]))
        for W in layers:
            out = (np.eye(len(W)) + alpha * W) @ out
        return np.linalg.norm(out)

    assert not verdict(capsys, checks.check_residual_jacobian_norm, frobenius, "residual_jacobian_norm")[0]


def test_wsd_lr(capsys):
    def good(step, peak_lr, warmup_steps, total_steps, decay_steps, min_lr_ratio=0.0):
        if step < warmup_steps:
            return peak_lr * (step + 1) / warmup_steps
        left = total_steps - 1 - step  # steps after this one
        if left >= decay_steps:
            return peak_lr
        floor = peak_lr * min_lr_ratio
        return floor + (peak_lr - floor) * left / decay_steps

    assert verdict(capsys, checks.check_wsd_lr, good, "wsd_lr")[0]

    def warmup_from_step(step, peak_lr, warmup_steps, total_steps, decay_steps, min_lr_ratio=0.0):
        return peak_lr * step / warmup_steps if step < warmup_steps else good(step, peak_lr, warmup_steps,
                                                                               total_steps, decay_steps, min_lr_ratio)

    ok, out = verdict(capsys, checks.check_wsd_lr, warmup_from_step, "wsd_lr")
    assert not ok and "warm-up" in out

    def decays_to_zero(step, peak_lr, warmup_steps, total_steps, decay_steps, min_lr_ratio=0.0):
        return good(step, peak_lr, warmup_steps, total_steps, decay_steps, 0.0)

    ok, out = verdict(capsys, checks.check_wsd_lr, decays_to_zero, "wsd_lr")
    assert not ok and "min_lr_ratio" in out

    def cosine_decay(step, peak_lr, warmup_steps, total_steps, decay_steps, min_lr_ratio=0.0):
        if step < total_steps - decay_steps:
            return good(step, peak_lr, warmup_steps, total_steps, decay_steps, min_lr_ratio)
        done = (step - total_steps + decay_steps + 1) / decay_steps
        return peak_lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * done)))

    assert not verdict(capsys, checks.check_wsd_lr, cosine_decay, "wsd_lr")[0]
