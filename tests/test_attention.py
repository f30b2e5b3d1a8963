"""lmbook.attention, attention_fast, additive_attention and efficient_attention: against torch's
F.scaled_dot_product_attention (masks, causal alignment, enable_gqa) and nn.MultiheadAttention with copied weights
(key_padding_mask included), torch.softmax; additive scores, flash and linear attention against brute force; each
fast path of fast_attention against the readable scaled_dot_product_attention; chapter 7's alignment figure."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from lmbook import additive_attention as AA
from lmbook import attention as A
from lmbook import attention_fast as AF
from lmbook import efficient_attention as EA
from torch.nn.attention.bias import causal_lower_right

TOL = dict(atol=1e-5, rtol=1e-5)  # float32; the orders of summation differ from torch's kernels


def qkv(seed, B=2, H=4, Tq=7, Tk=7, d=8, dv=None, Hkv=None, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    Hkv = H if Hkv is None else Hkv
    q = torch.randn(B, H, Tq, d, generator=g, dtype=dtype)
    k = torch.randn(B, Hkv, Tk, d, generator=g, dtype=dtype)
    v = torch.randn(B, Hkv, Tk, dv or d, generator=g, dtype=dtype)
    return q, k, v


# ---- softmax -------------------------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [0.1, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_matches_torch(temperature, dim):
    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 5
    expected = torch.softmax(x / temperature, dim)
    torch.testing.assert_close(A.softmax(x, dim, temperature), expected, atol=1e-12, rtol=0)


def test_softmax_is_stable_and_masked_rows_are_zero():
    x = torch.tensor([[1000.0, 1001.0, 999.0], [float("-inf")] * 3, [0.0, float("-inf"), 0.0]])
    out = A.softmax(x)
    torch.testing.assert_close(out[0], torch.softmax(torch.tensor([1.0, 2.0, 0.0]), -1))
    assert out[1].tolist() == [0.0, 0.0, 0.0]
    assert out[2].tolist() == [0.5, 0.0, 0.5]


def test_temperature_flattens():
    x = torch.tensor([2.0, 1.0, 0.1])
    entropy = lambda p: -(p * p.log()).sum().item()  # noqa: E731
    values = [entropy(A.softmax(x, temperature=t)) for t in (0.25, 0.5, 1.0, 2.0, 4.0)]
    assert values == sorted(values) and values[-1] < math.log(3)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "1"])
def test_softmax_rejects_bad_temperature(bad):
    with pytest.raises(TypeError if isinstance(bad, str) else ValueError, match="temperature"):
        A.softmax(torch.zeros(3), temperature=bad)


def test_softmax_rejects_integer_tensor():
    with pytest.raises(TypeError, match="floating"):
        A.softmax(torch.arange(3))


# ---- scaled dot-product attention vs torch ------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape", [dict(Tq=7, Tk=7), dict(Tq=3, Tk=9), dict(Tq=9, Tk=3, dv=5),
                                   dict(B=1, H=8, Tq=300, Tk=300, d=16)])
def test_sdpa_matches_torch_without_mask(seed, shape):
    q, k, v = qkv(seed, **shape)
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v), expected, **TOL)


@pytest.mark.parametrize("scale", [0.05, 1.0])
def test_sdpa_custom_scale(scale):
    q, k, v = qkv(3)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, scale=scale),
                               F.scaled_dot_product_attention(q, k, v, scale=scale), **TOL)


@pytest.mark.filterwarnings("ignore:Lower right causal bias")  # torch warns of NaN for Tq > Tk; both give 0
@pytest.mark.parametrize("Tq,Tk", [(7, 7), (3, 9), (9, 3), (300, 320)])
def test_is_causal_is_lower_right_aligned_like_causal_lower_right(Tq, Tk):
    """torch's own is_causal is top-left aligned; its causal_lower_right mask is our is_causal."""
    q, k, v = qkv(4, Tq=Tq, Tk=Tk)
    ours = A.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(Tq, Tk))
    torch.testing.assert_close(ours, expected, **TOL)
    if Tq == Tk:  # the two alignments agree on a square
        torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL)
    else:
        assert not torch.allclose(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL)


