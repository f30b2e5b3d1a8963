"""lmbook.ngram against brute force: probabilities recomputed by scanning the corpus, and normalisation
checked by enumerating the whole vocabulary."""

import math
import random

import numpy as np
import pytest
import torch
from lmbook.ngram import BOS, EOS, UNK, NeuralNGramLM, NGramLM, interpolation_weights

TOY = [s.split() for s in ["the cat sat on the mat", "the dog sat on the mat", "a cat saw the dog"]]


def random_corpus(seed, n_sent=25, vocab=8):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    return [[rng.choice(words[: rng.randint(2, vocab)]) for _ in range(rng.randint(1, 9))] for _ in range(n_sent)]


def padded(sentences, n):
    return [[BOS] * (n - 1) + s + [EOS] for s in sentences]


def count(sentences, n, gram):
    """c(gram): occurrences of the tuple ``gram`` as a predicted n-gram, found by scanning."""
    m = len(gram)
    return sum(tuple(p[i - m + 1:i + 1]) == gram for p in padded(sentences, n) for i in range(n - 1, len(p)))


def brute_kn(sentences, n, w, h, D, V):
    """Interpolated Kneser-Ney from its definition, with every count found by scanning the corpus."""
    grams = {tuple(p[i - m + 1:i + 1]) for p in padded(sentences, n) for i in range(n - 1, len(p))
             for m in range(1, n + 1)}

    def level(w, h, m):
        lower = level(w, h[1:], m - 1) if m > 1 else 1 / V
        if m == n:
            c = lambda g: count(sentences, n, g)  # noqa: E731
        else:  # continuation count: distinct left extensions of g
            c = lambda g: len({x[0] for x in grams if len(x) == len(g) + 1 and x[1:] == g})  # noqa: E731
        followers = {x[-1] for x in grams if len(x) == m and x[:-1] == h}
        total = sum(c(h + (v,)) for v in followers)
        if total == 0:
            return lower
        return max(c(h + (w,)) - D, 0) / total + D * len(followers) / total * lower

    return level(w, h, n)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_kneser_ney_matches_brute_force(n, seed):
    corpus = random_corpus(seed)
    lm = NGramLM(n, "kneser-ney", discount=0.75).fit(corpus)
    rng = random.Random(seed)
    for _ in range(15):
        ctx = tuple(rng.choice(lm.vocab[:-2] + [BOS]) for _ in range(n - 1))
        if BOS in ctx:  # <s> only ever appears as a prefix of the context
            ctx = (BOS,) * (ctx.index(BOS) + 1) + ctx[ctx.index(BOS) + 1:]
        w = rng.choice(lm.vocab)
        assert lm.prob(w, ctx) == pytest.approx(brute_kn(corpus, n, w, ctx, 0.75, len(lm.vocab)), rel=1e-12)


