"""lmbook's chapter-6 modules (word2vec, fasttext, hierarchical_softmax, embeddings) against brute force: the
negative-sampling loss and its gradient written out with math, CBOW's softmax by hand, fastText's n-grams and
FNV-1a hash against published values, the hierarchical softmax against summing over every leaf, and SGNS's
optimum against shifted PMI (Levy & Goldberg 2014)."""

import math
import random

import numpy as np
import pytest
import torch
from lmbook import cooccurrence
from lmbook.embeddings import _shifted_pmi, fit_sgns_to_counts, train_word2vec
from lmbook.fasttext import char_ngrams, ngram_bucket
from lmbook.hierarchical_softmax import hierarchical_softmax_log_prob, huffman_code
from lmbook.word2vec import CBOW, SkipGram, build_vocab, cbow_examples, sgns_loss, skipgram_pairs


def log_sigmoid(x):
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def brute_sgns(center, positive, negatives):
    total = 0.0
    for b in range(len(center)):
        v = center[b].tolist()
        objective = log_sigmoid(sum(a * c for a, c in zip(v, positive[b].tolist(), strict=True)))
        for u in negatives[b].tolist():
            objective += log_sigmoid(-sum(a * c for a, c in zip(v, u, strict=True)))
        total += objective
    return -total / len(center)


@pytest.mark.parametrize("seed", range(10))
def test_sgns_loss_equals_brute_force(seed):
    g = torch.Generator().manual_seed(seed)
    B, K, d = 1 + seed, 1 + seed % 4, 3 + seed
    center, positive = torch.randn(B, d, generator=g, dtype=torch.float64), torch.randn(B, d, generator=g,
                                                                                          dtype=torch.float64)
    negatives = torch.randn(B, K, d, generator=g, dtype=torch.float64) * 3
    assert sgns_loss(center, positive, negatives).item() == pytest.approx(brute_sgns(center, positive, negatives),
                                                                          abs=1e-12)


def test_sgns_gradient_equals_the_analytic_formula():
    """d loss / d v = (s(u+.v) - 1) u+ + sum_k s(u_k.v) u_k, for one example."""
    g = torch.Generator().manual_seed(0)
    v = torch.randn(1, 5, generator=g, dtype=torch.float64, requires_grad=True)
    up, un = torch.randn(1, 5, generator=g, dtype=torch.float64), torch.randn(1, 3, 5, generator=g,
                                                                              dtype=torch.float64)
    sgns_loss(v, up, un).backward()
    s = torch.sigmoid
    expected = (s(up @ v[0].detach()) - 1) * up[0] + (s(un[0] @ v[0].detach())[:, None] * un[0]).sum(0)
    assert torch.allclose(v.grad[0], expected, atol=1e-12)


def test_negative_sampling_objective_adds_log_sigmoids():
    """Erratum E94: good / neutral / bad embeddings give -0.054 / -2.079 / -12.05 with the sum; the product
    of the two log terms would rank the bad embeddings best."""
    def objective(pos, neg):
        v = torch.ones(1, 1, dtype=torch.float64)
        return -sgns_loss(v, torch.tensor([[pos]], dtype=torch.float64),
                          torch.tensor([[[n] for n in neg]], dtype=torch.float64)).item()

    assert objective(4.0, [-4.0, -4.0]) == pytest.approx(-0.0544, abs=1e-4)
    assert objective(0.0, [0.0, 0.0]) == pytest.approx(-3 * math.log(2), abs=1e-12)
    assert objective(0.0, [0.0, 0.0]) == pytest.approx(-2.0794, abs=1e-4)
    assert objective(-4.0, [4.0, 4.0]) == pytest.approx(-12.0544, abs=1e-4)
    product = lambda pos, neg: log_sigmoid(pos) * sum(log_sigmoid(-n) for n in neg)  # noqa: E731
    assert product(-4.0, [4.0, 4.0]) > product(4.0, [-4.0, -4.0])


def test_sgns_loss_is_finite_for_huge_scores_and_checks_shapes():
    v = torch.full((1, 2), 100.0)
    assert torch.isfinite(sgns_loss(v, -v, v[:, None, :]))
    with pytest.raises(ValueError, match="negatives must be"):
        sgns_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="center and positive"):
        sgns_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2, 1, 3))


def test_skipgram_model_init_and_forward():
    model = SkipGram(10, 4)
    assert model.context.weight.abs().max() == 0 and model.center.weight.abs().max() <= 0.5 / 4
    torch.nn.init.normal_(model.context.weight)
    c, o, n = torch.tensor([1, 2]), torch.tensor([3, 4]), torch.tensor([[5, 6], [7, 8]])
    expected = sgns_loss(model.center(c), model.context(o), model.context(n))
    assert torch.equal(model(c, o, n), expected)
    with pytest.raises(ValueError, match="dim must be a positive int"):
        SkipGram(10, 0)


