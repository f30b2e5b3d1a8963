"""lmbook.kv_cache: cached decoding against the full forward pass and against transformers' DynamicCache on
a random Llama with the same weights, generate(use_cache=True) against transformers' generate, the size
formula against the bytes of real tensors (ours and transformers'), the FLOP counter against torch's
FlopCounterMode, the rolling cache against attention with a sinks + window mask, int8 quantization,
and bad input."""

import math

import pytest
import torch
from lmbook import decoding as D
from lmbook import inference_cost as IC
from lmbook import kv_cache as KV
from lmbook import model as M
from lmbook import pretrained as PT
from test_model import _randomize, llama_pair
from torch.utils.flop_counter import FlopCounterMode

transformers = pytest.importorskip("transformers")


def small_model(positional="rope", n_kv_heads=2, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    config = M.TransformerConfig(vocab_size=40, d_model=32, n_layers=2, n_heads=4, n_kv_heads=n_kv_heads,
                                 positional=positional)
    model = M.Transformer(config).to(dtype).eval()
    _randomize(model, std=0.3, seed=seed)  # large weights: every mistake shows in the logits
    return model


# ----- correctness: cached == full recompute -----------------------------------------------------------------

@pytest.mark.parametrize("positional,n_kv_heads", [("rope", 2), ("rope", 1), ("rope", 4), ("learned", 2),
                                                   ("alibi", 2), ("sinusoidal", 1), ("none", 4)])
def test_incremental_logits_equal_the_full_forward(positional, n_kv_heads):
    model = small_model(positional, n_kv_heads)
    ids = torch.randint(0, 40, (3, 17), generator=torch.Generator().manual_seed(1))
    cache = KV.KVCache.for_model(model, max_len=17, batch=3)
    with torch.no_grad():
        full = model(ids)
        pieces = [model(ids[:, :6], cache=cache)]  # prefill, then one token at a time, then a chunk of 3
        for t in range(6, 14):
            pieces.append(model(ids[:, t:t + 1], cache=cache))
        pieces.append(model(ids[:, 14:], cache=cache))
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-12, rtol=0)
    assert cache.seq_len == 17 and cache.lengths == [17, 17]
    assert cache.keys.shape == (2, 3, n_kv_heads, 17, 8)  # the K/V heads, not the query heads


def test_positions_must_continue_after_the_prefix():
    model = small_model()
    ids = torch.randint(0, 40, (1, 9), generator=torch.Generator().manual_seed(2))
    cache = KV.KVCache.for_model(model, max_len=9)
    with torch.no_grad():
        full = model(ids)
        model(ids[:, :8], cache=cache)
        right = model(ids[:, 8:], cache=cache)
        cache.lengths = [8, 8]  # forget the last token, and feed it again claiming position 0
        wrong = model(ids[:, 8:], positions=torch.tensor([0]), cache=cache)
    torch.testing.assert_close(right[:, 0], full[:, 8], atol=1e-12, rtol=0)
    assert (wrong[:, 0] - full[:, 8]).abs().max() > 1e-3


def test_reset_reuses_the_buffers():
    model = small_model()
    ids = torch.randint(0, 40, (1, 8), generator=torch.Generator().manual_seed(3))
    cache = KV.KVCache.for_model(model, max_len=8)
    buffer = cache.keys.data_ptr()
    with torch.no_grad():
        first = model(ids, cache=cache)
        cache.reset()
        assert cache.seq_len == 0
        again = model(ids, cache=cache)
    assert cache.keys.data_ptr() == buffer
    torch.testing.assert_close(again, first, atol=0, rtol=0)


def test_get_returns_what_was_appended():
    cache = KV.KVCache(n_layers=2, n_kv_heads=3, head_dim=4, max_len=10, batch=2)
    k1, v1, k2, v2 = torch.randn(4, 2, 3, 5, 4).unbind(0)
    cache.append(1, k1[:, :, :2], v1[:, :, :2])
    cache.append(1, k1[:, :, 2:], v1[:, :, 2:])
    cache.append(0, k2, v2)
    keys, values = cache.get(1)
    assert torch.equal(keys, k1) and torch.equal(values, v1)
    assert torch.equal(cache.get(0)[0], k2) and cache.get(0)[1].shape == (2, 3, 5, 4)