def test_causal_mask_small_cases_by_hand():
    assert A.causal_mask(2, 4).int().tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert A.causal_mask(3, 3).int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert A.causal_mask(3, 1).int().tolist() == [[0], [0], [1]]


@pytest.mark.parametrize("Tq,Tk", [(7, 7), (4, 9), (300, 300)])
@pytest.mark.parametrize("mask_shape", ["2d", "4d", "per_batch"])
def test_boolean_mask_matches_torch(Tq, Tk, mask_shape):
    q, k, v = qkv(5, Tq=Tq, Tk=Tk)
    g = torch.Generator().manual_seed(6)
    shape = {"2d": (Tq, Tk), "4d": (2, 4, Tq, Tk), "per_batch": (2, 1, 1, Tk)}[mask_shape]
    mask = torch.rand(shape, generator=g) > 0.3
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, mask=mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL)


@pytest.mark.parametrize("Tq,Tk", [(7, 7), (300, 300)])
def test_additive_float_mask_matches_torch_and_boolean_form(Tq, Tk):
    q, k, v = qkv(7, Tq=Tq, Tk=Tk)
    keep = torch.rand(Tq, Tk, generator=torch.Generator().manual_seed(8)) > 0.4
    keep[:, 0] = True  # no fully masked row, so the float mask is exactly equivalent
    additive = torch.zeros(Tq, Tk).masked_fill(~keep, float("-inf"))
    ours = A.scaled_dot_product_attention(q, k, v, mask=additive)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=additive), **TOL)
    torch.testing.assert_close(ours, A.scaled_dot_product_attention(q, k, v, mask=keep), **TOL)
    bias = torch.randn(Tq, Tk)  # a finite bias (ALiBi-like) is added to the scores
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, mask=bias),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=bias), **TOL)


@pytest.mark.parametrize("Tq,Tk", [(5, 6), (300, 300)])
def test_mask_combined_with_is_causal(Tq, Tk):
    q, k, v = qkv(9, Tq=Tq, Tk=Tk)
    pad = torch.ones(2, 1, 1, Tk, dtype=torch.bool)
    pad[1, ..., -2:] = False  # the second sequence's last two keys are padding
    both = pad & A.causal_mask(Tq, Tk)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, mask=pad, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=both), **TOL)


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@pytest.mark.parametrize("Tq", [5, 300])
def test_fully_masked_rows_give_zeros_like_torch(Tq):
    q, k, v = qkv(10, Tq=Tq, Tk=Tq)
    mask = torch.ones(Tq, Tq, dtype=torch.bool)
    mask[1] = False
    for m in (mask, torch.zeros(Tq, Tq).masked_fill(~mask, float("-inf"))):
        out, w = A.scaled_dot_product_attention(q, k, v, mask=m, return_weights=True)
        assert not out.isnan().any() and out[..., 1, :].abs().max() == 0 and w[..., 1, :].abs().max() == 0
        torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, mask=m),
                                   F.scaled_dot_product_attention(q, k, v, attn_mask=m), **TOL)
    q, k, v = qkv(11, Tq=4, Tk=2)  # causal with more queries than keys: the first rows see nothing
    out = A.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out[..., :2, :].abs().max() == 0
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(4, 2))
    torch.testing.assert_close(out, expected, **TOL)


@pytest.mark.parametrize("H,Hkv", [(8, 2), (6, 3), (4, 1), (4, 4)])
@pytest.mark.parametrize("T", [7, 300])
def test_gqa_matches_torch_enable_gqa(H, Hkv, T):
    q, k, v = qkv(12, H=H, Hkv=Hkv, Tq=T, Tk=T)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, is_causal=True), expected, **TOL)


