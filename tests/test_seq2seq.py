"""lmbook.seq2seq and lmbook.spelling (chapter 13) against torch.nn.Transformer, torch's SDPA, brute force
and scipy's binomial interval."""

import itertools
import random

import pytest
import torch
import torch.nn.functional as F
from lmbook import spelling as sp
from lmbook.edit_distance import osa_distance
from lmbook.model import embed
from lmbook.seq2seq import EOS, Seq2Seq, Seq2SeqConfig, beam_search, cross_attention, greedy_decode
from scipy.stats import binomtest
from torch import nn


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(vocab_size=13, context_length=16, d_model=16, n_heads=4, n_encoder_layers=2, n_decoder_layers=2)
    return Seq2Seq(Seq2SeqConfig(**{**cfg, **kw})).double().eval()


def _batch(seed=1, B=3, S=7, T=5, V=13):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (B, S), generator=g)
    lengths = torch.tensor([S, 2, 5][:B])
    return src, lengths, torch.randint(3, V, (B, T), generator=g)


def _copy_attention(theirs: nn.MultiheadAttention, ours):
    theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    theirs.out_proj.weight.copy_(ours.o_proj.weight)
    theirs.out_proj.bias.copy_(ours.o_proj.bias)


def _torch_transformer(model: Seq2Seq, pre: bool) -> nn.Transformer:
    c = model.config
    ref = nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, 4 * c.d_model, dropout=0.0,
                         activation="gelu", batch_first=True, norm_first=pre).double().eval()
    with torch.no_grad():
        for theirs, ours in zip(ref.encoder.layers, model.encoder, strict=False):
            _copy_attention(theirs.self_attn, ours.self_attn)
            for t, o in ((theirs.linear1, ours.ffn.up_proj), (theirs.linear2, ours.ffn.down_proj),
                         (theirs.norm1, ours.norm1), (theirs.norm2, ours.norm2)):
                t.load_state_dict(o.state_dict())
        for theirs, ours in zip(ref.decoder.layers, model.decoder, strict=False):
            _copy_attention(theirs.self_attn, ours.self_attn)
            _copy_attention(theirs.multihead_attn, ours.cross_attn)
            for t, o in ((theirs.linear1, ours.ffn.up_proj), (theirs.linear2, ours.ffn.down_proj),
                         (theirs.norm1, ours.norm1), (theirs.norm2, ours.norm2), (theirs.norm3, ours.norm3)):
                t.load_state_dict(o.state_dict())
        if pre:  # T5-style pre-norm stacks end with a norm, as nn.Transformer's do
            ref.encoder.norm.load_state_dict(model.encoder_norm.state_dict())
            ref.decoder.norm.load_state_dict(model.decoder_norm.state_dict())
        else:  # the 2017 post-norm stacks end normalised already; nn.Transformer would add a norm
            ref.encoder.norm, ref.decoder.norm = None, None
    return ref


@pytest.mark.parametrize("pre", [False, True])
def test_matches_torch_transformer(pre):
    model = _model(norm_position="pre" if pre else "post")
    ref = _torch_transformer(model, pre)
    src, lengths, tgt = _batch()
    pad = torch.arange(src.shape[1]) >= lengths[:, None]  # torch: True = ignore
    with torch.no_grad():
        memory, _ = model.encode(src, lengths)
        x = embed(model, src, torch.arange(src.shape[1]))
        y = embed(model, tgt, torch.arange(tgt.shape[1]))
        their_memory = ref.encoder(x, src_key_padding_mask=pad)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=torch.float64)
        their_out = ref.decoder(y, their_memory, tgt_mask=causal, memory_key_padding_mask=pad, tgt_is_causal=True)
        theirs = their_out @ model.tok_emb.weight.T
        ours = model(src, lengths, tgt)
    real = ~pad
    torch.testing.assert_close(memory[real], their_memory[real], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_cross_attention_matches_torch_sdpa():
    model = _model()
    layer = model.decoder[0].cross_attn
    src, lengths, _ = _batch()
    g = torch.Generator().manual_seed(3)
    y = torch.randn(3, 4, 16, generator=g, dtype=torch.float64)
    memory = torch.randn(3, 7, 16, generator=g, dtype=torch.float64)
    keep = torch.arange(7) < lengths[:, None]  # (B, S)
    with torch.no_grad():
        k, v = model.cross_kv(memory)[0]
        ours = cross_attention(layer, y, k, v, keep[:, None, None, :])
        q = layer.q_proj(y).view(3, 4, 4, 4).transpose(1, 2)
        kk = layer.k_proj(memory).view(3, 7, 4, 4).transpose(1, 2)
        vv = layer.v_proj(memory).view(3, 7, 4, 4).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, kk, vv, attn_mask=keep[:, None, None, :])
        theirs = layer.o_proj(out.transpose(1, 2).reshape(3, 4, 16))
        mha = nn.MultiheadAttention(16, 4, batch_first=True).double()
        _copy_attention(mha, layer)
        via_mha = mha(y, memory, memory, key_padding_mask=~keep, need_weights=False)[0]
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ours, via_mha, rtol=1e-10, atol=1e-10)


