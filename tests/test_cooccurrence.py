"""lmbook.cooccurrence against nltk's BigramCollocationFinder (PMI, with the exact relation between the two
normalisations) and against brute-force counting."""

import math
import random
import re

import numpy as np
import pytest
from lmbook.cooccurrence import STOPWORDS, collocations, cooccurrence_counts, pmi, ppmi, remove_stopwords
from nltk.collocations import BigramAssocMeasures, BigramCollocationFinder

SEED_TEXT = "The cat sat on the mat. The dog sat on the mat."
SEED_SENTENCES = [re.findall(r"[a-z]+", s.lower()) for s in SEED_TEXT.split(".") if s.strip()]


def random_sentences(seed, n=40, vocab=7):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    return [[rng.choice(words[: rng.randint(2, vocab)]) for _ in range(rng.randint(1, 9))] for _ in range(n)]


def brute_counts(sentences, window, symmetric):
    counts = {}
    for s in sentences:
        for i in range(len(s)):
            for j in range(i + 1, min(i + window, len(s))):
                for pair in [(s[i], s[j])] + ([(s[j], s[i])] if symmetric else []):
                    counts[pair] = counts.get(pair, 0) + 1
    return counts


def test_seed_table_counts_and_pmi_values():
    cooc = cooccurrence_counts(SEED_SENTENCES)
    order = ["the", "cat", "dog", "sat", "on", "mat"]
    table = [[cooc.count(x, y) for y in order] for x in order]
    assert table == [[0, 1, 1, 0, 0, 2], [0, 0, 0, 1, 0, 0], [0, 0, 0, 1, 0, 0],
                     [0, 0, 0, 0, 2, 0], [2, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]  # the seed's table (E15)
    assert cooc.n_tokens == 12 and cooc.n_pairs == 10
    M = pmi(cooc)
    at = lambda x, y: M[cooc.index[x], cooc.index[y]]  # noqa: E731
    assert at("the", "mat") == pytest.approx(math.log2(0.2 / (4 / 12 * 2 / 12)), abs=1e-12)  # 1.848
    pairs = [("the", "cat"), ("sat", "on"), ("on", "the")]
    assert [round(at(x, y), 2) for x, y in pairs] == [1.85, 2.85, 1.85]
    assert np.isneginf(M).sum() == 29 and at("mat", "the") == -np.inf
    across = cooccurrence_counts([SEED_SENTENCES[0] + SEED_SENTENCES[1]])  # one stream: a pair spans the "."
    assert across.count("mat", "the") == 1
    sym = cooccurrence_counts(SEED_SENTENCES, symmetric=True)
    assert pmi(sym)[sym.index["the"], sym.index["mat"]] == pytest.approx(math.log2(1.8), abs=1e-12)  # 0.848
    nats = pmi(cooc, base=math.e)
    assert nats[cooc.index["the"], cooc.index["mat"]] == pytest.approx(math.log(3.6), abs=1e-12)


@pytest.mark.parametrize("window", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pmi_matches_nltk_up_to_its_normalisation(window, seed):
    """nltk: log2(n / (w - 1) * N / (c1 c2)) with N tokens; ours: log2((n / pairs) / (c1/N c2/N)).

    The difference is the constant log2(N (w - 1) / pairs) for every pair: nltk divides the pair count by
    N (w - 1), which is the number of pairs only if the text wrapped around; we divide by the pairs counted.
    """
    sentences = random_sentences(seed)
    cooc = cooccurrence_counts(sentences, window=window)
    padded = [w for s in sentences for w in list(s) + [None] * (window - 1)]  # keep pairs inside sentences
    finder = BigramCollocationFinder.from_words(padded, window_size=window)
    scores = dict(finder.score_ngrams(BigramAssocMeasures.pmi))
    assert finder.N == cooc.n_tokens
    M = pmi(cooc)
    shift = math.log2(cooc.n_tokens * (window - 1) / cooc.n_pairs)
    assert len(scores) == cooc.counts.nnz
    for (x, y), value in scores.items():
        assert M[cooc.index[x], cooc.index[y]] - shift == pytest.approx(value, abs=1e-12)


def test_nltk_from_documents_is_the_window_2_case():
    sentences = random_sentences(5)
    finder = BigramCollocationFinder.from_documents(sentences)
    cooc = cooccurrence_counts(sentences)
    assert dict(finder.ngram_fd) == brute_counts(sentences, 2, False)
    assert {(x, y): cooc.count(x, y) for (x, y) in finder.ngram_fd} == dict(finder.ngram_fd)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("window", [2, 5])
def test_counts_match_brute_force(symmetric, window):
    sentences = random_sentences(window + symmetric)
    cooc = cooccurrence_counts(sentences, window=window, symmetric=symmetric)
    expected = brute_counts(sentences, window, symmetric)
    C = cooc.counts.tocoo()
    got = {(cooc.vocab[r], cooc.vocab[c]): int(v) for r, c, v in zip(C.row, C.col, C.data, strict=True)}
    assert got == expected
    assert cooc.n_tokens == sum(map(len, sentences))
    if symmetric:
        assert (cooc.counts != cooc.counts.T).nnz == 0


@pytest.mark.parametrize("marginals", ["unigram", "matrix"])
def test_pmi_ppmi_and_marginals_from_their_definitions(marginals):
    sentences = random_sentences(9)
    cooc = cooccurrence_counts(sentences, window=3)
    C = cooc.counts.toarray().astype(float)
    if marginals == "unigram":
        px = py = cooc.unigram / cooc.n_tokens
    else:
        px, py = C.sum(1) / C.sum(), C.sum(0) / C.sum()
    M = pmi(cooc, marginals=marginals)
    for x in range(C.shape[0]):
        for y in range(C.shape[1]):
            want = math.log2(C[x, y] / C.sum() / (px[x] * py[y])) if C[x, y] else -math.inf
            assert M[x, y] == pytest.approx(want, abs=1e-12)
    P = ppmi(cooc, marginals=marginals).toarray()
    assert np.allclose(P, np.maximum(M, 0), atol=1e-12, rtol=0)


def test_upper_bound_holds_for_matrix_marginals_and_can_fail_for_unigram_ones():
    for seed in range(5):
        cooc = cooccurrence_counts(random_sentences(seed), window=2)
        C = cooc.counts.toarray()
        px, py = C.sum(1) / C.sum(), C.sum(0) / C.sum()
        M = pmi(cooc, marginals="matrix")
        with np.errstate(divide="ignore"):
            bound = np.minimum(-np.log2(px)[:, None], -np.log2(py)[None, :])
        assert (M <= bound + 1e-12).all()
    seed = cooccurrence_counts(SEED_SENTENCES)
    p = seed.unigram / seed.n_tokens
    the, mat = seed.index["the"], seed.index["mat"]
    assert pmi(seed)[the, mat] > min(-math.log2(p[the]), -math.log2(p[mat]))  # the toy's sentence edges


def test_collocations_rank_by_pmi_with_a_count_floor():
    sentences = random_sentences(12, n=80)
    cooc = cooccurrence_counts(sentences)
    M = pmi(cooc)
    top = collocations(cooc, n=5, min_count=3)
    brute = sorted(((cooc.vocab[x], cooc.vocab[y], M[x, y], int(c)) for (x, y), c in
                    np.ndenumerate(cooc.counts.toarray()) if c >= 3), key=lambda t: (-t[2], t[0], t[1]))[:5]
    assert [(a, b, c) for a, b, _, c in top] == [(a, b, c) for a, b, _, c in brute]
    assert np.allclose([v for *_, v, _ in top], [v for *_, v, _ in brute], atol=1e-12)
    assert all(c >= 3 for *_, c in top)


def test_stopword_removal_keeps_sentences_apart():
    out = remove_stopwords(SEED_SENTENCES)
    assert out == [["cat", "sat", "mat"], ["dog", "sat", "mat"]]
    assert "the" in STOPWORDS and "cat" not in STOPWORDS
    cooc = cooccurrence_counts(out)
    assert cooc.count("sat", "mat") == 2 and cooc.count("mat", "dog") == 0


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: cooccurrence_counts("the cat sat"), TypeError, ["sentences", "list"]),
        (lambda: cooccurrence_counts(["the cat", "sat"]), TypeError, ["sentence", "str"]),
        (lambda: cooccurrence_counts([]), ValueError, ["empty"]),
        (lambda: cooccurrence_counts([[], []]), ValueError, ["empty"]),
        (lambda: cooccurrence_counts([["a", "b"]], window=1), ValueError, ["window", ">= 2", "1"]),
        (lambda: pmi(cooccurrence_counts([["a"], ["b"]])), ValueError, ["no pairs"]),
        (lambda: pmi(cooccurrence_counts([["a", "b"]]), base=1), ValueError, ["base", "1"]),
        (lambda: pmi(cooccurrence_counts([["a", "b"]]), marginals="rows"), ValueError, ["marginals", "rows"]),
        (lambda: pmi([[1, 0], [0, 1]]), TypeError, ["cooc", "list"]),
        (lambda: collocations(cooccurrence_counts([["a", "b"]]), min_count=0), ValueError, ["min_count"]),
        (lambda: remove_stopwords("the cat sat"), TypeError, ["sentences", "str"]),
        (lambda: remove_stopwords([["the", "cat"]], stopwords="the"), TypeError, ["stopwords", "str"]),
        (lambda: cooccurrence_counts([["a", "b"]], symmetric="yes"), TypeError, ["symmetric"]),
    ],
)
def test_bad_input_names_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for w in words:
        assert w in str(info.value)
