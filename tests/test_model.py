"""lmbook.model: oracle tests against transformers' Llama and GPT-2 (random init, weights copied), the norms
against torch, the GQA expansion against repeated heads, the cache hook, training, and bad input."""

import math

import pytest
import torch
from lmbook import model as M
from lmbook import pretrained as PT
from lmbook import training as TR
from lmbook.ngram import NGramLM
from lmbook.positional import rope_cos_sin
from torch import nn

transformers = pytest.importorskip("transformers")


def _randomize(module, std=0.1, seed=0):
    """Random values everywhere (norm gains near 1), so that no copied tensor can be wrong unnoticed."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype) * std
            p.copy_(1 + noise if ("norm" in name or name.startswith(("ln", "transformer.ln"))) and p.dim() == 1
                    and name.endswith("weight") else noise)


def llama_pair(vocab=50, d=32, layers=2, heads=4, kv_heads=2, tie=False, rope_theta=500.0, seed=0):
    """A random transformers LlamaForCausalLM and the same weights in lmbook's Transformer (float64)."""
    cfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=d, intermediate_size=3 * d, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=64, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta}, tie_word_embeddings=tie,
        attention_bias=False, mlp_bias=False)
    torch.manual_seed(seed)
    hf = transformers.LlamaForCausalLM(cfg).double().eval()
    _randomize(hf, seed=seed)
    ours = M.Transformer(M.TransformerConfig(
        vocab_size=vocab, context_length=64, d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads,
        d_ff=3 * d, norm="rmsnorm", norm_eps=1e-5, ffn="swiglu", positional="rope", rope_base=rope_theta,
        tie_embeddings=tie)).double().eval()
    sd = hf.state_dict()
    mapped = {"tok_emb.weight": sd["model.embed_tokens.weight"], "final_norm.weight": sd["model.norm.weight"],
              "lm_head.weight": sd["lm_head.weight"]}
    for i in range(layers):
        h = f"model.layers.{i}."
        mapped[f"blocks.{i}.attn_norm.weight"] = sd[h + "input_layernorm.weight"]
        mapped[f"blocks.{i}.ffn_norm.weight"] = sd[h + "post_attention_layernorm.weight"]
        for p in ("q", "k", "v", "o"):
            mapped[f"blocks.{i}.attn.{p}_proj.weight"] = sd[h + f"self_attn.{p}_proj.weight"]
        for p in ("gate", "up", "down"):
            mapped[f"blocks.{i}.ffn.{p}_proj.weight"] = sd[h + f"mlp.{p}_proj.weight"]
    ours.load_state_dict(mapped)
    return hf, ours


def gpt2_pair(vocab=50, d=32, layers=2, heads=4, positions=64, seed=0):
    """A random transformers GPT2LMHeadModel (exact GELU) and the same weights in lmbook (float64)."""
    cfg = transformers.GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=d, n_layer=layers, n_head=heads,
                                  activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  layer_norm_epsilon=1e-5)
    torch.manual_seed(seed)
    hf = transformers.GPT2LMHeadModel(cfg).double().eval()
    _randomize(hf, seed=seed)
    ours = M.Transformer(M.TransformerConfig(
        vocab_size=vocab, context_length=positions, d_model=d, n_layers=layers, n_heads=heads, d_ff=4 * d,
        norm="layernorm", norm_eps=1e-5, ffn="gelu", positional="learned", tie_embeddings=True,
        bias=True)).double().eval()
    sd = hf.state_dict()
    mapped = {"tok_emb.weight": sd["transformer.wte.weight"], "pos_emb.weight": sd["transformer.wpe.weight"],
              "final_norm.weight": sd["transformer.ln_f.weight"], "final_norm.bias": sd["transformer.ln_f.bias"]}
    for i in range(layers):
        h = f"transformer.h.{i}."
        for ours_name, theirs in (("attn_norm", "ln_1"), ("ffn_norm", "ln_2")):
            mapped[f"blocks.{i}.{ours_name}.weight"] = sd[h + theirs + ".weight"]
            mapped[f"blocks.{i}.{ours_name}.bias"] = sd[h + theirs + ".bias"]
        w, b = sd[h + "attn.c_attn.weight"].T, sd[h + "attn.c_attn.bias"]  # Conv1D stores (in, out): y = x W
        for j, p in enumerate("qkv"):
            mapped[f"blocks.{i}.attn.{p}_proj.weight"] = w[j * d:(j + 1) * d]
            mapped[f"blocks.{i}.attn.{p}_proj.bias"] = b[j * d:(j + 1) * d]
        for ours_name, theirs in (("attn.o_proj", "attn.c_proj"), ("ffn.up_proj", "mlp.c_fc"),
                                  ("ffn.down_proj", "mlp.c_proj")):
            mapped[f"blocks.{i}.{ours_name}.weight"] = sd[h + theirs + ".weight"].T
            mapped[f"blocks.{i}.{ours_name}.bias"] = sd[h + theirs + ".bias"]
    mapped["lm_head.weight"] = mapped["tok_emb.weight"]
    ours.load_state_dict(mapped)
    return hf, ours