def test_padding_does_not_change_a_source():
    model = _model(seed=4)
    src, lengths, tgt = _batch()
    with torch.no_grad():
        batched = model(src, lengths, tgt)[1]  # the source of length 2, padded to 7
        alone = model(src[1:2, :2], lengths[1:2], tgt[1:2])[0]
    torch.testing.assert_close(batched, alone, rtol=1e-10, atol=1e-10)


def _naive_greedy(model, src, length, max_len):
    out = [1]
    for _ in range(max_len):  # the whole model, encoder included, at every step
        nxt = int(model(src[None, :length], torch.tensor([length]), torch.tensor([out]))[0, -1].argmax())
        out.append(nxt)
        if nxt == EOS:
            break
    return out[1:]


def test_greedy_with_cached_memory_equals_recomputation_and_beam_of_one():
    model = _model(seed=5)
    with torch.no_grad():  # make EOS likely so that some sequences stop early
        model.lm_head.weight[EOS] += 0.3 * model.lm_head.weight[3]
    src, lengths, _ = _batch(seed=6)
    fast = greedy_decode(model, src, lengths, max_len=8)
    for b in range(3):
        naive = _naive_greedy(model, src[b], int(lengths[b]), 8)
        assert fast[b, :len(naive)].tolist() == naive
        assert (fast[b, len(naive):] == 0).all()
        ids, _ = beam_search(model, src[b, :lengths[b]], max_len=8, num_beams=1)
        assert ids == naive


def test_cross_kv_computed_once_per_source():
    model = _model(seed=5)
    calls = []
    model.decoder[0].cross_attn.k_proj.register_forward_hook(lambda *a: calls.append(1))
    src, lengths, _ = _batch(seed=6)
    greedy_decode(model, src, lengths, max_len=8)
    assert len(calls) == 1


def test_beam_search_is_exhaustive_with_a_wide_beam():
    model = _model(seed=7, vocab_size=5)
    with torch.no_grad():
        model.lm_head.weight[EOS] += 0.5 * model.lm_head.weight[3]
    src = torch.tensor([3, 4, 3])
    ids, score = beam_search(model, src, max_len=3, num_beams=125)
    with torch.no_grad():
        memory, mask = model.encode(src[None], torch.tensor([3]))
        cross = model.cross_kv(memory)
        best = (None, -float("inf"))
        for n in range(1, 4):  # every sequence that ends with its first EOS, of up to 3 tokens
            for body in itertools.product([0, 1, 3, 4], repeat=n - 1):
                seq = [1, *body, EOS]
                logp = model.decode(torch.tensor([seq[:-1]]), cross, mask)[0].double().log_softmax(-1)
                total = float(sum(logp[t, seq[t + 1]] for t in range(n)))
                best = max(best, (seq[1:], total), key=lambda b: b[1])
    assert ids == best[0]
    assert score == pytest.approx(best[1], abs=1e-9)


def test_encoder_only_and_decoder_only_are_special_cases():
    enc = _model(n_decoder_layers=0)
    dec = _model(n_encoder_layers=0)
    assert len(enc.decoder) == 0 and len(dec.encoder) == 0
    assert all(layer.cross_attn is None for layer in dec.decoder)
    src, lengths, tgt = _batch()
    assert enc.encode(src, lengths)[0].shape == (3, 7, 16)
    assert dec.decode(tgt).shape == (3, 5, 13)
    with pytest.raises(ValueError, match="cross"):
        dec.decode(tgt, cross=[(torch.zeros(1), torch.zeros(1))])
    with pytest.raises(ValueError, match="src"):
        dec.encode(src, lengths)