# ----- oracles: transformers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_step_by_step_logits_and_cache_match_transformers_dynamic_cache(kv_heads):
    hf, ours = llama_pair(kv_heads=kv_heads, layers=3)
    ids = torch.randint(0, 50, (2, 14), generator=torch.Generator().manual_seed(4))
    hf_cache = transformers.DynamicCache(config=hf.config)
    cache = KV.KVCache.for_model(ours, max_len=14, batch=2)
    with torch.no_grad():
        # transformers computes RMSNorm in float32 and RoPE angles in float32 even for a float64 model, so
        # it agrees with lmbook to ~3e-7 (hence 1e-6); lmbook's cached and full passes agree to 1e-12 (above)
        out = hf(input_ids=ids[:, :5], past_key_values=hf_cache, use_cache=True)
        torch.testing.assert_close(ours(ids[:, :5], cache=cache), out.logits, atol=1e-6, rtol=0)
        for t in range(5, 14):
            out = hf(input_ids=ids[:, t:t + 1], past_key_values=out.past_key_values, use_cache=True)
            torch.testing.assert_close(ours(ids[:, t:t + 1], cache=cache), out.logits, atol=1e-6, rtol=0)
    assert out.logits.abs().max() > 0.1
    for layer in range(3):  # both cache the keys after RoPE, with n_kv_heads heads
        keys, values = cache.get(layer)
        assert keys.shape == hf_cache.layers[layer].keys.shape == (2, kv_heads, 14, 8)
        torch.testing.assert_close(keys, hf_cache.layers[layer].keys, atol=1e-6, rtol=0)
        torch.testing.assert_close(values, hf_cache.layers[layer].values, atol=1e-6, rtol=0)
    assert cache.seq_len == hf_cache.get_seq_length() == 14


def test_generate_with_cache_gives_transformers_greedy_tokens():
    hf, ours = llama_pair(kv_heads=2)
    prompt = torch.tensor([[3, 14, 15, 9, 2, 6]])
    ours_cached = D.generate(ours, prompt, 12, use_cache=True)
    ours_plain = D.generate(ours, prompt, 12)
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12, do_sample=False,
                         use_cache=True, eos_token_id=None, pad_token_id=0)
    assert torch.equal(ours_cached, theirs) and torch.equal(ours_plain, theirs)


def test_generate_with_cache_batches_and_stops_at_eos():
    model = small_model(dtype=torch.float32)
    prompt = torch.randint(0, 40, (3, 5), generator=torch.Generator().manual_seed(5))
    plain = D.generate(model, prompt, 10, eos_id=7)
    cached = D.generate(model, prompt, 10, eos_id=7, use_cache=True)
    assert torch.equal(plain, cached)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    sampled = D.generate(model, prompt, 10, do_sample=True, top_k=5, generator=g1)
    assert torch.equal(sampled, D.generate(model, prompt, 10, do_sample=True, top_k=5, generator=g2,
                                           use_cache=True))


# ----- memory ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,nbytes", [(torch.float32, 4), (torch.float16, 2), (torch.bfloat16, 2),
                                          (torch.float64, 8)])
def test_size_formula_equals_the_bytes_of_the_tensors(dtype, nbytes):
    config = M.TransformerConfig(vocab_size=40, d_model=48, n_layers=3, n_heads=6, n_kv_heads=2)
    cache = KV.KVCache(config.n_layers, config.n_kv_heads, config.head_dim, max_len=37, batch=5, dtype=dtype)
    measured = cache.keys.element_size() * cache.keys.numel() + cache.values.element_size() * cache.values.numel()
    assert measured == cache.nbytes == KV.kv_cache_bytes(config, 37, batch=5, dtype_bytes=nbytes)
    assert KV.kv_cache_bytes(config, 37, 5, nbytes) == 2 * 3 * 2 * 8 * 37 * 5 * nbytes