# ----- oracles --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tie,kv_heads", [(False, 2), (True, 4), (False, 1)])
def test_llama_logits_match_transformers(tie, kv_heads):
    hf, ours = llama_pair(tie=tie, kv_heads=kv_heads)
    ids = torch.randint(0, 50, (2, 23), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(ids).logits
        got = ours(ids)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert expected.abs().max() > 0.1  # the comparison is not between two near-zero tensors


def test_gpt2_logits_match_transformers():
    hf, ours = gpt2_pair()
    ids = torch.randint(0, 50, (3, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, atol=1e-5, rtol=0)


def test_norms_match_torch():
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    ln, ours_ln = nn.LayerNorm(16, eps=1e-5).double(), M.LayerNorm(16, eps=1e-5).double()
    rms, ours_rms = nn.RMSNorm(16, eps=1e-6).double(), M.RMSNorm(16, eps=1e-6).double()
    with torch.no_grad():
        for a, b in ((ln, ours_ln), (rms, ours_rms)):
            a.weight.normal_()
            b.weight.copy_(a.weight)
        ln.bias.normal_()
        ours_ln.bias.copy_(ln.bias)
        torch.testing.assert_close(ours_ln(x), ln(x), atol=1e-12, rtol=0)
        torch.testing.assert_close(ours_rms(x), rms(x), atol=1e-12, rtol=0)


def test_gqa_equals_mha_with_repeated_kv_heads():
    """A GQA model is an MHA model whose K/V projections repeat each K/V head for its group of queries."""
    torch.manual_seed(0)
    cfg = M.TransformerConfig(vocab_size=30, d_model=24, n_layers=1, n_heads=6, n_kv_heads=2)
    gqa = M.Transformer(cfg).double().eval()
    mha = M.Transformer(M.TransformerConfig(**{**cfg.__dict__, "n_kv_heads": 6})).double().eval()
    sd = gqa.state_dict()
    for p in ("k_proj", "v_proj"):  # (H_kv * dh, d) -> (H * dh, d): head g used by queries 3g, 3g+1, 3g+2
        w = sd[f"blocks.0.attn.{p}.weight"].view(2, 4, 24)
        sd[f"blocks.0.attn.{p}.weight"] = w.repeat_interleave(3, dim=0).reshape(24, 24)
    mha.load_state_dict(sd)
    ids = torch.randint(0, 30, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(gqa(ids), mha(ids), atol=1e-12, rtol=0)


# ----- structure --------------------------------------------------------------------------------------------

class ListCache:
    """The smallest object that satisfies the cache hook of Transformer.forward (chapter 11 builds the real one)."""

    def __init__(self):
        self.keys, self.values, self.seq_len = {}, {}, 0

    def update(self, layer, k, v):
        if layer in self.keys:
            k, v = torch.cat([self.keys[layer], k], dim=-2), torch.cat([self.values[layer], v], dim=-2)
        self.keys[layer], self.values[layer] = k, v
        if layer == 0:  # read by the next forward, before layer 0 stores more
            self.seq_len = k.shape[-2]
        return k, v


@pytest.mark.parametrize("positional", ["rope", "learned", "none"])
def test_cache_hook_gives_the_full_forward_logits(positional):
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=40, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                                              positional=positional)).double().eval()
    ids = torch.randint(0, 40, (2, 12))
    cache = ListCache()
    with torch.no_grad():
        full = model(ids)
        pieces = []
        for chunk in (ids[:, :5], ids[:, 5:6], ids[:, 6:11], ids[:, 11:]):
            pieces.append(model(chunk, cache=cache))
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-12, rtol=0)


