"""lmbook.decoding and lmbook.beam_search: each logits filter against transformers' LogitsProcessor of the same
name, each sampler's distribution against a brute-force computation, and greedy, sampled and beam-search
generation against transformers' generate on a random Llama with the same weights."""

import itertools
import math

import pytest
import torch
from lmbook import decoding as D
from lmbook.beam_search import beam_search, best_of_n
from test_model import ListCache, gpt2_pair, llama_pair

generation = pytest.importorskip("transformers.generation")


def random_logits(seed, shape=(4, 50), scale=3.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


# ----- filters vs transformers' processors ------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
def test_filters_match_transformers(seed):
    z = random_logits(seed)
    ids = torch.randint(0, 50, (4, 7), generator=torch.Generator().manual_seed(seed))
    for tau in (0.3, 1.0, 2.5):
        torch.testing.assert_close(D.apply_temperature(z, tau), generation.TemperatureLogitsWarper(tau)(ids, z))
    for k in (1, 5, 50, 80):
        torch.testing.assert_close(D.top_k_filter(z, k), generation.TopKLogitsWarper(k)(ids, z))
    for p in (0.05, 0.3, 0.9, 0.999, 1.0):
        torch.testing.assert_close(D.top_p_filter(z, p), generation.TopPLogitsWarper(p)(ids, z))
    for p in (0.0, 0.05, 0.2, 0.9, 1.0):
        torch.testing.assert_close(D.min_p_filter(z, p), generation.MinPLogitsWarper(p)(ids, z.clone()))
    for penalty in (0.5, 1.0, 1.3):
        expected = generation.RepetitionPenaltyLogitsProcessor(penalty)(ids, z.clone())
        torch.testing.assert_close(D.apply_repetition_penalty(z, ids, penalty), expected)


def test_top_k_keeps_ties_like_transformers():
    z = torch.tensor([[1.0, 3.0, 2.0, 2.0, 0.0]])
    assert D.top_k_filter(z, 2).isfinite().tolist() == [[False, True, True, True, False]]
    torch.testing.assert_close(D.top_k_filter(z, 2), generation.TopKLogitsWarper(2)(None, z))


# ----- distributions vs brute force -------------------------------------------------------------------------

def brute_force(logits, temperature=1.0, k=None, p=None, p_min=None):
    """The sampling distribution written with Python lists and loops, no tensors."""
    z = [v / temperature for v in logits]
    ranked = sorted(range(len(z)), key=lambda i: -z[i])
    keep = set(range(len(z)))
    if k is not None:
        keep &= {i for i in range(len(z)) if z[i] >= z[ranked[k - 1]]}
    if p is not None:
        probs = _softmax([z[i] if i in keep else -math.inf for i in range(len(z))])
        chosen, mass = set(), 0.0
        for i in sorted(keep, key=lambda i: -probs[i]):
            if mass >= p:
                break
            chosen.add(i)
            mass += probs[i]
        keep = chosen
    if p_min is not None:
        probs = _softmax([z[i] if i in keep else -math.inf for i in range(len(z))])
        keep = {i for i in keep if probs[i] >= p_min * max(probs)}
    return _softmax([z[i] if i in keep else -math.inf for i in range(len(z))])


def _softmax(z):
    m = max(z)
    e = [math.exp(v - m) if v > -math.inf else 0.0 for v in z]
    return [v / sum(e) for v in e]


def processed(z, temperature=1.0, k=None, p=None, p_min=None):
    z = D.apply_temperature(torch.tensor([z], dtype=torch.float64), temperature)
    z = D.top_k_filter(z, k) if k is not None else z
    z = D.top_p_filter(z, p) if p is not None else z
    z = D.min_p_filter(z, p_min) if p_min is not None else z
    return z.softmax(-1)[0].tolist()


@pytest.mark.parametrize("settings", [
    {"temperature": 0.5}, {"temperature": 2.0}, {"k": 1}, {"k": 3}, {"p": 0.5}, {"p": 0.8}, {"p_min": 0.1},
    {"p_min": 0.5}, {"temperature": 0.7, "k": 4, "p": 0.9}, {"temperature": 1.5, "p": 0.7, "p_min": 0.2},
])
def test_sampling_distributions_match_brute_force(settings):
    for z in ([2.0, 1.0, 0.1, -1.0, 0.5, 1.7], [0.3, -0.2, 4.0, 0.0, 3.9, -5.0]):
        assert processed(z, **settings) == pytest.approx(brute_force(z, **settings), abs=1e-12)


def test_sample_frequencies_follow_the_filtered_distribution():
    z = torch.tensor([[2.0, 1.0, 0.1, -1.0, 0.5, 1.7]])
    filtered = D.top_p_filter(z, 0.8)
    draws = D.sample(filtered.expand(20000, -1), generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=6).double() / 20000
    expected = filtered.softmax(-1)[0].double()
    assert (freq[expected == 0] == 0).all()  # removed tokens are never drawn
    torch.testing.assert_close(freq, expected, atol=0.015, rtol=0)  # ~4 standard errors at n = 20000


def test_greedy_is_argmax_and_distinct_n_by_hand():
    assert D.greedy(torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 2.9]])).tolist() == [1, 0]
    assert D.distinct_n([[1, 2, 1, 2, 1]], 1) == pytest.approx(2 / 5)
    assert D.distinct_n([[1, 2, 1, 2, 1]], 2) == pytest.approx(2 / 4)  # (1,2) (2,1) (1,2) (2,1)
    assert D.distinct_n([[1, 2, 3], [1, 2, 4]], 2) == pytest.approx(3 / 4)  # counted over all sequences