def test_cbow_equals_softmax_of_the_mean_context_by_hand():
    torch.manual_seed(0)
    model = CBOW(6, 3)
    torch.nn.init.normal_(model.output.weight)
    contexts, centres = torch.tensor([[1, 2, -1, 4], [0, -1, -1, -1]]), torch.tensor([3, 5])
    total = 0.0
    for ctx, y in zip(contexts.tolist(), centres.tolist(), strict=True):
        h = sum(model.center.weight[c] for c in ctx if c >= 0) / sum(c >= 0 for c in ctx)
        logits = model.output.weight @ h
        total += -(logits[y] - torch.logsumexp(logits, 0))
    assert model(contexts, centres).item() == pytest.approx(total.item() / 2, abs=1e-6)


def test_pairs_and_cbow_examples_equal_brute_force():
    rng = random.Random(0)
    sents = [np.array([rng.randrange(9) for _ in range(rng.randint(2, 8))]) for _ in range(20)]
    for window in (1, 2, 5):
        brute = sorted((int(s[i]), int(s[j])) for s in sents for i in range(len(s)) for j in range(len(s))
                       if 0 < abs(i - j) <= window)
        assert sorted(map(tuple, skipgram_pairs(sents, window).tolist())) == brute
        ctx, centres = cbow_examples(sents, window)
        k = 0
        for s in sents:
            for i in range(len(s)):
                want = [int(s[j]) if 0 <= j < len(s) else -1 for j in range(i - window, i + window + 1) if j != i]
                assert ctx[k].tolist() == want and centres[k] == s[i]
                k += 1


def test_build_vocab_orders_by_count_then_alphabet():
    words, counts = build_vocab([["b", "a", "c", "a"], ["c", "d"]], min_count=2)
    assert words == ["a", "c"] and counts.tolist() == [2, 2]
    with pytest.raises(ValueError, match="min_count"):
        build_vocab([["a"]], min_count=2)


def test_char_ngrams_match_the_papers_examples():
    """Erratum E95's list is right: 'playing' has 7 trigrams; 'where' is Bojanowski et al.'s example."""
    assert char_ngrams("playing", 3, 3) == ["<pl", "pla", "lay", "ayi", "yin", "ing", "ng>"]
    assert char_ngrams("where", 3, 3) == ["<wh", "whe", "her", "ere", "re>"]
    assert char_ngrams("a", 3, 6) == []  # "<a>" is the whole word, not one of its n-grams
    assert len(char_ngrams("playing", 3, 6)) == sum(len("<playing>") - n + 1 for n in range(3, 7))
    with pytest.raises(ValueError):
        char_ngrams("", 3, 6)
    with pytest.raises(ValueError, match="n_min"):
        char_ngrams("x", 4, 3)


def test_ngram_bucket_is_fasttexts_fnv1a():
    # textbook FNV-1a 32-bit test vectors (ASCII, where fastText's sign extension changes nothing)
    assert ngram_bucket("", 2**32) == 0x811C9DC5
    assert ngram_bucket("a", 2**32) == 0xE40C292C
    assert ngram_bucket("foobar", 2**32) == 0xBF9CF968
    assert ngram_bucket("test", 2**32) == 2949673445
    # bytes >= 0x80: fastText XORs the sign-extended byte, int32(int8(b)), into the hash
    def fasttext_hash(s):
        h = np.uint32(2166136261)
        for b in np.frombuffer(s.encode(), dtype=np.int8):
            h = np.uint32(h ^ np.uint32(np.int64(b) & 0xFFFFFFFF))
            h = np.uint32((int(h) * 16777619) & 0xFFFFFFFF)
        return int(h)

    for word in ["naïve", "列表", "<é>"]:
        assert ngram_bucket(word, 2**32) == fasttext_hash(word)
        assert ngram_bucket(word, 1000) == fasttext_hash(word) % 1000


def huffman_cost_reference(counts):
    """sum_i c_i len_i of an optimal prefix code = the sum of the merged weights (any tie-breaking)."""
    import heapq

    heap, cost = list(counts), 0
    heapq.heapify(heap)
    while len(heap) > 1:
        a, b = heapq.heappop(heap), heapq.heappop(heap)
        cost += a + b
        heapq.heappush(heap, a + b)
    return cost