def test_size_formula_equals_transformers_dynamic_cache_bytes():
    hf, ours = llama_pair(kv_heads=2, layers=3)  # float64
    cache = transformers.DynamicCache(config=hf.config)
    with torch.no_grad():
        hf(input_ids=torch.randint(0, 50, (2, 11)), past_key_values=cache, use_cache=True)
    measured = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert measured == KV.kv_cache_bytes(ours.config, 11, batch=2, dtype_bytes=8)


def test_size_formula_accepts_published_numbers():
    llama2_7b = {"n_layers": 32, "n_kv_heads": 32, "head_dim": 128}
    assert KV.kv_cache_bytes(llama2_7b, 4096) == 2 * 2**30  # 2 GiB in fp16, the classic figure
    gqa = {"n_layers": 32, "n_kv_heads": 8, "d_model": 4096, "n_heads": 32}  # head_dim from d_model / n_heads
    assert KV.kv_cache_bytes(gqa, 4096) == 2**29
    with pytest.raises(ValueError, match="n_kv_heads"):
        KV.kv_cache_bytes({"n_layers": 2, "head_dim": 4}, 10)
    with pytest.raises(ValueError, match="seq_len"):
        KV.kv_cache_bytes(llama2_7b, -1)
    with pytest.raises(ValueError, match="dtype_bytes"):
        KV.kv_cache_bytes(llama2_7b, 1, dtype_bytes=0)


# ----- compute: the FLOP counter against torch's -------------------------------------------------------------

def _counted_flops(model, ids, cache=None):
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids, cache=cache)
    return counter.get_total_flops()


@pytest.mark.parametrize("ffn", ["swiglu", "gelu"])
def test_flop_counter_matches_torch_flop_counter(ffn):
    torch.manual_seed(0)
    config = M.TransformerConfig(vocab_size=60, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn=ffn)
    model = M.Transformer(config).eval()
    ids = torch.randint(0, 60, (1, 20))
    cache = KV.KVCache.for_model(model, max_len=21)
    model(ids[:, :19], cache=cache)
    # a decode step: one query, every key is a past key, nothing is masked: exactly our count
    assert _counted_flops(model, ids[:, 19:], cache) == IC.forward_flops(config, 1, 19)
    # a full pass: the dense path computes all T x T scores and masks half of them afterwards, so torch
    # counts the masked ones too; our count keeps only the T (T + 1) / 2 causal ones
    T, masked = 20, 20 * 19 // 2
    extra = 4 * config.n_layers * config.n_heads * config.head_dim * masked
    assert _counted_flops(model, ids) == IC.forward_flops(config, T) + extra
    # the same pass scoring only the last position (what decoding without a cache needs)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids, last_only=True)
    head = 2 * config.d_model * config.vocab_size * (T - 1)  # the output layer on the T - 1 skipped positions
    assert counter.get_total_flops() == IC.forward_flops(config, T, last_only=True) + extra
    assert IC.forward_flops(config, T) - IC.forward_flops(config, T, last_only=True) == head
    assert IC.forward_flops(config, 1, 19, last_only=True) == IC.forward_flops(config, 1, 19)
    assert IC.forward_flops(config, 0, 5, last_only=True) == 0


def test_flop_counter_regimes():
    config = M.TransformerConfig(vocab_size=100, d_model=64, n_layers=2, n_heads=4)
    one = IC.forward_flops(config, 1)
    assert IC.forward_flops(config, 10) == sum(IC.forward_flops(config, 1, t) for t in range(10))
    assert IC.forward_flops(config, 0) == 0 and one > 0
    with pytest.raises(ValueError, match="n_new"):
        IC.forward_flops(config, -1)


# ----- sliding window and attention sinks -------------------------------------------------------------------