# ----- generation vs transformers.generate ------------------------------------------------------------------

def hf_generate(hf, prompt, **kwargs):
    """transformers' generate with every prompt token attended (it would mask prompt tokens equal to the pad id)."""
    return hf.generate(prompt, attention_mask=torch.ones_like(prompt), pad_token_id=0, **kwargs)


@pytest.fixture(scope="module")
def llama():
    return llama_pair(vocab=60, d=32, layers=2, heads=4, kv_heads=2, tie=True, seed=3)


def test_greedy_generation_matches_transformers(llama):
    hf, ours = llama
    prompt = torch.tensor([[5, 17, 3, 42, 8], [9, 9, 1, 0, 33]])
    expected = hf_generate(hf, prompt, max_new_tokens=15, do_sample=False, eos_token_id=None)
    assert torch.equal(D.generate(ours, prompt, 15), expected)
    expected = hf_generate(hf, prompt, max_new_tokens=15, do_sample=False, repetition_penalty=1.5,
                           eos_token_id=None)
    assert torch.equal(D.generate(ours, prompt, 15, repetition_penalty=1.5), expected)


def test_greedy_and_beam_generation_match_transformers_on_gpt2():
    hf, ours = gpt2_pair(seed=4)
    prompt = torch.tensor([[1, 2, 3]])
    expected = hf_generate(hf, prompt, max_new_tokens=12, do_sample=False, eos_token_id=None)
    assert torch.equal(D.generate(ours, prompt, 12), expected)
    for num_beams, length_penalty in [(3, 1.0), (4, 0.5)]:
        expected = hf_generate(hf, prompt, max_new_tokens=12, num_beams=num_beams, do_sample=False,
                               length_penalty=length_penalty, early_stopping=False, eos_token_id=None)
        assert torch.equal(beam_search(ours, prompt, 12, num_beams=num_beams, length_penalty=length_penalty)[0],
                           expected)