def test_repeat_kv_is_repeat_interleave():
    x = torch.arange(2 * 3 * 1 * 1.0).view(2, 3, 1, 1)
    assert A.repeat_kv(x, 2)[0, :, 0, 0].tolist() == [0, 0, 1, 1, 2, 2]


def test_weights_rows_sum_to_one_and_match_softmax_of_scores():
    q, k, v = qkv(13, Tq=6, Tk=6)
    out, w = A.scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 6))
    assert (w.triu(1) == 0).all()
    torch.testing.assert_close(out, w @ v)


@pytest.mark.parametrize("masked", [False, True])
def test_fast_path_equals_readable_path(masked):
    q, k, v = qkv(14, B=2, H=3, Tq=260, Tk=270)
    mask = torch.rand(2, 1, 260, 270, generator=torch.Generator().manual_seed(1)) > 0.5 if masked else None
    fast = A.fast_attention(q, k, v, mask=mask, is_causal=masked)
    assert AF._use_fast_path(q, k)
    readable, _ = A.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=masked, return_weights=True)
    torch.testing.assert_close(fast, readable, atol=1e-6, rtol=1e-6)


def test_fast_path_with_several_row_tiles_equals_readable_path():
    q, k, v = qkv(21, B=1, H=2, Tq=600, Tk=2100)  # 2^20 // 2100 = 499 rows per tile: two tiles per head
    mask = torch.rand(600, 2100, generator=torch.Generator().manual_seed(2)) > 0.5
    mask[550] = False  # a fully masked row in the second tile
    fast = A.fast_attention(q, k, v, mask=mask)
    readable, _ = A.scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    torch.testing.assert_close(fast, readable, atol=1e-6, rtol=1e-6)
    assert fast[..., 550, :].abs().max() == 0