def test_positions_argument_and_causality():
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=40, d_model=32, n_layers=2)).double().eval()
    ids = torch.randint(0, 40, (1, 10))
    with torch.no_grad():
        base = model(ids)
        torch.testing.assert_close(model(ids, positions=torch.arange(10)), base)
        changed = ids.clone()
        changed[0, 7] = (ids[0, 7] + 1) % 40
        out = model(changed)
    torch.testing.assert_close(out[:, :7], base[:, :7], atol=1e-12, rtol=0)  # the past never sees the future
    assert not torch.allclose(out[:, 7:], base[:, 7:])
    # RoPE: shifting every position by the same amount changes nothing (only differences matter)
    with torch.no_grad():
        torch.testing.assert_close(model(ids, positions=torch.arange(100, 110)), base, atol=1e-9, rtol=0)


def test_post_norm_block_outputs_are_normalised_and_pre_norm_stream_is_not():
    torch.manual_seed(0)
    for position, normalised in (("post", True), ("pre", False)):
        model = M.Transformer(M.TransformerConfig(vocab_size=30, d_model=32, n_layers=2, norm_position=position))
        x = torch.randn(2, 6, 32) * 5
        y = model.blocks[0](x, rope_cos_sin(torch.arange(6), model.inv_freq))
        rms = y.pow(2).mean(-1).sqrt()
        assert torch.allclose(rms, torch.ones_like(rms), atol=1e-3) == normalised
    assert isinstance(M.Transformer(M.TransformerConfig(norm_position="post")).final_norm, nn.Identity)


def test_dropout_is_active_only_in_training_mode():
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=30, d_model=32, n_layers=1, dropout=0.5))
    ids = torch.randint(0, 30, (1, 8))
    model.train()
    assert not torch.allclose(model(ids), model(ids))
    model.eval()
    torch.testing.assert_close(model(ids), model(ids))


def test_parameter_count_formula_and_tying():
    cfg = M.TransformerConfig(vocab_size=100, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, ffn="swiglu",
                              d_ff=64, tie_embeddings=True)
    model = M.Transformer(cfg)
    d, dkv = 32, 2 * 8
    per_block = 2 * d + (d * d + 2 * d * dkv + d * d) + 3 * d * 64  # 2 norms, attention, SwiGLU
    assert model.num_parameters() == 100 * d + 3 * per_block + d  # + final norm; the tied W_out counts once
    assert model.lm_head.weight is model.tok_emb.weight
    untied = M.Transformer(M.TransformerConfig(**{**cfg.__dict__, "tie_embeddings": False}))
    assert untied.num_parameters() == model.num_parameters() + 100 * d
    assert untied.num_parameters(exclude_embeddings=True) == 3 * per_block + d + 100 * d
    assert M.TransformerConfig(d_model=96, ffn="swiglu").d_ff == 256  # 8/3 * 96 = 256
    assert M.TransformerConfig(d_model=96, ffn="gelu").d_ff == 384


# ----- training ---------------------------------------------------------------------------------------------