def _masked_reference(model, ids, window, n_sinks, monkeypatch):
    """The full forward pass with a mask: position i sees j <= i if i - j < window or j < n_sinks."""
    from lmbook import attention as A

    def masked(q, k, v, mask=None, is_causal=True):
        assert mask is None  # no ALiBi bias in this model
        T = q.shape[-2]
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        return A.scaled_dot_product_attention(q, k, v, mask=(j <= i) & ((i - j < window) | (j < n_sinks)))

    monkeypatch.setattr(M, "fast_attention", masked)
    with torch.no_grad():
        logits = model(ids[None])[0]
    monkeypatch.undo()
    logp = logits.log_softmax(-1)
    return -logp[:-1].gather(-1, ids[1:, None]).squeeze(-1)


@pytest.mark.parametrize("window,n_sinks", [(5, 0), (4, 2), (3, 1), (30, 0)])
def test_rolling_cache_equals_a_sinks_plus_window_mask(window, n_sinks, monkeypatch):
    model = small_model()
    ids = torch.randint(0, 40, (25,), generator=torch.Generator().manual_seed(6))
    cache = KV.RollingKVCache.for_model(model, window=window, n_sinks=n_sinks)
    got = KV.cached_nll(model, ids, cache)
    torch.testing.assert_close(got, _masked_reference(model, ids, window, n_sinks, monkeypatch), atol=1e-10, rtol=0)
    assert cache.nbytes == KV.kv_cache_bytes(model.config, window + n_sinks, dtype_bytes=8)  # fixed size
    assert cache.seq_len == 24 and cache.get(0)[0].shape[-2] == min(24, window + n_sinks)


