"""lmbook.speculative: the acceptance rule gives exactly p (closed form against an enumeration, and by
sampling), the expected tokens per pass against an enumeration of accept patterns, prompt lookup against
transformers' PromptLookupCandidateGenerator, greedy speculative decoding against plain greedy decoding (the
tiny model, and transformers' prompt-lookup generate on a random Llama with the same weights), and
KVCache.crop against transformers' DynamicCache.crop."""

import itertools
import random

import pytest
import torch
from lmbook import decoding as D
from lmbook import kv_cache as KV
from lmbook import pretrained as PT
from lmbook import speculative as S
from test_model import llama_pair

transformers = pytest.importorskip("transformers")


def _random_pq(seed, V=6):
    g = torch.Generator().manual_seed(seed)
    p, q = torch.rand(V, generator=g, dtype=torch.float64) ** 3, torch.rand(V, generator=g, dtype=torch.float64) ** 3
    if seed % 3 == 0:
        p[seed % V] = 0  # zero entries on either side
        q[(seed + 1) % V] = 0
    return p / p.sum(), q / q.sum()


def _enumerated_output(p, q):
    """P(output = y) by enumerating the drafted x and the two branches, with plain Python floats."""
    V = len(p)
    p, q = p.tolist(), q.tolist()
    excess = [max(0.0, p[y] - q[y]) for y in range(V)]
    out = [0.0] * V
    for x in range(V):
        if q[x] == 0:
            continue
        accept = min(1.0, p[x] / q[x])
        out[x] += q[x] * accept
        for y in range(V):  # rejected: draw from the excess of p over q
            out[y] += q[x] * (1 - accept) * excess[y] / sum(excess)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("seed", range(12))
def test_output_distribution_is_exactly_p(seed):
    p, q = _random_pq(seed)
    torch.testing.assert_close(_enumerated_output(p, q), p, atol=1e-12, rtol=0)
    torch.testing.assert_close(S.output_distribution(p, q), p, atol=1e-12, rtol=0)
    torch.testing.assert_close(S.output_distribution(p, p), p, atol=1e-12, rtol=0)


def test_verify_draft_samples_p():
    p, q = _random_pq(4)
    g = torch.Generator().manual_seed(0)
    n = 40000
    counts = torch.zeros(6, dtype=torch.float64)
    accepted = 0
    for _ in range(n):
        x = int(torch.multinomial(q, 1, generator=g))
        y, ok = S.verify_draft(p, q, x, generator=g)
        counts[y] += 1
        accepted += ok
    se = (p * (1 - p) / n).sqrt()
    assert ((counts / n - p).abs() <= 5 * se + 1e-9).all()  # 5 standard errors per entry
    alpha = torch.minimum(p, q).sum().item()  # acceptance rate: sum_x min(p(x), q(x))
    assert abs(accepted / n - alpha) < 5 * (alpha * (1 - alpha) / n) ** 0.5
    assert 0.2 < alpha < 0.95  # a real mix of acceptances and rejections


@pytest.mark.parametrize("alpha,k", [(0.0, 3), (0.3, 1), (0.6, 4), (0.9, 8), (1.0, 5)])
def test_expected_tokens_per_pass_against_enumeration(alpha, k):
    expected = 0.0
    for pattern in itertools.product([True, False], repeat=k):  # each draft accepted or not, independently
        prob = 1.0
        for ok in pattern:
            prob *= alpha if ok else 1 - alpha
        kept = next((i for i, ok in enumerate(pattern) if not ok), k)  # the accepted prefix
        expected += prob * (kept + 1)  # plus the target's own token
    assert S.expected_tokens_per_pass(alpha, k) == pytest.approx(expected, abs=1e-12)
    rng = random.Random(k)  # and a simulation
    sim = sum(next((i for i in range(k) if rng.random() >= alpha), k) + 1 for _ in range(20000)) / 20000
    assert abs(sim - expected) < 0.1


def test_prompt_lookup_matches_transformers():
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.randint(0, 5) for _ in range(rng.randint(1, 25))]
        k, n = rng.randint(1, 6), rng.randint(1, 4)
        hf = PromptLookupCandidateGenerator(num_output_tokens=k, max_matching_ngram_size=n, max_length=1000)
        candidates, _ = hf.get_candidates(torch.tensor([ids]))
        assert S.prompt_lookup_draft(ids, k, n) == candidates[0, len(ids):].tolist(), (ids, k, n)
    assert S.prompt_lookup_draft([5, 6, 7, 8, 5, 6], 2) == [7, 8]
    assert S.prompt_lookup_draft([1, 2, 3], 4) == []


def test_crop_matches_transformers_dynamic_cache():
    hf, ours = llama_pair(kv_heads=2, layers=2)
    ids = torch.randint(0, 50, (1, 11), generator=torch.Generator().manual_seed(2))
    hf_cache, cache = transformers.DynamicCache(config=hf.config), KV.KVCache.for_model(ours, max_len=11)
    with torch.no_grad():
        hf(input_ids=ids, past_key_values=hf_cache, use_cache=True)
        ours(ids, cache=cache)
    hf_cache.crop(-4)  # transformers 5: a negative count removes that many tokens
    cache.crop(7)
    assert cache.seq_len == hf_cache.get_seq_length() == 7
    for layer in range(2):
        torch.testing.assert_close(cache.get(layer)[0], hf_cache.layers[layer].keys, atol=1e-6, rtol=0)
    with torch.no_grad():  # decoding continues as if the cropped tokens had never been seen
        torch.testing.assert_close(ours(ids[:, 7:9], cache=cache), ours(ids[:, :9])[:, 7:], atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="n"):
        cache.crop(-1)


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_speculative_equals_greedy_on_the_tiny_model(k):
    tiny, _ = PT.load_tiny()
    _, _, val = PT.word_corpus()
    prompt = val[:60]
    out, stats = S.speculative_generate(tiny, prompt, 30, k=k)
    assert torch.equal(out, D.generate(tiny, prompt, 30, use_cache=True)[0])
    assert stats["accepted"] <= stats["drafted"] <= k * (stats["target_passes"] - 1)
    assert stats["target_passes"] + stats["accepted"] == 30 + 0  # each pass gives 1 token plus its accepted drafts
    assert stats["accepted"] > 0  # the manual repeats itself: some drafts were right


def test_speculative_equals_transformers_prompt_lookup_generate():
    hf, ours = llama_pair(kv_heads=2)
    prompt = torch.tensor([3, 14, 15, 9, 2, 6, 3, 14, 15, 9, 2, 6, 3, 14])
    theirs = hf.generate(prompt[None], attention_mask=torch.ones(1, len(prompt), dtype=torch.long), max_new_tokens=20,
                         do_sample=False, prompt_lookup_num_tokens=4, eos_token_id=None, pad_token_id=0)[0]
    out, stats = S.speculative_generate(ours, prompt, 20, k=4)
    assert torch.equal(out, theirs) and torch.equal(out, D.generate(ours, prompt, 20)[0])
    assert stats["target_passes"] + stats["accepted"] == 20


def test_bad_input():
    p, q = _random_pq(1)
    with pytest.raises(ValueError, match="q must be a probability vector"):
        S.output_distribution(p, q * 2)
    with pytest.raises(ValueError, match="alpha"):
        S.expected_tokens_per_pass(1.5, 3)
    with pytest.raises(TypeError, match="drafter"):
        S.speculative_generate(PT.load_tiny()[0], torch.tensor([1, 2]), 3, drafter="lookup")

