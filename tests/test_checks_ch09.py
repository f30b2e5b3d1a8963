"""Chapter 9's self-checks accept the right answer and reject plausible wrong ones with a message."""

import torch
from check_helpers import verdict
from lmbook import checks, decoding
from lmbook.model import Transformer, TransformerConfig


def test_deepnorm_alpha(capsys):
    ok, out = verdict(capsys, checks.check_deepnorm_alpha, 200 ** 0.25, "deepnorm_alpha")
    assert ok and "✓" in out
    ok, out = verdict(capsys, checks.check_deepnorm_alpha, 1 / (4 * 100) ** 0.5, "deepnorm_alpha")  # erratum E81
    assert not ok and "skip path" in out
    assert not verdict(capsys, checks.check_deepnorm_alpha, 8 * 100 ** -0.25, "deepnorm_alpha")[0]


def test_rms_norm(capsys):
    def good(x, weight, eps=1e-6):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    assert verdict(capsys, checks.check_rms_norm, good, "rms_norm")[0]

    def layer_norm(x, weight, eps=1e-6):  # centres first
        x = x - x.mean(-1, keepdim=True)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    ok, out = verdict(capsys, checks.check_rms_norm, layer_norm, "rms_norm")
    assert not ok and "mean" in out

    def eps_outside(x, weight, eps=1e-6):
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight

    assert not verdict(capsys, checks.check_rms_norm, eps_outside, "rms_norm")[0]

    def wrong_axis(x, weight, eps=1e-6):
        return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * weight

    assert not verdict(capsys, checks.check_rms_norm, wrong_axis, "rms_norm")[0]


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


def test_top_p_filter(capsys):
    ok, out = verdict(capsys, checks.check_top_p_filter, decoding.top_p_filter, "top_p_filter")
    assert ok and "✓" in out

    def stops_below_p(logits, p):  # keeps only tokens whose cumulative mass, themselves included, is <= p
        probs, order = logits.softmax(-1).sort(-1, descending=True)
        drop = probs.cumsum(-1) > p
        return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))

    ok, out = verdict(capsys, checks.check_top_p_filter, stops_below_p, "top_p_filter")
    assert not ok and "crosses" in out

    def unsorted(logits, p):  # accumulates in vocabulary order
        drop = (logits.softmax(-1).cumsum(-1) - logits.softmax(-1)) >= p
        return logits.masked_fill(drop, float("-inf"))

    assert not verdict(capsys, checks.check_top_p_filter, unsorted, "top_p_filter")[0]


def test_distinct_n(capsys):
    assert verdict(capsys, checks.check_distinct_n, decoding.distinct_n, "distinct_n")[0]

    def distinct_over_types(sequences, n):  # divides by the number of distinct tokens instead
        grams = [tuple(s[i:i + n]) for s in sequences for i in range(len(s) - n + 1)]
        return len(set(grams)) / len({t for s in sequences for t in s})

    assert not verdict(capsys, checks.check_distinct_n, distinct_over_types, "distinct_n")[0]

    def crosses_sequences(sequences, n):  # concatenates the sequences first
        flat = [t for s in sequences for t in s]
        grams = [tuple(flat[i:i + n]) for i in range(len(flat) - n + 1)]
        return len(set(grams)) / len(grams)

    ok, out = verdict(capsys, checks.check_distinct_n, crosses_sequences, "distinct_n")
    assert not ok and "hint" in out

    def off_by_one(sequences, n):  # misses the last n-gram of each sequence
        grams = [tuple(s[i:i + n]) for s in sequences for i in range(len(s) - n)]
        return len(set(grams)) / len(grams)

    assert not verdict(capsys, checks.check_distinct_n, off_by_one, "distinct_n")[0]
