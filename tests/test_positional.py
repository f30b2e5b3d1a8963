"""lmbook.positional against independent implementations: transformers' RoPE scaling functions, Llama's rotary
embedding, a complex-number RoPE, bloom's ALiBi, distilbert's sinusoid table, T5's buckets; and bad input."""

import math

import numpy as np
import pytest
import torch
from lmbook.positional import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    relative_position_bucket,
    rope_inv_freq,
    sinusoidal_encoding,
)
from lmbook.rope_scaling import yarn_attention_factor, yarn_ramp

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402


def hf_config(head_dim, base, rope_type, L=4096, **params):
    """A LlamaConfig whose only role is to carry the RoPE parameters (max_position_embeddings = L)."""
    return llama.LlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, max_position_embeddings=L,
                             rope_parameters={"rope_type": rope_type, "rope_theta": base, **params})


# ---- sinusoidal ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,d", [(50, 16), (512, 64), (7, 2)])
def test_sinusoidal_matches_distilbert(n, d):
    from transformers.models.distilbert.modeling_distilbert import _create_sinusoidal_embeddings
    expected = torch.empty(n, d)
    _create_sinusoidal_embeddings(n, d, expected)
    torch.testing.assert_close(sinusoidal_encoding(n, d), expected, atol=1e-6, rtol=0)  # float32 tables


def test_sinusoidal_worked_example_and_shift_rotation():
    pe = sinusoidal_encoding(2, 4)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1], atol=1e-7)
    np.testing.assert_allclose(pe[1], [0.84147098, 0.54030231, 0.00999983, 0.99995], atol=1e-7)
    # PE(p + k) = R(k) PE(p) with R acting on each (sin, cos) pair as [[cos wk, sin wk], [-sin wk, cos wk]]
    d, k = 8, 3
    table = sinusoidal_encoding(40, d).double()
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    for p in (0, 5, 30):
        pairs = table[p].view(-1, 2)
        c, s = torch.cos(w * k), torch.sin(w * k)
        shifted = torch.stack([c * pairs[:, 0] + s * pairs[:, 1], -s * pairs[:, 0] + c * pairs[:, 1]], 1)
        torch.testing.assert_close(shifted.flatten(), table[p + k], atol=1e-6, rtol=0)


# ---- RoPE: unscaled ---------------------------------------------------------------------------------------------

def complex_rope(x, positions, inv_freq):
    """Brute force: the interleaved pair (x_2i, x_2i+1) is the complex number x_2i + i x_2i+1, times e^{i p theta_i}."""
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())  # (..., T, d/2)
    angle = positions.double()[:, None] * inv_freq.double()
    return torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).flatten(-2)