@pytest.mark.parametrize("seed", range(10))
def test_huffman_code_is_optimal_and_prefix_free(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 100, size=int(rng.integers(2, 40))).tolist()
    paths, codes = huffman_code(counts)
    lengths = (paths >= 0).sum(1).tolist()
    assert sum(c * n for c, n in zip(counts, lengths, strict=True)) == huffman_cost_reference(counts)
    words = ["".join(map(str, row[row >= 0].tolist())) for row in codes]
    assert not any(a != b and b.startswith(a) for a in words for b in words)
    p = np.array(counts) / sum(counts)
    mean_length = float(p @ np.array(lengths))
    entropy = float(-(p * np.log2(p)).sum())
    assert entropy - 1e-12 <= mean_length < entropy + 1


def test_hierarchical_softmax_is_a_distribution_and_equals_the_path_product():
    counts = [50, 20, 20, 5, 3, 1, 1]
    paths, codes = huffman_code(counts)
    g = torch.Generator().manual_seed(0)
    nodes, h = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g,
                                                                               dtype=torch.float64)
    probs = torch.stack([hierarchical_softmax_log_prob(h, nodes, paths[w].expand(3, -1), codes[w].expand(3, -1))
                         for w in range(7)], 1).exp()
    assert torch.allclose(probs.sum(1), torch.ones(3, dtype=torch.float64), atol=1e-12)
    w = 5
    brute = math.prod(1 / (1 + math.exp(-(1 - 2 * c) * float(nodes[n] @ h[0])))
                      for n, c in zip(paths[w].tolist(), codes[w].tolist(), strict=True) if n >= 0)
    assert probs[0, w].item() == pytest.approx(brute, abs=1e-12)


def test_sgns_optimum_is_shifted_pmi_at_full_rank():
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 40, size=(7, 7))
    W, C = fit_sgns_to_counts(counts, dim=7, negatives=5, steps=3000)
    assert np.abs((W @ C.T).numpy() - _shifted_pmi(counts, 5)).max() < 1e-6
    low_W, low_C = fit_sgns_to_counts(counts, dim=1, negatives=5, steps=1000)
    assert np.abs((low_W @ low_C.T).numpy() - _shifted_pmi(counts, 5)).max() > 0.1  # rank 1 cannot


def test_shifted_pmi_agrees_with_chapter_2s_pmi():
    sents = [s.split() for s in ["a b c a b", "b c d", "a d d b", "c a b"]]
    cooc = cooccurrence.cooccurrence_counts(sents, window=3, symmetric=True)
    counts = cooc.counts.toarray()
    ours = _shifted_pmi(counts, 5)
    theirs = cooccurrence.pmi(cooc, base=math.e, marginals="matrix") - math.log(5)
    assert np.allclose(np.where(counts > 0, ours, 0), np.where(counts > 0, theirs, 0), atol=1e-12)


SENTENCES = [s.split() for s in [
    "the list holds items and the tuple holds items",
    "an iterator returns items from a list or a tuple",
    "raise an exception when the list is empty",
    "the exception is raised by the iterator",
] * 30]


@pytest.mark.parametrize("model", ["skipgram", "cbow", "fasttext"])
def test_training_is_deterministic_and_lowers_the_loss(model):
    a = train_word2vec(SENTENCES, model=model, dim=8, epochs=4, min_count=1, subsample=0, batch_size=64)
    b = train_word2vec(SENTENCES, model=model, dim=8, epochs=4, min_count=1, subsample=0, batch_size=64)
    assert np.array_equal(a.vectors, b.vectors)
    assert a.losses[-1] < a.losses[0]
    neighbours = a.nearest("list", 3)
    assert len(neighbours) == 3 and "list" not in [w for w, _ in neighbours]
    assert neighbours[0][1] == pytest.approx(a.similarity("list", neighbours[0][0]), abs=1e-5)


def test_cbow_held_out_loss_is_the_untrained_cross_entropy_and_then_falls():
    # the output matrix starts at zero, so before any real update every logit is 0 and the loss is log V
    frozen = train_word2vec(SENTENCES, model="cbow", dim=8, epochs=1, min_count=1, subsample=0, lr=1e-12,
                            held_out=SENTENCES[:3])
    assert frozen.held_out_losses == [pytest.approx(math.log(len(frozen.words)), abs=1e-6)]
    trained = train_word2vec(SENTENCES, model="cbow", dim=8, epochs=4, min_count=1, subsample=0, batch_size=64,
                             held_out=SENTENCES[:3])
    assert len(trained.held_out_losses) == 4 and trained.held_out_losses[-1] < trained.held_out_losses[0]
    with pytest.raises(ValueError, match="held_out is measured for model='cbow' only"):
        train_word2vec(SENTENCES, model="skipgram", epochs=1, min_count=1, held_out=SENTENCES[:3])