def test_add_noise_is_exactly_k_edits_away():
    rng = random.Random(0)
    for word in ["function", "lambda", "yield", "abba", "aaaa"]:
        for k in (0, 1, 2):
            for _ in range(20):
                noisy = sp.add_noise(word, k, rng)
                assert osa_distance(noisy, word) == k and set(noisy) <= set(sp.ALPHABET)


def test_wilson_interval_matches_scipy():
    for k, n in [(0, 10), (3, 10), (10, 10), (117, 531), (1, 2)]:
        ci = binomtest(k, n).proportion_ci(method="wilson")
        assert sp.wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=2e-4)  # scipy: z = 1.95996...


def test_encode_decode_round_trip_and_split():
    words = ["class", "def", "yield"]
    ids, lengths = sp.encode(words, bos=True, eos=True)
    assert lengths.tolist() == [7, 5, 7] and ids[1, -2:].tolist() == [0, 0]
    assert sp.decode(ids) == words
    train, test = sp.split_by_type(["b", "a", "c", "d", "e"] * 2, test_fraction=0.4)
    assert len(test) == 2 and not set(train) & set(test) and sorted(train + test) == list("abcde")


def test_decoder_only_batch_scores_only_the_target():
    b = sp.make_batch(["abc"], random.Random(0), noise=(0,), decoder_only=True)
    # input: a b c SEP a b c (EOS dropped); targets: nothing inside the source, then a b c EOS after SEP
    assert b["tgt_in"].tolist() == [[5, 6, 7, sp.SEP, 5, 6, 7]]
    assert b["tgt_out"].tolist() == [[0, 0, 0, 5, 6, 7, EOS]]  # SEP's position predicts the first letter


def test_mlm_mask_80_10_10():
    from lmbook.seq2seq import mlm_mask

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 31, (400, 50), generator=g)
    lengths = torch.randint(1, 51, (400,), generator=g)
    corrupted, targets = mlm_mask(ids, lengths, mask_id=4, first_id=5, vocab_size=31, p=0.15, generator=g)
    real = torch.arange(50) < lengths[:, None]
    chosen = targets != 0
    assert not (chosen & ~real).any() and (corrupted[~real] == ids[~real]).all()
    assert (targets[chosen] == ids[chosen]).all() and (corrupted[~chosen] == ids[~chosen]).all()
    n = int(chosen.sum())
    assert abs(n / int(real.sum()) - 0.15) < 0.01
    masked = (corrupted[chosen] == 4).float().mean().item()
    kept = (corrupted[chosen] == ids[chosen]).float().mean().item()  # includes random draws of the same id
    assert abs(masked - 0.8) < 0.02 and abs(kept - (0.1 + 0.1 / 26)) < 0.02


def test_stored_runs_use_the_dev_chosen_recipe_and_every_seed_is_scored():
    from lmbook.experiments import seq2seq_spelling as runs

    tuning, stored = runs.tuning(), runs.stored()
    for name in runs.CONFIGS:  # an independent argmax over the dev table: the best mean of the two noise levels
        mine = [r for r in tuning["runs"] if r["name"] == name]
        top = sorted(mine, key=lambda r: -(r["dev"]["1"] + r["dev"]["2"]) / 2)[0]
        assert stored["recipe"][name] == {"lr": top["lr"], "steps": top["steps"]}
        assert set(stored["accuracy"][name]) == set(runs.SEEDS) == set(stored["losses"][name])
        for seed in runs.SEEDS:
            assert set(stored["accuracy"][name][seed]) == {1, 2}
            assert len(stored["losses"][name][seed]) == top["steps"]
    assert tuning["fit_words"] + tuning["dev_words"] == len(sp.split_by_type(list(sp.manual_words()))[0])


def test_draw_losses_band_spans_the_seeds():
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from lmbook.plotting import ch13 as figs

    rng = np.random.default_rng(0)
    losses = {"a": {s: list(1 + rng.random(120)) for s in range(3)}}
    fig = figs.draw_losses(losses, window=10)
    ax = fig.axes[0]
    line = ax.lines[0].get_ydata()
    smooth = [np.convolve(v, np.ones(10) / 10, mode="valid") for v in losses["a"].values()]
    assert np.allclose(line, smooth[0])
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() >= min(s.min() for s in smooth) - 1e-12 and band.max() <= max(s.max() for s in smooth) + 1e-12
