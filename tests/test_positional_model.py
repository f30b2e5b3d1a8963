"""The positional schemes inside lmbook.model (sinusoidal, ALiBi) and chapter 12's experiment helpers."""

import math

import pytest
import torch
from lmbook import model as M
from lmbook import rope_scaling as RS
from lmbook import training as TR
from lmbook.experiments import positional_runs as PX
from lmbook.experiments import positional_smollm2 as PS
from lmbook.positional import rope_inv_freq, sinusoidal_encoding
from lmbook.rope_scaling import yarn_attention_factor
from test_model import ListCache


def tiny(positional, **kw):
    torch.manual_seed(0)
    config = M.TransformerConfig(vocab_size=40, d_model=32, n_layers=2, n_heads=4, positional=positional, **kw)
    return M.Transformer(config).double().eval()


@pytest.mark.parametrize("positional", ["sinusoidal", "alibi"])
def test_cache_hook_gives_the_full_forward_logits(positional):
    model = tiny(positional, n_kv_heads=2)
    ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(1))
    cache = ListCache()
    with torch.no_grad():
        full = model(ids)
        pieces = [model(chunk, cache=cache) for chunk in (ids[:, :5], ids[:, 5:6], ids[:, 6:11], ids[:, 11:])]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-12, rtol=0)


def test_sinusoidal_model_adds_the_table_to_the_scaled_embeddings():
    model = tiny("sinusoidal")
    ids = torch.randint(0, 40, (1, 7), generator=torch.Generator().manual_seed(2))
    seen = {}

    def record(module, args):
        seen["x"] = args[0]  # the input of the first block: x_0

    model.blocks[0].register_forward_pre_hook(record)
    with torch.no_grad():
        model(ids, positions=torch.arange(300, 307))  # any position: the table has no maximum
    expected = model.tok_emb.weight[ids[0]] * math.sqrt(32) + sinusoidal_encoding(307, 32).double()[300:]
    torch.testing.assert_close(seen["x"][0], expected)


def test_alibi_attention_matches_bloom_bias():
    """The ALiBi layer's output equals causal attention with bloom's (per-key) ALiBi tensor added to the scores."""
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    model = tiny("alibi")
    attn, T, H, dh = model.blocks[0].attn, 6, 4, 8
    x = torch.randn(1, T, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = attn(x)  # ALiBi attention takes no RoPE angles
        q, k, v = (p(x).view(1, T, H, dh).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        bias = bloom.build_alibi_tensor(torch.ones(1, T), H, torch.float64).view(1, H, 1, T)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh) + bias
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
        expected = attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(1, T, 32))
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


def test_alibi_and_rope_depend_only_on_relative_positions_but_sinusoids_do_not():
    ids = torch.randint(0, 40, (1, 9), generator=torch.Generator().manual_seed(4))
    for positional, shift_invariant in (("alibi", True), ("rope", True), ("sinusoidal", False)):
        model = tiny(positional)
        with torch.no_grad():
            a, b = model(ids), model(ids, positions=torch.arange(50, 59))
        assert torch.allclose(a, b, atol=1e-9) == shift_invariant, positional


@pytest.mark.parametrize("method", ["PI", "NTK", "NTK-by-parts", "YaRN"])
def test_rescale_rope_changes_frequencies_and_yarn_scales_the_logits(method):
    model = tiny("rope")
    stretched = RS.rescale_rope(model, method, 4.0, 64)
    expected = rope_inv_freq(8, 10000.0, RS.scaling_for(method, 4.0, 64))
    torch.testing.assert_close(stretched.inv_freq, expected, atol=0, rtol=0)
    factor = yarn_attention_factor(4.0) if method == "YaRN" else 1.0
    w, w0 = stretched.blocks[1].attn.q_proj.weight, model.blocks[1].attn.q_proj.weight
    torch.testing.assert_close(w, w0 * factor)
    assert model.inv_freq.equal(rope_inv_freq(8))  # the original is untouched
    assert RS.rescale_rope(model, "PI", 1.0, 64).inv_freq.equal(model.inv_freq)  # s = 1 changes nothing


def test_experiment_helpers_refuse_bad_input():
    with pytest.raises(ValueError, match="method must be"):
        RS.scaling_for("ABF", 2.0, 128)
    with pytest.raises(ValueError, match="needs a RoPE model"):
        RS.rescale_rope(tiny("alibi"), "PI", 2.0, 128)


def test_matched_scale_control_scales_only_the_table_and_restores_it():
    model = tiny("sinusoidal")
    ids = torch.randint(0, 40, (1, 7), generator=torch.Generator().manual_seed(2))
    seen = {}
    model.blocks[0].register_forward_pre_hook(lambda module, args: seen.update(x=args[0]))
    with torch.no_grad(), PX._sinusoids_scaled(0.25):
        model(ids)
    expected = model.tok_emb.weight[ids[0]] * math.sqrt(32) + 0.25 * sinusoidal_encoding(7, 32).double()
    torch.testing.assert_close(seen["x"][0], expected)
    assert M.sinusoidal_encoding is sinusoidal_encoding  # the model's own table is back after the block
    d = 64  # the experiment's scale: a table row sqrt(d / 2) long, like a token vector sqrt(d) * 0.02 * sqrt(d)
    assert math.sqrt(d / 2) * 0.02 * math.sqrt(2 * d) == pytest.approx(math.sqrt(d) * 0.02 * math.sqrt(d))


def test_position_losses_average_to_the_evaluation_loss():
    model = tiny("alibi")
    ids = torch.randint(0, 40, (4 * 16 + 1,), generator=torch.Generator().manual_seed(5))
    per_position = PX.position_losses(model, ids, 16, batch_size=3)
    assert per_position.shape == (16,)
    assert per_position.mean().item() == pytest.approx(TR.evaluate(model, ids, 16), rel=1e-6)


def test_gap_positions():
    pos = PS.gap_positions(1000, 4)
    assert pos.tolist() == [0, 1, 2, 3, 997, 998, 999, 1000]


def test_live_extrapolation_refuses_bad_input():
    with pytest.raises(ValueError, match="schemes must be one of"):
        PX.live_extrapolation(("rotary",))
    with pytest.raises(TypeError, match="schemes must be a list"):
        PX.live_extrapolation("rope")
    with pytest.raises(ValueError, match="stretch must be one of"):
        PX.live_extrapolation(("rope",), stretch="ABF")
    with pytest.raises(ValueError, match="train_length must be an int >= 2"):
        PX.live_extrapolation(("rope",), train_length=1)
    with pytest.raises(ValueError, match="lr must be"):
        PX.live_extrapolation(("rope",), lr=0.0)
    with pytest.raises(ValueError, match="val_tokens must be an int >= 64"):
        PX.live_extrapolation(("rope",), eval_lengths=(8, 64), val_tokens=32)


def test_live_extrapolation_is_repeatable_and_stretches_only_beyond_the_training_length():
    kw = dict(train_length=8, eval_lengths=(8, 16), steps=3, val_tokens=64, d_model=16)
    first = PX.live_extrapolation(("rope", "learned"), stretch="PI", **kw)
    assert set(first) == {"rope", "rope+PI", "learned"}
    assert list(first["learned"]) == [8]  # a learned table has no rows past the training length
    assert first["rope+PI"][8] == first["rope"][8] and first["rope+PI"][16] != first["rope"][16]
    assert all(1 < p < 1e5 for table in first.values() for p in table.values())
    assert PX.live_extrapolation(("rope", "learned"), stretch="PI", **kw) == first