def test_rolling_slots_and_policy():
    cache = KV.RollingKVCache(1, 1, 2, window=3, n_sinks=2)
    assert [cache.slot(p) for p in range(10)] == [0, 1, 2, 3, 4, 2, 3, 4, 2, 3]
    plain = KV.RollingKVCache(1, 1, 2, window=3)
    assert [plain.slot(p) for p in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    cache.append(0, torch.ones(1, 1, 4, 2), torch.ones(1, 1, 4, 2))  # several at once while it fills
    with pytest.raises(ValueError, match="one token at a time"):
        cache.append(0, torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2))
    for _ in range(5):
        cache.append(0, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    keys, _ = cache.get(0)
    assert keys[0, 0, :, 0].tolist() == [1, 1, 0, 0, 0] and cache.seq_len == 9  # the sinks survive


def test_full_cache_nll_equals_the_full_forward():
    model = small_model()
    ids = torch.randint(0, 40, (20,), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        logp = model(ids[None])[0].log_softmax(-1)
    expected = -logp[:-1].gather(-1, ids[1:, None]).squeeze(-1)
    torch.testing.assert_close(KV.cached_nll(model, ids, KV.KVCache.for_model(model, 20), prefill=3), expected,
                               atol=1e-12, rtol=0)


# ----- int8 ------------------------------------------------------------------------------------------------

def test_quantize_int8_error_bound_and_edge_cases():
    x = torch.randn(4, 3, 7, 16, dtype=torch.float64) * torch.logspace(-3, 2, 7, dtype=torch.float64)[:, None]
    q, scale = KV.quantize_int8(x)
    assert q.dtype == torch.int8 and scale.shape == (4, 3, 7, 1)
    assert q.abs().amax(-1).eq(127).all()  # the largest entry of each vector uses the full range
    err = (q.double() * scale.double() - x).abs()
    assert (err <= scale.double() / 2 + 1e-12).all()
    q0, s0 = KV.quantize_int8(torch.zeros(2, 5))
    assert q0.eq(0).all() and s0.eq(1).all()
    with pytest.raises(TypeError, match="floating-point"):
        KV.quantize_int8(torch.ones(3, dtype=torch.int64))


def test_int8_cache_equals_attention_on_rounded_keys_and_values(monkeypatch):
    model = small_model()  # float64; quantize_int8 rounds in float32 like the cache
    ids = torch.randint(0, 40, (1, 24), generator=torch.Generator().manual_seed(8))
    cache = KV.Int8KVCache.for_model(model, max_len=24)
    c = model.config
    assert cache.nbytes == 2 * c.n_layers * c.n_kv_heads * 24 * (c.head_dim * 1 + 4)  # int8 + a float32 scale
    with torch.no_grad():
        exact = model(ids)
        model(ids[:, :12], cache=cache)
        steps = torch.cat([model(ids[:, t:t + 1], cache=cache) for t in range(12, 24)], dim=1)

    def rounded(q, k, v, mask=None, is_causal=True):  # the oracle: the full pass on int8-rounded keys and values
        (qk, sk), (qv, sv) = KV.quantize_int8(k), KV.quantize_int8(v)
        k, v = qk.to(k.dtype) * sk.to(k.dtype), qv.to(v.dtype) * sv.to(v.dtype)
        return original(q, k, v, mask=mask, is_causal=is_causal)

    original = M.fast_attention
    monkeypatch.setattr(M, "fast_attention", rounded)
    with torch.no_grad():
        expected = model(ids)
    torch.testing.assert_close(steps, expected[:, 12:], atol=1e-10, rtol=0)
    assert (steps - exact[:, 12:]).abs().max() > 1e-6  # rounding is not free


# ----- bad input -----------------------------------------------------------------------------------------------

def test_appending_past_max_len_is_an_error():
    cache = KV.KVCache(n_layers=1, n_kv_heads=2, head_dim=4, max_len=5)
    cache.append(0, torch.zeros(1, 2, 4, 4), torch.zeros(1, 2, 4, 4))
    with pytest.raises(ValueError, match="full.*max_len=5"):
        cache.append(0, torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
    assert cache.lengths == [4]  # nothing was written
    model = small_model()
    with pytest.raises(ValueError, match="full"), torch.no_grad():
        model(torch.zeros(1, 6, dtype=torch.long), cache=KV.KVCache.for_model(model, 5))


@pytest.mark.parametrize("k_shape,match", [
    ((1, 4, 3, 4), r"n_kv_heads=2"),  # the query heads instead of the K/V heads
    ((2, 2, 3, 4), r"batch=1"),
    ((1, 2, 3, 8), r"head_dim=4"),
    ((2, 3, 4), r"shape"),
    ((1, 2, 0, 4), r"T >= 1"),
])
def test_shape_mismatch_is_a_value_error(k_shape, match):
    cache = KV.KVCache(n_layers=2, n_kv_heads=2, head_dim=4, max_len=8)
    with pytest.raises(ValueError, match=match):
        cache.append(0, torch.zeros(k_shape), torch.zeros(k_shape))


def test_other_bad_input():
    cache = KV.KVCache(n_layers=2, n_kv_heads=2, head_dim=4, max_len=8)
    k = torch.zeros(1, 2, 3, 4)
    with pytest.raises(ValueError, match="same shape"):
        cache.append(0, k, torch.zeros(1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"layer must be an int in \[0, 1\]"):
        cache.append(2, k, k)
    with pytest.raises(ValueError, match="layer"):
        cache.get(-1)
    with pytest.raises(TypeError, match="floating-point"):
        cache.append(0, k.long(), k)
    for kwargs, match in [({"max_len": 0}, "max_len"), ({"max_len": 4, "batch": 0}, "batch"),
                          ({"max_len": 2.5}, "max_len")]:
        with pytest.raises((TypeError, ValueError), match=match):  # a float max_len is a TypeError
            KV.KVCache(1, 1, 4, **kwargs)
    with pytest.raises(ValueError, match="window"):
        KV.RollingKVCache(1, 1, 4, window=0)
    with pytest.raises(ValueError, match="n_sinks"):
        KV.RollingKVCache(1, 1, 4, window=3, n_sinks=-1)
    with pytest.raises(ValueError, match="ids"):
        KV.cached_nll(small_model(), torch.tensor([3]), KV.KVCache(2, 2, 8, 4))
    with pytest.raises(ValueError, match="ALiBi"):
        KV.RollingKVCache.for_model(small_model("alibi"), window=4)


def test_fit_exponent_recovers_powers():
    x = [2.0, 4.0, 8.0, 16.0]
    assert IC.fit_exponent(x, [3 * v**2 for v in x]) == pytest.approx(2.0)
    assert IC.fit_exponent(x, [5.0] * 4) == pytest.approx(0.0, abs=1e-12)
    assert math.isclose(IC.fit_exponent(x, [v**0.5 for v in x]), 0.5, rel_tol=1e-9)


# ----- the book's models and the stored measurements --------------------------------------------------------

def test_tiny_model_cached_logits_equal_the_full_forward():
    tiny, _ = PT.load_tiny()
    ids = torch.randint(0, tiny.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(10))
    tiny = tiny.double()  # float64: the two computations agree to rounding
    cache = KV.KVCache.for_model(tiny, max_len=40, batch=2)
    with torch.no_grad():
        full = tiny(ids)
        steps = [tiny(ids[:, :25], cache=cache)] + [tiny(ids[:, t:t + 1], cache=cache) for t in range(25, 40)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)


def test_slow_smollm2_cached_logits_equal_the_full_forward():
    pytest.importorskip("gguf")
    smol = PT.load_smollm2()
    ids = torch.randint(100, 49152, (1, 30), generator=torch.Generator().manual_seed(11))
    cache = KV.KVCache.for_model(smol, max_len=30)
    with torch.no_grad():
        full = smol(ids)
        steps = [smol(ids[:, :24], cache=cache)] + [smol(ids[:, t:t + 1], cache=cache) for t in range(24, 30)]
    # float32, 30 layers, sums in different orders: ~1e-5 on logits of size ~30
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-3, rtol=0)
    assert cache.get(0)[0].shape == (1, 3, 30, 64)  # 3 K/V heads for 9 query heads


def test_sweep_step_seconds_and_the_stored_file():
    from lmbook.experiments import kv_cache_sweep as S

    model = small_model(dtype=torch.float32)
    ids = torch.randint(0, 40, (1, 12))
    assert S.step_seconds(model, ids, 6, use_cache=True) > 0 and S.step_seconds(model, ids, 6, use_cache=False) > 0
    blob = S.load_sweep()
    timing, stream = blob["timing"], blob["streaming"]
    assert timing["positions_cached"] == list(S.CACHED_POSITIONS) and timing["lengths"] == list(S.TOTAL_LENGTHS)
    for key, n in [("seconds_cached", len(S.CACHED_POSITIONS)), ("seconds_uncached", len(S.UNCACHED_POSITIONS)),
                   ("total_cached", len(S.TOTAL_LENGTHS)), ("total_uncached", len(S.TOTAL_LENGTHS))]:
        assert len(timing[key]) == n and min(timing[key]) > 0, key
    assert (stream["tokens"], stream["cache_slots"], stream["n_sinks"]) == (S.STREAM_TOKENS, S.CACHE_SLOTS, S.N_SINKS)
    steps = blob["step_cpu"]  # thread CPU time of one thread never exceeds its wall time
    assert steps["positions"] == list(S.UNCACHED_POSITIONS)
    for kind in S.STEP_KINDS:
        cpu, wall = steps[f"{kind}_cpu"], steps[f"{kind}_wall"]
        assert len(cpu) == len(wall) == len(S.UNCACHED_POSITIONS) and min(cpu) > 0, kind
        assert all(c <= w * 1.01 for c, w in zip(cpu, wall, strict=True)), kind
    nll = {name: torch.tensor(values) for name, values in stream["nll"].items()}
    assert all(len(v) == S.STREAM_TOKENS - 1 for v in nll.values())
    rolling = [name for name in nll if "window" in name]
    assert len(rolling) == 2
    for name in rolling:  # before the rolling caches fill, every cache sees the same tokens
        torch.testing.assert_close(nll[name][:S.CACHE_SLOTS - 1], nll["full cache"][:S.CACHE_SLOTS - 1],
                                   atol=2e-3, rtol=0)