@pytest.mark.parametrize("Tq,Tk", [(600, 2100), (2100, 600), (1200, 1200), (300, 3000)])
@pytest.mark.parametrize("with_mask", [False, True])
def test_causal_fast_path_skips_keys_and_equals_readable_path(Tq, Tk, with_mask):
    q, k, v = qkv(22, B=1, H=2, Tq=Tq, Tk=Tk, d=4)
    mask = torch.rand(2, 1, 1, Tk, generator=torch.Generator().manual_seed(3)) > 0.3 if with_mask else None
    fast = A.fast_attention(q, k, v, mask=mask, is_causal=True)
    readable, _ = A.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=True, return_weights=True)
    torch.testing.assert_close(fast, readable, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("H,Hkv,k_batch", [(9, 3, 2), (4, 1, 2), (4, 4, 1), (6, 2, 1)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_decode_step_path_equals_readable_path(H, Hkv, k_batch, is_causal):
    """One query per head (a cached decoding step) takes the grouped path that never copies K/V."""
    g = torch.Generator().manual_seed(H * Hkv)
    q = torch.randn(2, H, 1, 8, generator=g)
    k, v = torch.randn(k_batch, Hkv, 11, 8, generator=g), torch.randn(k_batch, Hkv, 11, 5, generator=g)
    step = A.fast_attention(q, k, v, is_causal=is_causal)
    readable, _ = A.scaled_dot_product_attention(q, k, v, is_causal=is_causal, return_weights=True)
    torch.testing.assert_close(step, readable, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(step, F.scaled_dot_product_attention(q, k.expand(2, -1, -1, -1), v.expand(
        2, -1, -1, -1), enable_gqa=True), atol=1e-6, rtol=1e-6)


def test_gradients_flow_through_readable_path():
    q, k, v = (t.requires_grad_() for t in qkv(15, Tq=260, Tk=260, d=4))
    A.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(qq, kk, vv, is_causal=True).sum().backward()
    for a, b in ((q, qq), (k, kk), (v, vv)):
        torch.testing.assert_close(a.grad, b.grad, **TOL)


@pytest.mark.parametrize("kwargs,match", [
    (dict(q=(2, 4, 5, 8), k=(2, 4, 5, 6), v=(2, 4, 5, 6)), "head dim"),
    (dict(q=(2, 4, 5, 8), k=(2, 4, 5, 8), v=(2, 4, 6, 8)), "same length"),
    (dict(q=(2, 6, 5, 8), k=(2, 4, 5, 8), v=(2, 4, 5, 8)), "must divide"),
    (dict(q=(3, 4, 5, 8), k=(2, 4, 5, 8), v=(2, 4, 5, 8)), "do not broadcast"),
    (dict(q=(4, 5, 8), k=(2, 4, 5, 8), v=(2, 4, 5, 8)), "number of axes"),
    (dict(q=(8,), k=(5, 8), v=(5, 8)), r"\(\.\.\., T, d\)"),
])
def test_bad_shapes_raise_value_error_naming_shapes(kwargs, match):
    q, k, v = (torch.zeros(s) for s in (kwargs["q"], kwargs["k"], kwargs["v"]))
    with pytest.raises(ValueError, match=match) as err:
        A.scaled_dot_product_attention(q, k, v)
    assert str(tuple(kwargs["q"])) in str(err.value)


def test_bad_masks_raise():
    q, k, v = qkv(0, Tq=3, Tk=4)
    with pytest.raises(ValueError, match=r"q_len=3, k_len=4.*\(4, 3\)"):
        A.scaled_dot_product_attention(q, k, v, mask=torch.ones(4, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="dtype torch.int64"):
        A.scaled_dot_product_attention(q, k, v, mask=torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="mask must be a tensor"):
        A.scaled_dot_product_attention(q, k, v, mask=[[1, 1, 1, 1]] * 3)
    with pytest.raises(TypeError, match="q must be a floating-point tensor"):
        A.scaled_dot_product_attention(q.long(), k, v)


@pytest.mark.parametrize("H,Hkv,Tq,Tk", [(4, 4, 7, 7), (8, 2, 300, 300), (6, 3, 1, 40), (4, 1, 260, 300)])
@pytest.mark.parametrize("masked", [False, True])
def test_fast_attention_matches_torch(H, Hkv, Tq, Tk, masked):
    """Every path of fast_attention (readable, decoding step, slices) against torch, with and without a mask."""
    q, k, v = qkv(23, H=H, Hkv=Hkv, Tq=Tq, Tk=Tk)
    mask = torch.rand(2, 1, Tq, Tk, generator=torch.Generator().manual_seed(4)) > 0.3 if masked else None
    both = causal_lower_right(Tq, Tk)._materialize() & (True if mask is None else mask)
    k_all, v_all = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)  # torch's GQA
    expected = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=both)  # rejects this mask shape
    torch.testing.assert_close(A.fast_attention(q, k, v, mask=mask, is_causal=True), expected, **TOL)


def test_fast_attention_with_gradients_is_the_readable_path():
    q, k, v = (t.requires_grad_() for t in qkv(24, Tq=260, Tk=260, d=4))
    A.fast_attention(q, k, v, is_causal=True).sum().backward()
    assert q.grad is not None and k.grad is not None and v.grad is not None


# ---- masks --------------------------------------------------------------------------------------

def brute_mask(q_len, k_len, keep):
    off = k_len - q_len
    return torch.tensor([[keep(i + off, j) for j in range(k_len)] for i in range(q_len)], dtype=torch.bool)


@pytest.mark.parametrize("q_len,k_len", [(6, 6), (3, 8), (8, 3), (1, 10)])
@pytest.mark.parametrize("w", [1, 2, 3, 20])
def test_sliding_window_and_strided_masks_match_brute_force(q_len, k_len, w):
    window = brute_mask(q_len, k_len, lambda i, j: 0 <= i - j < w)
    assert torch.equal(EA.sliding_window_mask(q_len, k_len, w), window)
    assert torch.equal(EA.strided_mask(q_len, k_len, w),
                       brute_mask(q_len, k_len, lambda i, j: i >= j and ((i - j) < w or (i - j) % w == 0)))
    assert torch.equal(A.causal_mask(q_len, k_len), brute_mask(q_len, k_len, lambda i, j: j <= i))


def test_sliding_window_matches_hugging_face_style_band():
    """Mistral's sliding window: key j visible from query i iff i - window < j <= i."""
    T, w = 10, 4
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    assert torch.equal(EA.sliding_window_mask(T, T, w), (j <= i) & (j > i - w))


@pytest.mark.parametrize("call,match,error", [
    (lambda: A.causal_mask(-1, 3), "q_len", ValueError), (lambda: A.causal_mask(2, 2.0), "k_len", TypeError),
    (lambda: EA.sliding_window_mask(3, 3, 0), "window", ValueError),
    (lambda: EA.strided_mask(3, 3, True), "stride", TypeError),
])
def test_mask_bad_arguments(call, match, error):
    with pytest.raises(error, match=match):
        call()


# ---- multi-head attention vs nn.MultiheadAttention ---------------------------------------------------

def copy_into_torch(mha: A.MultiHeadAttention) -> torch.nn.MultiheadAttention:
    bias = mha.q_proj.bias is not None
    ref = torch.nn.MultiheadAttention(mha.d_model, mha.n_heads, bias=bias, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
        ref.out_proj.weight.copy_(mha.o_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
            ref.out_proj.bias.copy_(mha.o_proj.bias)
    return ref.eval()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n_heads", [1, 4])
def test_mha_matches_nn_multihead_attention(bias, n_heads):
    torch.manual_seed(0)
    mha = A.MultiHeadAttention(16, n_heads, bias=bias).eval()
    ref = copy_into_torch(mha)
    x = torch.randn(3, 6, 16)
    with torch.no_grad():
        expected, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=False)
        out, w = mha(x, return_weights=True)
        torch.testing.assert_close(out, expected, **TOL)
        torch.testing.assert_close(w, ref_w, **TOL)
        keep = A.causal_mask(6, 6)  # torch's boolean attn_mask means True = *blocked*: pass ~keep
        expected = ref(x, x, x, attn_mask=~keep, need_weights=False)[0]
        torch.testing.assert_close(mha(x, is_causal=True), expected, **TOL)
        z = torch.randn(3, 9, 16)  # cross-attention: keys and values from another sequence
        torch.testing.assert_close(mha(x, kv=z), ref(x, z, z, need_weights=False)[0], **TOL)
        pad = torch.zeros(3, 9, dtype=torch.bool)
        pad[0, 7:] = True  # key_padding_mask: True = padding
        torch.testing.assert_close(mha(x, kv=z, mask=~pad[:, None, None, :]),
                                   ref(x, z, z, key_padding_mask=pad, need_weights=False)[0], **TOL)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_module_matches_manual_torch_sdpa(n_kv_heads):
    torch.manual_seed(1)
    mha = A.MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads).eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        q = mha.q_proj(x).view(2, 5, 4, 8).transpose(1, 2)
        k = mha.k_proj(x).view(2, 5, n_kv_heads, 8).transpose(1, 2)
        v = mha.v_proj(x).view(2, 5, n_kv_heads, 8).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        expected = mha.o_proj(o.transpose(1, 2).reshape(2, 5, 32))
        torch.testing.assert_close(mha(x, is_causal=True), expected, **TOL)
    n_params = sum(p.numel() for p in mha.parameters())
    assert n_params == 2 * 32 * 32 + 2 * 32 * (n_kv_heads * 8)


def test_mha_parameter_count_does_not_depend_on_heads():
    counts = {h: sum(p.numel() for p in A.MultiHeadAttention(512, h).parameters()) for h in (1, 8)}
    assert counts == {1: 1_048_576, 8: 1_048_576}


def test_split_and_merge_heads_are_inverse():
    x = torch.randn(2, 5, 12)
    h = A.split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4) and torch.equal(h[:, 1], x[..., 4:8])
    assert torch.equal(A.merge_heads(h), x)


@pytest.mark.parametrize("args,match", [((10, 3), "must divide d_model=10"), ((12, 0), "n_heads"),
                                        ((12, 4, 3), "n_kv_heads=3 must divide"), ((12, 4, 0), "n_kv_heads")])
def test_mha_bad_configs(args, match):
    with pytest.raises(ValueError, match=match):
        A.MultiHeadAttention(*args)


def test_mha_bad_input_shape():
    with pytest.raises(ValueError, match=r"d_model=8.*\(2, 3, 5\)"):
        A.MultiHeadAttention(8, 2)(torch.zeros(2, 3, 5))


# ---- linear and flash attention --------------------------------------------------------------------

def brute_linear(q, k, v, phi, causal):
    fq, fk = phi(q), phi(k)
    sim = fq @ fk.transpose(-2, -1)  # (..., Tq, Tk): phi(q_i) . phi(k_j), the quadratic form
    if causal:
        sim = sim * torch.ones_like(sim).tril()
    return (sim @ v) / (sim.sum(-1, keepdim=True) + 1e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("fmap", ["elu", "relu"])
def test_linear_attention_equals_quadratic_form(causal, fmap):
    q, k, v = qkv(16, Tq=150, Tk=150, dtype=torch.float64)  # > 2 chunks of 64
    phi = {"elu": lambda x: F.elu(x) + 1, "relu": F.relu}[fmap]
    expected = brute_linear(q, k, v, phi, causal)
    ours = EA.linear_attention(q, k, v, fmap, is_causal=causal)
    torch.testing.assert_close(ours, expected, atol=1e-10, rtol=1e-10)


def test_linear_attention_is_not_softmax_attention():
    q, k, v = qkv(17, Tq=20, Tk=20)
    diff = (EA.linear_attention(q, k, v) - A.scaled_dot_product_attention(q, k, v)).abs().max()
    assert diff > 0.05


def test_causal_linear_attention_chunk_size_does_not_matter():
    q, k, v = qkv(20, Tq=100, Tk=100, dtype=torch.float64)
    ref = EA.linear_attention(q, k, v, is_causal=True, chunk=100)  # one chunk: the plain masked quadratic sum
    for chunk in (1, 7, 64):
        torch.testing.assert_close(EA.linear_attention(q, k, v, is_causal=True, chunk=chunk), ref)


def test_linear_attention_bad_feature_map():
    q, k, v = qkv(0)
    with pytest.raises(ValueError, match="feature_map"):
        EA.linear_attention(q, k, v, feature_map="softmax")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("Tq,Tk,block", [(100, 100, 64), (37, 37, 8), (5, 70, 16), (70, 5, 16), (64, 64, 64),
                                         (1, 1, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_equals_dense(seed, Tq, Tk, block, causal):
    q, k, v = qkv(seed, Tq=Tq, Tk=Tk, dv=6)
    flash = EA.flash_attention(q, k, v, block_size=block, is_causal=causal)
    dense = A.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(flash, dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("Tq,Tk,block,window", [(100, 100, 16, 1), (100, 100, 16, 7), (100, 100, 16, 40),
                                                (37, 50, 8, 13), (50, 37, 8, 20), (64, 64, 64, 200)])
def test_flash_sliding_window_equals_masked_dense(Tq, Tk, block, window):
    q, k, v = qkv(19, Tq=Tq, Tk=Tk)
    dense = A.scaled_dot_product_attention(q, k, v, mask=EA.sliding_window_mask(Tq, Tk, window))
    torch.testing.assert_close(EA.flash_attention(q, k, v, block, window=window), dense, **TOL)


def test_flash_attention_gqa_and_torch():
    q, k, v = qkv(18, H=6, Hkv=2, Tq=50, Tk=50)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(EA.flash_attention(q, k, v, block_size=16, is_causal=True), expected, **TOL)


def test_flash_attention_bad_block_size():
    with pytest.raises(ValueError, match="block_size"):
        EA.flash_attention(*qkv(0), block_size=0)


def test_flash_peak_memory_is_linear_and_dense_quadratic():
    peaks = {}
    for T in (128, 256, 512):
        q = torch.randn(1, 2, T, 16)
        _, dense = EA.peak_memory(A.scaled_dot_product_attention, q, q, q, return_weights=True)
        _, flash = EA.peak_memory(EA.flash_attention, q, q, q, block_size=32)
        peaks[T] = dense, flash
    assert peaks[512][0] / peaks[256][0] > 3.5  # quadratic: x4 per doubling
    assert peaks[512][1] / peaks[256][1] < 2.2  # linear: x2 per doubling
    assert peaks[128][0] >= 2 * 128 * 128 * 2 * 4  # at least two (H, T, T) float32 tensors live at once


def test_peak_memory_counts_a_known_allocation():
    x = torch.zeros(10)
    _, peak = EA.peak_memory(lambda t: (t + 1) * 2, x)  # t + 1 (40 B) is alive while * 2 makes another 40 B
    assert peak == 80


# ---- padding masks: a batch of sequences of different lengths ------------------------------------

def test_padding_mask_by_hand():
    mask = A.padding_mask(torch.tensor([3, 1, 0]), 4)
    assert mask.shape == (3, 1, 1, 4)
    assert mask[:, 0, 0].int().tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]


@pytest.mark.parametrize("causal", [False, True])
def test_padded_batch_equals_each_sequence_alone(causal):
    """Right-padded batch with the padding mask: the real tokens' outputs equal running each sequence alone,
    whatever the padding holds, and the padded keys get weight exactly 0."""
    torch.manual_seed(0)
    mha = A.MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    lengths = torch.tensor([5, 2, 7])
    seqs = [torch.randn(1, int(n), 16, dtype=torch.float64) for n in lengths]
    batch = torch.randn(3, 7, 16, dtype=torch.float64) * 100  # garbage in the padding
    for b, s in enumerate(seqs):
        batch[b, :s.shape[1]] = s[0]
    mha = mha.double()
    with torch.no_grad():
        out, w = mha(batch, mask=A.padding_mask(lengths, 7), is_causal=causal, return_weights=True)
        for b, s in enumerate(seqs):
            torch.testing.assert_close(out[b, :s.shape[1]], mha(s, is_causal=causal)[0], atol=1e-12, rtol=0)
            assert (w[b, :, :, s.shape[1]:] == 0).all()


def test_padding_mask_matches_nn_multihead_attention_key_padding_mask():
    torch.manual_seed(1)
    ours = A.MultiHeadAttention(8, 2, bias=True).eval()
    theirs = torch.nn.MultiheadAttention(8, 2, bias=True, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.o_proj.weight)
        theirs.out_proj.bias.copy_(ours.o_proj.bias)
        x, lengths = torch.randn(3, 6, 8), torch.tensor([6, 4, 1])
        mask = A.padding_mask(lengths, 6)
        expected, _ = theirs(x, x, x, key_padding_mask=~mask[:, 0, 0])  # torch: True = blocked
        torch.testing.assert_close(ours(x, mask=mask), expected, **TOL)


@pytest.mark.parametrize("lengths, k_len, error", [(torch.tensor([2, 5]), 4, ValueError),
                                                   (torch.tensor([-1]), 3, ValueError),
                                                   (torch.tensor([1.0]), 3, TypeError), ([2, 3], 4, TypeError)])
def test_padding_mask_bad_lengths(lengths, k_len, error):
    with pytest.raises(error, match="lengths"):
        A.padding_mask(lengths, k_len)


# ---- additive (Bahdanau) attention -------------------------------------------------------------------

def _additive_naive(q, k, W_q, W_k, v_a):
    """e_ij = v_a . tanh(W_q^T q_i + W_k^T k_j), one pair at a time, with plain Python sums."""
    scores = torch.zeros(q.shape[0], k.shape[0], dtype=q.dtype)
    for i in range(q.shape[0]):
        for j in range(k.shape[0]):
            hidden = [math.tanh(sum(q[i, m] * W_q[m, a] for m in range(q.shape[1]))
                                + sum(k[j, m] * W_k[m, a] for m in range(k.shape[1]))) for a in range(len(v_a))]
            scores[i, j] = sum(v * h for v, h in zip(v_a.tolist(), hidden, strict=True))
    return scores


@pytest.mark.parametrize("seed", [0, 1])
def test_additive_scores_match_a_naive_loop(seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(5, 6, generator=g, dtype=torch.float64)
    W_q, W_k = torch.randn(4, 7, generator=g, dtype=torch.float64), torch.randn(6, 7, generator=g, dtype=torch.float64)
    v_a = torch.randn(7, generator=g, dtype=torch.float64)
    torch.testing.assert_close(AA.additive_scores(q, k, W_q, W_k, v_a), _additive_naive(q, k, W_q, W_k, v_a),
                               atol=1e-12, rtol=0)
    batched = AA.additive_scores(torch.stack([q, 2 * q]), k, W_q, W_k, v_a)  # leading axes broadcast
    torch.testing.assert_close(batched[1], _additive_naive(2 * q, k, W_q, W_k, v_a), atol=1e-12, rtol=0)
    assert AA.additive_scores(q * 1e6, k, W_q, W_k, v_a).abs().max() <= v_a.abs().sum()  # bounded by ||v_a||_1


def test_additive_attention_weights_and_mask():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g)
    values = torch.randn(2, 5, 3, generator=g)
    W_q, W_k, v_a = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g), torch.randn(6, generator=g)
    mask = A.padding_mask(torch.tensor([5, 2]), 5)[:, 0]  # (B, 1, T_k)
    context, weights = AA.additive_attention(q, k, values, W_q, W_k, v_a, mask=mask)
    expected = torch.softmax(AA.additive_scores(q, k, W_q, W_k, v_a).masked_fill(~mask, float("-inf")), -1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(context, expected @ values)
    assert (weights[1, :, 2:] == 0).all()


def test_additive_bad_shapes():
    q, k = torch.randn(3, 4), torch.randn(5, 6)
    with pytest.raises(ValueError, match="W_k"):
        AA.additive_scores(q, k, torch.randn(4, 7), torch.randn(4, 7), torch.randn(7))
    with pytest.raises(ValueError, match="values"):
        AA.additive_attention(q, k, torch.randn(4, 2), torch.randn(4, 7), torch.randn(6, 7), torch.randn(7))


# ---- chapter 7's alignment figure -------------------------------------------------------------------

def test_draw_alignment_shows_every_weight_in_its_cell():
    import matplotlib

    matplotlib.use("Agg")
    from lmbook.plotting import ch07 as figs

    w = A.softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), dim=-1).numpy()
    fig = figs.draw_alignment(w, ["a", "b", "c", "d"], ["x", "y", "z"])
    ax = fig.axes[0]
    assert np.array_equal(ax.images[0].get_array(), w)
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    assert cells == {(i, j): f"{w[i, j]:.2f}" for i in range(3) for j in range(4)}  # row = target, column = source
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "d"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("weights, error", [(np.ones((4, 3)) / 3, "shape"), (-np.ones((3, 4)), "non-negative"),
                                            (np.full((3, 4), np.nan), "finite")])
def test_draw_alignment_bad_weights(weights, error):
    from lmbook.plotting import ch07 as figs

    with pytest.raises(ValueError, match=error):
        figs.draw_alignment(weights, ["a", "b", "c", "d"], ["x", "y", "z"])