@pytest.mark.parametrize("smoothing", ["add-k", "kneser-ney"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_every_distribution_sums_to_one(smoothing, n):
    lm = NGramLM(n, smoothing, k=0.3).fit(random_corpus(n))
    for ctx in [(), ("w0",), ("w1", "w2"), ("unseen", "words", "here"), (BOS, "w3")]:
        assert sum(lm.distribution(ctx).values()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("n,k", [(1, 1.0), (2, 1.0), (2, 0.1), (3, 0.5)])
def test_add_k_and_mle_match_counting(n, k):
    corpus = random_corpus(5)
    add_k, mle = NGramLM(n, "add-k", k=k).fit(corpus), NGramLM(n, "mle").fit(corpus)
    V = len(add_k.vocab)
    for h in [(), ("w1",), ("w0", "w1"), (BOS, "w2")]:
        h = ((BOS,) * (n - 1) + tuple(h))[-(n - 1):] if n > 1 else ()
        c_h = sum(count(corpus, n, h + (v,)) for v in add_k.vocab)
        for w in add_k.vocab:
            c_hw = count(corpus, n, h + (w,))
            assert add_k.prob(w, h) == pytest.approx((c_hw + k) / (c_h + k * V), rel=1e-12)
            assert mle.prob(w, h) == pytest.approx(c_hw / c_h if c_h else 0.0, rel=1e-12)


def test_bigram_mle_on_the_seed_corpus():
    lm = NGramLM(2, "mle").fit(TOY)
    assert lm.prob("cat", ["the"]) == pytest.approx(1 / 5)  # c(the cat) = 1, c(the) = 5
    assert lm.prob("sat", ["cat"]) == pytest.approx(1 / 2)
    assert lm.prob("the", [BOS]) == pytest.approx(2 / 3)
    assert lm.prob("mat", ["dog"]) == 0.0
    assert lm.perplexity([["the", "dog", "sat"]]) == math.inf  # "sat </s>" was never seen


def test_perplexity_is_token_weighted_and_counts_end_symbols():
    lm = NGramLM(2, "kneser-ney").fit(TOY)
    test = [["the", "cat", "sat"], ["a", "dog"]]
    logp, count_ = lm.log_likelihood(test)
    assert count_ == 3 + 1 + 2 + 1
    manual = sum(math.log(lm.prob(w, s[:i])) for s in test for i, w in enumerate(s + [EOS]))
    assert logp == pytest.approx(manual)
    assert lm.perplexity(test) == pytest.approx(math.exp(-manual / 7))


def test_unknown_words_map_to_unk_and_min_count():
    lm = NGramLM(1, "add-k", min_count=2).fit(TOY)
    assert "saw" not in lm.vocab and UNK in lm.vocab and EOS in lm.vocab and BOS not in lm.vocab
    assert lm.prob("saw") == lm.prob("zebra") == lm.prob(UNK)


def test_higher_order_kn_fits_training_data_better():
    corpus = random_corpus(3, n_sent=200)
    ppl = [NGramLM(n, "kneser-ney").fit(corpus).perplexity(corpus) for n in (1, 2, 3)]
    assert ppl[0] > ppl[1] > ppl[2]


def test_generate_is_reproducible_and_stays_in_vocabulary():
    lm = NGramLM(3, "kneser-ney").fit(TOY)
    a, b = lm.generate(12, seed=4), lm.generate(12, seed=4)
    assert a == b and len(a) <= 12 and set(a) <= set(lm.vocab) - {EOS}


@pytest.mark.parametrize("call,match", [
    (lambda: NGramLM(0), "n must be"),
    (lambda: NGramLM(2, "laplace"), "smoothing must be one of"),
    (lambda: NGramLM(2, "add-k", k=0), "k must be"),
    (lambda: NGramLM(2, discount=1.5), "discount"),
    (lambda: NGramLM(2).fit([]), "empty"),
    (lambda: NGramLM(2).fit([[], []]), "empty"),
    (lambda: NGramLM(2).fit(["the cat"]), "list of words"),
    (lambda: NGramLM(2).prob("the"), "not trained"),
    (lambda: NGramLM(2).fit(TOY).prob("cat", "the"), "not a str"),
    (lambda: NGramLM(2).fit(TOY).generate(0), "max_words"),
    (lambda: NGramLM(2).fit(TOY).generate(5, context="the cat"), "context must be a list of words"),
    (lambda: NGramLM(2).fit(TOY).log_likelihood([["the", 1]]), r"sentences\[0\]\[1\] must be a str"),
    (lambda: NeuralNGramLM(5, n=3)(torch.tensor([[0, 9]])), r"context_ids must hold token ids in \[0, 5\]"),
])
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# ----- simple linear interpolation ---------------------------------------------------------------------------

@pytest.mark.parametrize("n,seed", [(1, 0), (2, 1), (3, 2)])
def test_order_probs_match_counting(n, seed):
    """Column m is c(h_m, w) / c(h_m) found by scanning the corpus, or column m-1 for an unseen context."""
    train, held_out = random_corpus(seed), random_corpus(seed + 100, n_sent=6)
    lm = NGramLM(n, smoothing="mle").fit(train)
    probs = lm.order_probs(held_out)
    rows = [(p[:i], p[i]) for p in padded(held_out, n) for i in range(n - 1, len(p))]
    assert probs.shape == (len(rows), n + 1)
    V = len(lm.vocab)
    for (before, w), row in zip(rows, probs, strict=True):
        expected = [1 / V]
        for m in range(1, n + 1):
            h = tuple(before[len(before) - m + 1:]) if m > 1 else ()
            c_h = sum(count(train, n, h + (x,)) for x in lm.vocab)
            expected.append(count(train, n, h + (w,)) / c_h if c_h else expected[-1])
        assert row.tolist() == pytest.approx(expected)


def test_interpolated_columns_are_distributions():
    """Every column of order_probs, and so every mixture, sums to 1 over the vocabulary for any context."""
    lm = NGramLM(3, smoothing="mle").fit(TOY)
    for context in (["the", "cat"], ["on", "the"], ["dog", "ran"], []):
        table = lm.order_probs([context + [w] for w in lm.vocab if w != EOS] + [context])
        # the rows of interest are those that predict the last word of each probe sentence
        lengths = [len(context) + 1] * (len(lm.vocab) - 1) + [len(context)]
        ends = [sum(x + 1 for x in lengths[:i + 1]) - 1 for i in range(len(lengths))]
        last_word_rows = [e - 1 for e in ends[:-1]] + [ends[-1]]
        assert table[last_word_rows].sum(axis=0) == pytest.approx([1.0] * 4)


def brute_force_weights(probs, step=0.01):
    """The held-out-likelihood maximum over a grid of the 2-simplex: an independent check of EM."""
    best, best_ll = None, -math.inf
    for i in range(int(round(1 / step)) + 1):
        for j in range(int(round(1 / step)) + 1 - i):
            lam = [i * step, j * step, 1 - (i + j) * step]
            mix = [sum(weight * p for weight, p in zip(lam, row, strict=True)) for row in probs]
            if min(mix) <= 0:
                continue
            ll = sum(math.log(x) for x in mix)
            if ll > best_ll:
                best, best_ll = lam, ll
    return best


def test_interpolation_weights_find_the_held_out_maximum():
    lm = NGramLM(2, smoothing="mle").fit(random_corpus(3))
    probs = lm.order_probs(random_corpus(4, n_sent=10))
    em = interpolation_weights(probs, iters=500)
    assert em.sum() == pytest.approx(1.0) and (em >= 0).all()
    assert em.tolist() == pytest.approx(brute_force_weights(probs.tolist()), abs=0.011)


def test_interpolation_weights_raise_the_likelihood_every_step():
    lm = NGramLM(3, smoothing="mle").fit(random_corpus(5))
    probs = lm.order_probs(random_corpus(6, n_sent=10))
    lls = [float(np.log(probs @ interpolation_weights(probs, iters=t)).sum()) for t in range(1, 20)]
    assert all(b >= a - 1e-12 for a, b in zip(lls[:-1], lls[1:], strict=True))
    assert lls[-1] > lls[0]