def test_learning_rate_schedule():
    cfg = TR.TrainConfig(steps=101, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    lrs = [TR.learning_rate(s, cfg) for s in range(cfg.steps)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)  # linear warm-up
    assert lrs[10] == pytest.approx(1.0) and lrs[-1] == pytest.approx(0.1)  # cosine from peak to floor
    assert lrs[55] == pytest.approx(0.55)  # halfway through the cosine: the mean of peak and floor
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))


def test_evaluate_equals_a_token_by_token_computation():
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=20, d_model=16, n_layers=1, n_heads=2)).eval()
    ids = torch.randint(0, 20, (23,))
    nll = 0.0
    for start in range(0, 22, 5):  # windows of 5 predicted tokens, each starting fresh
        window = ids[start:start + 6]
        logp = model(window[None, :-1])[0].log_softmax(-1)
        nll -= logp[torch.arange(len(window) - 1), window[1:]].sum().item()
    # float32 model; evaluate's batched windows sum in a different order than this loop
    assert TR.evaluate(model, ids, seq_len=5, batch_size=2) == pytest.approx(nll / 22, rel=1e-6)


def test_training_learns_a_repeating_pattern():
    torch.manual_seed(0)
    pattern = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
    ids = pattern.repeat(40)
    model = M.Transformer(M.TransformerConfig(vocab_size=10, d_model=32, n_layers=2, context_length=32))
    cfg = TR.TrainConfig(steps=60, batch_size=8, seq_len=16, lr=1e-2, warmup_steps=5, eval_every=30)
    history = TR.train(model, ids, ids, cfg)
    assert history["val_step"] == [30, 60]
    assert history["train_loss"][0] > 2.0 and history["val_loss"][-1] < 0.3  # ln 10 = 2.3 at the start
    assert len(history["lr"]) == 60 and history["seconds"] > 0 and not model.training


def test_word_corpus_uses_chapter_1_tokens():
    from lmbook import data

    vocab, train_ids, val_ids = PT.word_corpus(min_count=2)
    valid = data.sentences("\n\n".join(data.split("validation").values()))
    ngram = NGramLM(1, min_count=2).fit(data.sentences("\n\n".join(data.split("train").values())))
    assert vocab == ngram.vocab
    assert len(val_ids) - 1 == ngram.log_likelihood(valid)[1]  # the same number of scored tokens
    assert vocab[val_ids[0]] == "</s>" and vocab[val_ids[-1]] == "</s>"
    assert [vocab[i] for i in val_ids[1:1 + len(valid[0])]] == [ngram._map(w) for w in valid[0]]


def test_tiny_model_file_beats_the_ngram_baseline():
    blob = torch.load(PT.TINY_PATH, map_location="cpu", weights_only=True)
    model, vocab = PT.load_tiny()
    _, _, val_ids = PT.word_corpus(blob["min_count"])
    assert len(vocab) == model.config.vocab_size
    val_loss = TR.evaluate(model, val_ids, blob["train_config"]["seq_len"], stride=blob["eval_stride"])
    assert val_loss == pytest.approx(blob["val_loss"], abs=1e-4)
    assert math.exp(val_loss) < blob["baseline"]["perplexity"]  # same tokens: perplexities are comparable
    assert 5e5 < model.num_parameters() < 2e6


# ----- bad input --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    ({"d_model": 30, "n_heads": 4}, "must divide d_model"),
    ({"n_heads": 4, "n_kv_heads": 3}, "must divide n_heads"),
    ({"d_model": 20, "n_heads": 4, "positional": "rope"}, "head_dim"),
    ({"norm": "batchnorm"}, "norm must be one of"),
    ({"positional": "alibi2"}, "positional must be one of"),
    ({"ffn": "relu2"}, "ffn must be one of"),
    ({"vocab_size": 0}, "vocab_size must be an int >= 1"),
    ({"dropout": 1.0}, "dropout"),
])
def test_bad_config_is_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        M.TransformerConfig(**kwargs)