def test_fasttext_gives_unseen_words_a_vector_and_word2vec_refuses():
    ft = train_word2vec(SENTENCES, model="fasttext", dim=8, epochs=2, min_count=1, batch_size=64)
    assert ft.vector("lists").shape == (8,) and "lists" not in ft.index
    grams = [ngram_bucket(g, ft.config.buckets) for g in char_ngrams("lists", ft.config.n_min, ft.config.n_max)]
    assert np.allclose(ft.vector("lists"), ft.ngram_vectors[grams].mean(0))
    sg = train_word2vec(SENTENCES, model="skipgram", dim=8, epochs=1, min_count=1, batch_size=64)
    with pytest.raises(ValueError, match="'lists' is not in the vocabulary"):
        sg.nearest("lists")


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="unknown option 'dims'"):
        train_word2vec(SENTENCES, dims=8)
    with pytest.raises(ValueError, match="model must be"):
        train_word2vec(SENTENCES, model="glove")
    wv = train_word2vec(SENTENCES, dim=4, epochs=1, min_count=1, batch_size=64)
    with pytest.raises(ValueError, match="k must be a positive int"):
        wv.nearest("list", 0)


# ----- analogies and the association test, against plain loops ---------------------------------------------------

def _cos(u, v):
    norms = math.sqrt(sum(a * a for a in u)) * math.sqrt(sum(b * b for b in v))
    return sum(a * b for a, b in zip(u, v, strict=True)) / norms


def test_analogy_matches_brute_force_3cosadd():
    from lmbook.embedding_eval import analogy

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(30, 6)) * rng.uniform(0.2, 5, size=(30, 1))  # lengths must not matter
    for a, b, c in [(0, 1, 2), (5, 9, 11), (29, 3, 17)]:
        unit = [list(v / np.linalg.norm(v)) for v in vectors]
        target = [unit[b][j] - unit[a][j] + unit[c][j] for j in range(6)]
        scores = {i: _cos(vectors[i], target) for i in range(30) if i not in (a, b, c)}
        expected = sorted(scores, key=lambda i: -scores[i])[:3]
        assert analogy(vectors, a, b, c, k=3) == expected


def test_analogy_solves_a_planted_offset():
    from lmbook.embedding_eval import analogy

    rng = np.random.default_rng(0)
    base, offset = rng.normal(size=(10, 8)), rng.normal(size=8)
    vectors = np.concatenate([base, base + offset])  # word i and word i + 10 differ by the same offset
    assert analogy(vectors, 0, 10, 3) == [13]


def naive_weat(x, y, a, b):
    def s(w):
        return sum(_cos(w, v) for v in a) / len(a) - sum(_cos(w, v) for v in b) / len(b)

    sx, sy = [s(w) for w in x], [s(w) for w in y]
    every = sx + sy
    mean = sum(every) / len(every)
    std = math.sqrt(sum((v - mean) ** 2 for v in every) / (len(every) - 1))
    effect = (sum(sx) / len(sx) - sum(sy) / len(sy)) / std
    observed = sum(sx) - sum(sy)
    n, count, bigger = len(every), 0, 0
    for mask in range(2 ** n):  # every subset of size |X| as X'
        members = [i for i in range(n) if mask >> i & 1]
        if len(members) != len(x):
            continue
        count += 1
        stat = sum(every[i] for i in members) - sum(every[i] for i in range(n) if i not in members)
        bigger += stat >= observed - 1e-12
    return effect, bigger / count


def test_weat_matches_a_naive_implementation():
    from lmbook.embedding_eval import weat_scores, weat_test

    rng = np.random.default_rng(1)
    for n_x, n_y in [(3, 3), (4, 5), (6, 6)]:
        x, y = rng.normal(size=(n_x, 5)), rng.normal(size=(n_y, 5))
        a, b = rng.normal(size=(4, 5)), rng.normal(size=(3, 5))
        assert weat_test(x, y, a, b) == pytest.approx(naive_weat(x.tolist(), y.tolist(), a.tolist(), b.tolist()))
        s = weat_scores(x, a, b)
        assert s[0] == pytest.approx(np.mean([_cos(x[0], v) for v in a]) - np.mean([_cos(x[0], v) for v in b]))


def test_weat_finds_a_planted_association_and_not_a_random_one():
    from lmbook.embedding_eval import weat_test

    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(6, 10)), rng.normal(size=(6, 10))
    x = a.mean(0) + 0.3 * rng.normal(size=(6, 10))  # X built near A, Y near B
    y = b.mean(0) + 0.3 * rng.normal(size=(6, 10))
    effect, p = weat_test(x, y, a, b)
    assert effect > 1.5 and p < 0.01
    effect, p = weat_test(y, x, a, b)  # swapped: the association runs the other way
    assert effect < -1.5 and p > 0.99