def test_interleaved_pairing_is_complex_multiplication():
    d, T = 16, 11
    x = torch.randn(2, 3, T, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    pos = torch.arange(5, 5 + T)
    inv = rope_inv_freq(d, 500.0)
    torch.testing.assert_close(apply_rope(x, pos, inv, "interleaved"), complex_rope(x, pos, inv),
                               atol=1e-5, rtol=0)  # float32 angles against float64 angles


def test_pairings_are_one_permutation_apart():
    d = 12
    x = torch.randn(4, 9, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # interleaved layout -> half layout
    inv, pos = rope_inv_freq(d), torch.arange(9)
    torch.testing.assert_close(apply_rope(x[..., perm], pos, inv, "half"),
                               apply_rope(x, pos, inv, "interleaved")[..., perm], atol=1e-12, rtol=0)


# ---- RoPE scaling against transformers ---------------------------------------------------------------------------

SCALED_CASES = [  # (head_dim, base, our scaling dict, transformers rope_type, its parameters, L)
    (64, 10000.0, {"type": "linear", "factor": 4.0}, "linear", {"factor": 4.0}, 4096),
    (16, 500.0, {"type": "linear", "factor": 2.5}, "linear", {"factor": 2.5}, 128),
    (128, 10000.0, {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}, "yarn",
     {"factor": 4.0, "original_max_position_embeddings": 4096}, 4096),
    (64, 1e5, {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192, "beta_fast": 16,
               "beta_slow": 2}, "yarn",
     {"factor": 8.0, "original_max_position_embeddings": 8192, "beta_fast": 16, "beta_slow": 2}, 8192),
    (32, 10000.0, {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128, "truncate": False},
     "yarn", {"factor": 2.0, "original_max_position_embeddings": 128, "truncate": False}, 128),
    (128, 500000.0, {"type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0}, "llama3",
     {"factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
     8192),
    (64, 10000.0, {"type": "llama3", "factor": 4.0, "original_max_position_embeddings": 2048,
                   "low_freq_factor": 2.0, "high_freq_factor": 8.0}, "llama3",
     {"factor": 4.0, "original_max_position_embeddings": 2048, "low_freq_factor": 2.0, "high_freq_factor": 8.0},
     2048),
]


@pytest.mark.parametrize("head_dim,base,ours,rope_type,params,L", SCALED_CASES)
def test_scaled_frequencies_match_transformers(head_dim, base, ours, rope_type, params, L):
    expected, attention_factor = ROPE_INIT_FUNCTIONS[rope_type](hf_config(head_dim, base, rope_type, L, **params),
                                                                "cpu")
    torch.testing.assert_close(rope_inv_freq(head_dim, base, ours), expected, rtol=1e-6, atol=0)
    if rope_type == "yarn":
        assert yarn_attention_factor(params["factor"]) == pytest.approx(attention_factor, rel=1e-12)


@pytest.mark.parametrize("seq_len", [None, 100, 4096, 4097, 10000, 16384])
@pytest.mark.parametrize("factor", [1.0, 2.0, 4.0])
def test_dynamic_ntk_matches_transformers(seq_len, factor):
    L, d, base = 4096, 64, 10000.0
    cfg = hf_config(d, base, "dynamic", L, factor=factor)
    expected, _ = ROPE_INIT_FUNCTIONS["dynamic"](cfg, "cpu", seq_len=seq_len)
    scaling = {"type": "dynamic", "factor": factor, "original_max_position_embeddings": L}
    if seq_len is not None:
        scaling["seq_len"] = seq_len
    torch.testing.assert_close(rope_inv_freq(d, base, scaling), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("s", [2.0, 4.0, 8.0])
def test_ntk_base_change(s):
    """Static NTK-aware scaling with factor s is transformers' dynamic rule with factor 1 at length s L, and
    it keeps the highest frequency and divides the lowest by exactly s."""
    d, base, L = 128, 10000.0, 4096
    ntk = rope_inv_freq(d, base, {"type": "ntk", "factor": s})
    dynamic, _ = ROPE_INIT_FUNCTIONS["dynamic"](hf_config(d, base, "dynamic", L, factor=1.0), "cpu",
                                                seq_len=int(s * L))
    torch.testing.assert_close(ntk, dynamic, rtol=1e-6, atol=0)
    plain = rope_inv_freq(d, base)
    assert ntk[0] == plain[0]
    assert (ntk[-1] / plain[-1]).item() == pytest.approx(1 / s, rel=1e-5)
    if s == 4.0:  # the worked example: b' = 40,889.9 and ratios 1, 0.978, 0.506, 0.25
        assert base * s ** (d / (d - 2)) == pytest.approx(40889.9, abs=0.05)
        np.testing.assert_allclose((ntk / plain)[[0, 1, 31, 63]].numpy(), [1, 0.9782, 0.5055, 0.25], atol=1e-4)


def test_scaled_rope_end_to_end_matches_llama_rotary_embedding():
    """The scaled frequencies drive apply_rope exactly as LlamaRotaryEmbedding + apply_rotary_pos_emb
    (including YaRN's attention factor, which transformers folds into cos and sin)."""
    d, base, L, s = 32, 10000.0, 64, 4.0
    cfg = hf_config(d, base, "yarn", L, factor=s, original_max_position_embeddings=L)
    rotary = llama.LlamaRotaryEmbedding(cfg)
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 2, 9, d, generator=g), torch.randn(1, 2, 9, d, generator=g)
    positions = torch.tensor([[0, 1, 2, 50, 100, 150, 200, 250, 255]])
    q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, *rotary(q, positions))
    inv = rope_inv_freq(d, base, {"type": "yarn", "factor": s, "original_max_position_embeddings": L})
    m = yarn_attention_factor(s)
    torch.testing.assert_close(apply_rope(q, positions, inv) * m, q_ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(apply_rope(k, positions, inv) * m, k_ref, atol=1e-5, rtol=0)


def test_yarn_keeps_high_and_interpolates_low_frequencies():
    """The worked example d = 128, L = 4096, s = 4: planes 0..20 unchanged, 46..63 divided by s (the seed had
    the direction inverted), and the lowest plane reaches at 4L exactly the angle it reached at L in training."""
    d, base, L, s = 128, 10000.0, 4096, 4.0
    plain = rope_inv_freq(d, base)
    yarn = rope_inv_freq(d, base, {"type": "yarn", "factor": s, "original_max_position_embeddings": L})
    ratio = yarn / plain
    assert torch.allclose(ratio[:21], torch.ones(21)) and not torch.isclose(ratio[21], torch.tensor(1.0))
    assert torch.allclose(ratio[46:], torch.full((18,), 1 / s)) and not torch.isclose(ratio[45], torch.tensor(1 / s))
    assert (s * L * yarn[-1]).item() == pytest.approx((L * plain[-1]).item(), rel=1e-6)


def test_yarn_paper_ramp_and_code_ramp_agree_only_outside_the_band():
    d, base, L = 128, 10000.0, 4096
    by_index, by_ratio = yarn_ramp(d, base, L, by="index"), yarn_ramp(d, base, L, by="ratio")
    r = L * rope_inv_freq(d, base) / (2 * math.pi)
    outside = (r >= 32 * 1.15) | (r <= 1 / 1.15)
    torch.testing.assert_close(by_index[outside], by_ratio[outside])
    assert (by_index - by_ratio).abs().max() > 0.1  # they differ inside the band


@pytest.mark.parametrize("head_dim, base, L, s, low, high", [(128, 500000.0, 8192, 8.0, 1.0, 4.0),
                                                         (64, 10000.0, 2048, 4.0, 2.0, 8.0)])
def test_llama31_rule_is_yarn_paper_ramp_without_temperature(head_dim, base, L, s, low, high):
    """The chapter's claim: Llama 3.1's rule is YaRN with the ramp in r_i = L / lambda_i and thresholds (low, high)."""
    llama = rope_inv_freq(head_dim, base, {"type": "llama3", "factor": s, "original_max_position_embeddings": L,
                                           "low_freq_factor": low, "high_freq_factor": high})
    yarn = rope_inv_freq(head_dim, base, {"type": "yarn", "factor": s, "original_max_position_embeddings": L,
                                          "beta_fast": high, "beta_slow": low, "ramp": "ratio"})
    torch.testing.assert_close(llama, yarn, rtol=1e-6, atol=0)


def test_yarn_temperature_values():
    for s, inv_t in [(1, 1.0), (2, 1.1434), (4, 1.2965), (8, 1.4591), (16, 1.6314)]:
        assert yarn_attention_factor(s) ** 2 == pytest.approx(inv_t, abs=5e-5)


# ---- ALiBi --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_heads", [1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 40])
def test_alibi_slopes_match_bloom(n_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    bloom = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)  # (H, 1, 2): m_h * [0, 1]
    torch.testing.assert_close(alibi_slopes(n_heads), bloom[:, 0, 1], atol=1e-6, rtol=0)


def test_alibi_slopes_for_eight_heads():
    assert alibi_slopes(8).tolist() == [2.0 ** -h for h in range(1, 9)]


@pytest.mark.parametrize("q_len,k_len", [(6, 6), (1, 6), (3, 7)])
def test_alibi_bias_equals_bloom_after_the_causal_softmax(q_len, k_len):
    """bloom adds m_h * j (a per-key bias); we add -m_h (i - j). They differ by m_h * i, a constant per row,
    which the softmax ignores, so the causal attention weights agree."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    H = 6
    scores = torch.randn(H, q_len, k_len, generator=torch.Generator().manual_seed(4))
    causal = torch.ones(q_len, k_len, dtype=torch.bool).tril(k_len - q_len)
    bloom = build_alibi_tensor(torch.ones(1, k_len), H, torch.float32)  # (H, 1, k_len)
    ours = torch.softmax((scores + alibi_bias(H, q_len, k_len)).masked_fill(~causal, -math.inf), -1)
    theirs = torch.softmax((scores + bloom).masked_fill(~causal, -math.inf), -1)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)


def test_alibi_bias_values():
    bias = alibi_bias(2, 3, 5)  # queries at key positions 2, 3, 4
    assert bias[0, 2].tolist() == [-4 / 16, -3 / 16, -2 / 16, -1 / 16, 0.0]  # m = 2^(-8/2) = 1/16 for two heads
    assert bias[1, 0, 2] == 0 and bias[1, 0, 0] == -2 / 256  # m = 2^(-8)


# ---- T5 buckets -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional,num_buckets,max_distance", [(True, 32, 128), (False, 32, 128), (True, 8, 20),
                                                                      (False, 16, 64)])
def test_relative_position_bucket_matches_t5(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention
    rel = torch.arange(-300, 301)[None, :].expand(2, -1)
    expected = T5Attention._relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    assert torch.equal(relative_position_bucket(rel, bidirectional, num_buckets, max_distance), expected)


# ---- bad input -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scaling,match", [
    ({"type": "linear", "factor": 0.5}, r"scaling\['factor'\] must be a number >= 1"),
    ({"type": "linear"}, r"scaling\['factor'\]"),
    ({"type": "ntk", "factor": "2"}, r"scaling\['factor'\] must be a number"),  # a TypeError
    ({"type": "rescaled", "factor": 2.0}, r"scaling\['type'\] must be one of"),
    ({"factor": 2.0}, r"scaling\['type'\]"),
    ({"type": "yarn", "factor": 2.0}, r"scaling\['original_max_position_embeddings'\] is required"),
    ({"type": "llama3", "factor": 2.0}, r"scaling\['original_max_position_embeddings'\] is required"),
    ({"type": "dynamic", "factor": 2.0}, r"scaling\['original_max_position_embeddings'\] is required"),
    ({"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128, "beta_fast": 1.0},
     r"scaling\['beta_fast'\] must exceed"),
    ({"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128, "ramp": "r"}, r"scaling\['ramp'\]"),
    ({"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 12.5}, "must be an int"),  # a TypeError
    ({"type": "llama3", "factor": 2.0, "original_max_position_embeddings": 128, "high_freq_factor": 0.5},
     r"scaling\['high_freq_factor'\] must exceed"),
    ({"type": "linear", "factor": 2.0, "original_max_position_embeddings": 128}, "unknown"),
    ({"type": "yarn", "factor": 2.0, "original_max_pos": 128}, "unknown"),
    ("linear", "scaling must be None or a dict"),  # a TypeError
])
def test_bad_scaling_is_refused_naming_the_field(scaling, match):
    wrong_type = isinstance(scaling, str) or match.endswith(("must be a number", "must be an int"))
    with pytest.raises(TypeError if wrong_type else ValueError, match=match):
        rope_inv_freq(16, 10000.0, scaling)


def test_other_bad_input():
    with pytest.raises(ValueError, match="head_dim must be an even int"):
        rope_inv_freq(15)
    with pytest.raises(ValueError, match="head_dim must be an even int"):
        rope_inv_freq(15, scaling={"type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match="d_model must be an even int"):
        sinusoidal_encoding(10, 7)
    with pytest.raises(ValueError, match="n_positions"):
        sinusoidal_encoding(0, 8)
    with pytest.raises(ValueError, match="base must be"):
        sinusoidal_encoding(10, 8, base=0.5)
    with pytest.raises(ValueError, match="s must be a number >= 1"):
        yarn_attention_factor(0.5)
    with pytest.raises(ValueError, match="n_heads"):
        alibi_slopes(0)
    with pytest.raises(ValueError, match="q_len=5 must not exceed k_len=3"):
        alibi_bias(4, 5, 3)
    with pytest.raises(ValueError, match="k_len"):
        alibi_bias(4, 1, 0)
    with pytest.raises(ValueError, match="by must be"):
        yarn_ramp(16, 10000.0, 128, by="plane")
    with pytest.raises(TypeError, match="relative_position must be an integer tensor"):
        relative_position_bucket(torch.tensor([0.5]))
    with pytest.raises(ValueError, match="max_distance"):
        relative_position_bucket(torch.arange(5), num_buckets=32, max_distance=4)


def test_rope_cos_sin_and_rotate_pairs_reject_bad_input():
    from lmbook.positional import rope_cos_sin, rotate_pairs

    with pytest.raises(TypeError, match="positions must be an integer tensor"):
        rope_cos_sin(torch.tensor([0.5, 1.5]), rope_inv_freq(8))
    cos, sin = rope_cos_sin(torch.arange(5), rope_inv_freq(8))  # (5, 4)
    with pytest.raises(ValueError, match="last axis d/2 = 3"):
        rotate_pairs(torch.randn(5, 6), cos, sin)
    with pytest.raises(ValueError, match="pairing"):
        rotate_pairs(torch.randn(5, 8), cos, sin, pairing="neox")
    assert rotate_pairs(torch.randn(5, 8), cos, sin).shape == (5, 8)


def test_odd_head_dim_and_negative_positions_are_clear_errors():
    with pytest.raises(ValueError, match="x must have shape .* even head dim"):
        apply_rope(torch.randn(5, 7), torch.arange(5), rope_inv_freq(6))
    with pytest.raises(ValueError, match="positions must be integers >= 0"):
        apply_rope(torch.randn(5, 8), torch.arange(-1, 4), rope_inv_freq(8))
    with pytest.raises(ValueError, match="positions must be integers of shape"):  # (B, T) positions need (B, H, T, d)
        apply_rope(torch.randn(5, 8), torch.arange(5)[None], rope_inv_freq(8))


@pytest.mark.parametrize("scaling", [
    {"type": "linear", "factor": 4.0},
    {"type": "ntk", "factor": 4.0},
    {"type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 64, "seq_len": 500},
    {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "ramp": "ratio"},
    {"type": "llama3", "factor": 8.0, "original_max_position_embeddings": 256, "high_freq_factor": 2.0},
])
def test_each_method_function_is_the_scaling_dict(scaling):
    """rope_inv_freq(d, b, scaling) is the method's own function of lmbook.rope_scaling, bit for bit."""
    from lmbook import rope_scaling as RS

    options = {k: v for k, v in scaling.items() if k != "type"}
    method = RS.SCALED[scaling["type"]]
    assert method.__name__ == f"{scaling['type']}_inv_freq"
    assert torch.equal(rope_inv_freq(32, 500.0, scaling), method(32, 500.0, **options))
    assert torch.equal(RS.scaled_inv_freq(32, 500.0, None), rope_inv_freq(32, 500.0))