def test_bad_ids_are_rejected():
    model = M.Transformer(M.TransformerConfig(vocab_size=10, d_model=16, n_layers=1, n_heads=2,
                                              positional="learned", context_length=8))
    with pytest.raises(ValueError, match="max id 9"):
        model(torch.tensor([[1, 2, 10]]))
    with pytest.raises(ValueError, match="max id 9"):
        model(torch.tensor([[-1, 2]]))
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="context_length=8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="fewer than seq_len"):
        TR.train(model, torch.arange(5), config=TR.TrainConfig(seq_len=8))
    rope = M.Transformer(M.TransformerConfig(vocab_size=10, d_model=16, n_layers=1, n_heads=2))
    for bad in (torch.arange(4), torch.arange(3.0), [0, 1, 2]):
        with pytest.raises(ValueError, match=r"positions must be an integer tensor .* with T=3"):
            rope(torch.tensor([[1, 2, 3]]), positions=bad)


def test_strided_evaluate_scores_each_token_once_with_the_longest_context():
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=20, d_model=16, n_layers=1, n_heads=2)).eval()
    ids = torch.randint(0, 20, (30,))
    seq_len, stride, nll = 8, 3, 0.0
    for t in range(1, 30):  # token t is read in the window that starts at the largest multiple of 3 with t - 8 <= start
        start = max(0, -(-(t - seq_len) // stride) * stride)
        logp = model(ids[None, start:t])[0, -1].log_softmax(-1)
        nll -= logp[ids[t]].item()
    got = TR.evaluate(model, ids, seq_len=seq_len, stride=stride, batch_size=3)
    assert got == pytest.approx(nll / 29, rel=1e-6)
    assert TR.evaluate(model, ids, seq_len=8, stride=8) == pytest.approx(TR.evaluate(model, ids, seq_len=8), rel=1e-12)


def test_last_only_returns_the_last_position_logits():
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=30, d_model=16, n_layers=2, n_heads=2)).eval()
    ids = torch.randint(0, 30, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(model(ids, last_only=True), model(ids)[:, -1:], atol=1e-6, rtol=0)


@pytest.mark.parametrize("kv_heads,tie", [(None, True), (1, False), (2, True)])
def test_plain_forward_gives_the_full_forward_logits(kv_heads, tie):
    torch.manual_seed(0)
    config = M.TransformerConfig(vocab_size=40, d_model=24, n_layers=3, n_heads=4, n_kv_heads=kv_heads,
                                 tie_embeddings=tie)
    model = M.Transformer(config).eval()
    for p in model.parameters():  # move the norm gains off 1, so that a forgotten norm would show
        p.data += 0.1 * torch.randn_like(p)
    ids = torch.randint(0, 40, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(M.plain_forward(model, ids), model(ids), atol=1e-5, rtol=1e-5)
        no_rope = M.plain_forward(model, ids).clone()
        model.inv_freq = model.inv_freq * 0  # a forgotten rotation would leave plain_forward unchanged
        assert not torch.allclose(model(ids), no_rope, atol=1e-3)


@pytest.mark.parametrize("kwargs", [dict(positional="alibi"), dict(norm_position="post")])
def test_plain_forward_rejects_what_it_leaves_out(kwargs):
    model = M.Transformer(M.TransformerConfig(vocab_size=20, d_model=16, n_layers=1, n_heads=2, **kwargs))
    with pytest.raises(ValueError, match="model must be a pre-norm RoPE Transformer"):
        M.plain_forward(model, torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="model must be"):
        M.plain_forward(nn.Linear(2, 2), torch.zeros(1, 3, dtype=torch.long))
    rope = M.Transformer(M.TransformerConfig(vocab_size=20, d_model=16, n_layers=1, n_heads=2))
    with pytest.raises(ValueError, match="ids must"):
        M.plain_forward(rope, torch.full((1, 3), 20))