@pytest.mark.parametrize("settings", [
    {"temperature": 1.3}, {"top_k": 5}, {"top_p": 0.7, "temperature": 0.8}, {"min_p": 0.1},
    {"repetition_penalty": 1.2, "top_k": 10},
])
def test_sampled_generation_matches_transformers_draw_for_draw(llama, settings):
    """Same processed logits and the same torch.multinomial call on the same seed: the same tokens."""
    hf, ours = llama
    prompt = torch.tensor([[5, 17, 3], [2, 2, 2]])
    torch.manual_seed(11)
    expected = hf_generate(hf, prompt, max_new_tokens=10, do_sample=True, eos_token_id=None,
                           top_k=settings.get("top_k", 0), **{k: v for k, v in settings.items() if k != "top_k"})
    torch.manual_seed(11)
    assert torch.equal(D.generate(ours, prompt, 10, do_sample=True, **settings), expected)


@pytest.mark.parametrize("num_beams,length_penalty,eos", [(1, 1.0, None), (3, 1.0, None), (4, 1.0, 7),
                                                           (4, 0.0, 7), (5, 2.0, 7), (2, 1.0, 11)])
def test_beam_search_matches_transformers(num_beams, length_penalty, eos):
    hf, ours = llama_pair(vocab=16, d=32, layers=2, heads=4, kv_heads=2, tie=True, seed=5)
    for prompt in ([[3, 1, 4]], [[9]], [[2, 6, 5, 3, 5]]):
        prompt = torch.tensor(prompt)
        expected = hf_generate(hf, prompt, max_new_tokens=12, num_beams=num_beams, do_sample=False,
                               length_penalty=length_penalty, early_stopping=False, eos_token_id=eos)
        got, score = beam_search(ours, prompt, 12, num_beams=num_beams, length_penalty=length_penalty,
                                   eos_id=eos)
        assert torch.equal(got, expected), (prompt, got, expected)
        n = got.shape[1] - prompt.shape[1]
        assert score == pytest.approx(D.sequence_logprob(ours, got, prompt.shape[1]).item() / n**length_penalty)


def test_beam_search_with_one_beam_is_greedy(llama):
    _, ours = llama
    prompt = torch.tensor([[4, 8, 15]])
    assert torch.equal(beam_search(ours, prompt, 9, num_beams=1)[0], D.generate(ours, prompt, 9))


def test_wider_beams_find_no_less_likely_sequence_on_this_instance(llama):
    """Without EOS all candidates have the same length. Not a theorem (a wider beam can prune the prefix that a
    narrower one kept), but on this instance each wider beam's best is at least as probable."""
    _, ours = llama
    prompt = torch.tensor([[1, 2, 3]])
    scores = [beam_search(ours, prompt, 6, num_beams=b)[1] for b in (1, 2, 4, 8)]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(scores))


def test_best_of_n_keeps_the_likeliest_of_the_same_samples(llama):
    """Best-of-N draws exactly what generate draws from the same generator, scores each sample by its mean
    log-probability (recomputed here token by token) and returns the argmax; N = 1 is plain sampling."""
    _, ours = llama
    prompt = torch.tensor([[4, 8, 15]])
    best, scores = best_of_n(ours, prompt, 6, 5, generator=torch.Generator().manual_seed(3), temperature=1.5)
    samples = D.generate(ours, prompt.expand(6, -1), 5, do_sample=True, temperature=1.5,
                         generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logp = ours(samples).double().log_softmax(-1)
    by_hand = [sum(logp[r, t - 1, samples[r, t]].item() for t in range(3, 8)) / 5 for r in range(6)]
    assert scores.tolist() == pytest.approx(by_hand, rel=1e-9)
    assert torch.equal(best[0], samples[max(range(6), key=by_hand.__getitem__)])
    assert len(set(map(tuple, samples.tolist()))) > 1  # the samples differ, so the choice matters
    one, _ = best_of_n(ours, prompt, 1, 5, generator=torch.Generator().manual_seed(3))
    assert torch.equal(one, D.generate(ours, prompt, 5, do_sample=True, generator=torch.Generator().manual_seed(3)))


def test_best_of_n_uses_the_given_scorer(llama):
    _, ours = llama
    prompt = torch.tensor([[1, 2, 3]])
    best, scores = best_of_n(ours, prompt, 8, 4, scorer=lambda ids, n: (ids[:, n:] == 7).sum(-1),
                             generator=torch.Generator().manual_seed(0))
    assert (best[0, 3:] == 7).sum() == scores.max()
    with pytest.raises(TypeError, match="scorer"):
        best_of_n(ours, prompt, 2, 3, scorer="likelihood")
    with pytest.raises(ValueError, match="eos_id"):
        best_of_n(ours, prompt, 2, 3, eos_id=1)
    with pytest.raises(ValueError, match="one prompt"):
        best_of_n(ours, [[1, 2], [3, 4]], 2, 3)


def test_generate_stops_rows_at_eos(llama):
    _, ours = llama
    prompt = torch.tensor([[5, 17, 3], [9, 9, 1]])
    free = D.generate(ours, prompt, 10)
    eos = free[0, 5].item()  # a token row 0 produces on its third step
    out = D.generate(ours, prompt, 10, eos_id=eos)
    row = out[0, 3:].tolist()
    first = row.index(eos)
    assert all(t == eos for t in row[first:])  # padded with eos after it ended


def test_sequence_logprob_by_hand(llama):
    _, ours = llama
    ids = torch.tensor([[4, 8, 15, 16, 23]])
    with torch.no_grad():
        logp = ours(ids).log_softmax(-1)
    expected = logp[0, 1, 15] + logp[0, 2, 16] + logp[0, 3, 23]
    assert D.sequence_logprob(ours, ids, 2).item() == pytest.approx(expected.item(), rel=1e-12)


# ----- bad input --------------------------------------------------------------------------------------------

def test_bad_settings_are_rejected(llama):
    _, ours = llama
    z = random_logits(0)
    with pytest.raises(ValueError, match="temperature must be"):
        D.apply_temperature(z, 0)
    with pytest.raises(ValueError, match="temperature must be"):
        D.generate(ours, [1, 2], 3, temperature=-1.0)  # checked even when not sampling
    with pytest.raises(ValueError, match="top_p must be in"):
        D.top_p_filter(z, 1.5)
    with pytest.raises(ValueError, match="top_p must be in"):
        D.generate(ours, [1, 2], 3, do_sample=True, top_p=0.0)
    with pytest.raises(ValueError, match="top_k must be an int >= 1"):
        D.top_k_filter(z, 0)
    with pytest.raises(ValueError, match="min_p must be in"):
        D.min_p_filter(z, -0.1)
    with pytest.raises(ValueError, match="repetition_penalty"):
        D.apply_repetition_penalty(z, torch.zeros(4, 1, dtype=torch.long), 0.0)
    with pytest.raises(ValueError, match=r"shape \(B, V\)"):
        D.greedy(torch.zeros(5))
    with pytest.raises(ValueError, match="max id 59"):
        D.generate(ours, [1, 60], 3)
    with pytest.raises(ValueError, match="prompt_ids must be"):
        D.generate(ours, [], 3)
    with pytest.raises(ValueError, match="num_beams"):
        beam_search(ours, [1, 2], 3, num_beams=0)
    with pytest.raises(ValueError, match="one prompt"):
        beam_search(ours, [[1, 2], [3, 4]], 3)
    with pytest.raises(ValueError, match="n must be"):
        D.distinct_n([[1, 2]], 0)
    with pytest.raises(ValueError, match="no 3-gram"):
        D.distinct_n([[1, 2]], 3)


def test_compare_strategies_rows(llama):
    _, ours = llama
    prompt = torch.tensor([[4, 8, 15]])
    strategies = {"greedy": {}, "beam": {"num_beams": 3}, "hot": {"do_sample": True, "temperature": 1.5}}
    rows = D.compare_strategies(ours, prompt, strategies, max_new_tokens=6, n_samples=5, seed=1)
    assert [r["name"] for r in rows] == ["greedy", "beam", "hot"]
    greedy, beam, hot = rows
    assert greedy["continuations"] == [D.generate(ours, prompt, 6)[0, 3:].tolist()]
    assert beam["continuations"] == [beam_search(ours, prompt, 6, num_beams=3)[0][0, 3:].tolist()]
    assert len(hot["continuations"]) == 5 and hot["distinct_1"] == D.distinct_n(hot["continuations"], 1)
    assert greedy["distinct_1"] == D.distinct_n(greedy["continuations"] * 5, 1)  # the same text, five times
    assert greedy["distinct_2_within"] == D.distinct_n(greedy["continuations"], 2)  # the one text on its own
    within = [len(set(zip(c[:-1], c[1:], strict=True))) / (len(c) - 1) for c in hot["continuations"]]
    assert hot["distinct_2_within"] == pytest.approx(sum(within) / len(within), rel=1e-12)
    again = D.compare_strategies(ours, prompt, {"hot": strategies["hot"]}, max_new_tokens=6, n_samples=5, seed=1)
    assert again[0]["continuations"] == hot["continuations"]  # seeded
    full = torch.tensor([[4, 8, 15, *greedy["continuations"][0]]])
    assert greedy["mean_logprob"] == pytest.approx(D.sequence_logprob(ours, full, 3).item() / 6)
    assert beam["mean_logprob"] >= greedy["mean_logprob"] - 1e-9  # beam search finds at least as likely a text
    assert hot["mean_logprob"] < greedy["mean_logprob"]  # hot samples are less likely under the model


def test_generate_with_a_cache_gives_the_same_tokens(llama):
    """With a cache, generate feeds only the new token after the first step; the text must not change."""
    _, ours = llama
    prompt = torch.tensor([[5, 17, 3, 42], [9, 9, 1, 33]])
    assert torch.equal(D.generate(ours, prompt, 8, cache=ListCache()), D.generate(ours, prompt, 8))
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    sampled = D.generate(ours, prompt, 8, do_sample=True, top_p=0.9, generator=g1, cache=ListCache())
    assert torch.equal(sampled, D.generate(ours, prompt, 8, do_sample=True, top_p=0.9, generator=g2))
    prefilled = ListCache()  # a cache that already holds the first two prompt tokens: only the rest is fed
    with torch.no_grad():
        ours(prompt[:, :2], cache=prefilled)
    assert torch.equal(D.generate(ours, prompt, 8, cache=prefilled), D.generate(ours, prompt, 8))


def test_out_of_range_and_meaningless_settings_are_rejected(llama):
    """An end token outside the vocabulary, a NaN length penalty and +inf logits used to pass silently."""
    _, ours = llama
    with pytest.raises(ValueError, match="eos_id"):
        D.generate(ours, [1, 2], 3, eos_id=99)  # the vocabulary has 60 tokens
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(ours, [1, 2], 3, length_penalty=float("nan"))
    with pytest.raises(ValueError, match="logits"):
        D.greedy(torch.tensor([[0.0, float("inf")]]))
    with pytest.raises(TypeError, match="prompt_ids"):
        D.generate(ours, "1 2 3", 3)
    with pytest.raises(TypeError, match="sequences"):
        D.distinct_n([1, 2, 3], 1)  # one sequence must still be wrapped in a list


def test_next_token_is_the_chain_generate_uses():
    z, ids = random_logits(5), torch.randint(0, 50, (4, 6), generator=torch.Generator().manual_seed(5))
    expected = D.apply_temperature(D.apply_repetition_penalty(z, ids, 1.3), 0.7)
    expected = D.min_p_filter(D.top_p_filter(D.top_k_filter(expected, 10), 0.9), 0.05)
    got = D.next_token(z, ids, do_sample=True, temperature=0.7, top_k=10, top_p=0.9, min_p=0.05,
                       repetition_penalty=1.3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(got, D.sample(expected, torch.Generator().manual_seed(1)))
    assert torch.equal(D.next_token(z, ids), D.greedy(z))
