"""lmbook.retrieval, lmbook.bm25 and lmbook.ranking against scikit-learn (TF-IDF), rank_bm25 and bm25s
(BM25, float64), torchmetrics (precision@k, recall@k, MRR) and brute force (RRF, the readable BM25 path)."""

import itertools
import random
import unicodedata
import warnings

import bm25s
import numpy as np
import pytest
import torch
from lmbook.bm25 import BM25, BM25_VARIANTS, bm25_idf, bm25_scores, bm25_tf
from lmbook.ranking import manual_queries, precision_at_k, recall_at_k, reciprocal_rank, reciprocal_rank_fusion
from lmbook.retrieval import TfIdf, inverse_document_frequency, tf_idf, tokenize
from rank_bm25 import BM25Okapi, BM25Plus
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity
from torchmetrics.retrieval import RetrievalMRR, RetrievalPrecision, RetrievalRecall

RTOL = 1e-9  # float64 everywhere; the libraries sum in a different order, so not bit-identical


def random_corpus(seed, n_docs=30, vocab=12, max_len=15, empty_doc=False):
    """Documents drawn from a skewed vocabulary: repeated tokens, tied lengths, terms in > half the docs."""
    rng = random.Random(seed)
    words = [f"t{i}" for i in range(vocab)]
    weights = [1 / (i + 1) for i in range(vocab)]
    docs = [rng.choices(words, weights, k=rng.randint(1, max_len)) for _ in range(n_docs)]
    if empty_doc:
        docs[3] = []
    return docs


def random_queries(seed, n=15):
    rng = random.Random(seed)
    words = [f"t{i}" for i in range(14)]  # t12, t13 never occur in the corpus
    return [rng.choices(words, k=rng.randint(1, 5)) for _ in range(n)]


def sklearn_tfidf(docs, **kwargs):
    vec = TfidfVectorizer(analyzer=lambda d: d, norm=kwargs.pop("norm", None), **kwargs)
    X = vec.fit_transform(docs)
    return vec, X


# ----- TF-IDF ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "tf, idf, sk",
    [
        ("raw", "smooth+1", dict(smooth_idf=True)),
        ("raw", "plain+1", dict(smooth_idf=False)),
        ("sublinear", "smooth+1", dict(sublinear_tf=True)),
        ("sublinear", "plain+1", dict(sublinear_tf=True, smooth_idf=False)),
        ("boolean", "smooth+1", dict(binary=True)),
        ("raw", "smooth+1", dict(norm="l2")),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_tf_idf_matches_sklearn(tf, idf, sk, seed):
    docs = random_corpus(seed, empty_doc=True)
    norm = sk.get("norm")
    vec, X = sklearn_tfidf(docs, **dict(sk))
    vocab, W = tf_idf(docs, tf=tf, idf=idf, norm=norm)
    assert vocab == list(vec.get_feature_names_out())
    assert W.shape == X.shape and W.format == "csr"
    np.testing.assert_allclose(W.toarray(), X.toarray(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("tf", ["raw", "relative", "log", "sublinear", "boolean", "augmented"])
@pytest.mark.parametrize("idf", ["plain", "smooth", "plain+1", "smooth+1", "lucene"])
def test_every_tf_and_idf_variant_from_sklearn_counts(tf, idf):
    """The variants sklearn lacks are built from its counts and its idf_ (textbook idf = idf_ - 1)."""
    docs = random_corpus(3, empty_doc=True)
    F = CountVectorizer(analyzer=lambda d: d).fit_transform(docs).toarray().astype(float)
    N, df = F.shape[0], (F > 0).sum(0)
    idf_smooth1 = sklearn_tfidf(docs, smooth_idf=True)[0].idf_
    idf_plain1 = sklearn_tfidf(docs, smooth_idf=False)[0].idf_
    idf_vec = {"plain": idf_plain1 - 1, "smooth": idf_smooth1 - 1, "plain+1": idf_plain1,
               "smooth+1": idf_smooth1, "lucene": np.log(1 + (N - df + 0.5) / (df + 0.5))}[idf]
    with np.errstate(divide="ignore", invalid="ignore"):
        lengths, peak = F.sum(1, keepdims=True), F.max(1, keepdims=True)
        tf_mat = {"raw": F, "relative": F / lengths, "log": np.log1p(F), "sublinear": 1 + np.log(F),
                  "boolean": (F > 0) * 1.0, "augmented": 0.5 + 0.5 * F / peak}[tf]
    expected = np.where(F > 0, tf_mat, 0.0) * idf_vec
    np.testing.assert_allclose(tf_idf(docs, tf=tf, idf=idf)[1].toarray(), expected, rtol=1e-12, atol=1e-12)


def test_idf_by_hand_and_the_e16_e18_numbers():
    assert inverse_document_frequency([1000], 10_000_000, "plain")[0] == pytest.approx(np.log(1e4))  # 9.2103
    assert inverse_document_frequency([1], 10, "plain")[0] == pytest.approx(np.log(10))
    n = np.array([1, 5, 8, 9, 10])
    assert (inverse_document_frequency(n, 10, "lucene") > 0).all()
    rsj = np.log((10 - n + 0.5) / (n + 0.5))
    assert (rsj[-2:] < 0).all() and rsj[-2] == pytest.approx(-1.8458, abs=1e-4)


@pytest.mark.parametrize("tf, idf, sk", [("raw", "smooth+1", {}),
                                         ("sublinear", "plain+1", dict(sublinear_tf=True, smooth_idf=False))])
def test_tfidf_cosine_ranking_matches_sklearn(tf, idf, sk):
    docs = random_corpus(4, empty_doc=True)
    vec, X = sklearn_tfidf(docs, norm="l2", **sk)
    engine = TfIdf(tf=tf, idf=idf).index(docs)
    for q in random_queries(4):
        known = [t for t in q if t in vec.vocabulary_]
        if not known:
            continue
        expected = cosine_similarity(vec.transform([known]), X).ravel()
        np.testing.assert_allclose(engine.get_scores(q), expected, rtol=1e-12, atol=1e-12)
        hits = engine.search(q, k=5)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


# ----- BM25 --------------------------------------------------------------------------------------------

# k1 = 0 is left out here: rank_bm25 computes 0/0 = nan for documents without the term (we give them 0);
# k1 = 0 is covered by the readable-path test below.
@pytest.mark.parametrize("k1, b, epsilon", [(1.5, 0.75, 0.25), (1.2, 0.3, 0.5), (2.0, 1.0, 0.0),
                                            (0.4, 0.5, 0.25)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_okapi_matches_rank_bm25(k1, b, epsilon, seed):
    docs = random_corpus(seed)
    oracle = BM25Okapi(docs, k1=k1, b=b, epsilon=epsilon)
    ours = BM25(k1=k1, b=b, variant="okapi", epsilon=epsilon).index(docs)
    assert (ours.df > len(docs) / 2).any(), "the corpus must exercise rank_bm25's epsilon floor"
    for q in random_queries(seed):
        np.testing.assert_allclose(_quiet_scores(ours, q), oracle.get_scores(q), rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("delta", [0.5, 1.0, 0.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_bm25plus_matches_rank_bm25(delta, seed):
    docs = random_corpus(seed + 10)
    oracle = BM25Plus(docs, k1=1.3, b=0.6, delta=delta)
    ours = BM25(k1=1.3, b=0.6, variant="bm25+", delta=delta).index(docs)
    for q in random_queries(seed):
        np.testing.assert_allclose(_quiet_scores(ours, q), oracle.get_scores(q), rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("variant", ["robertson", "lucene", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize("k1, b, delta", [(1.5, 0.75, 0.5), (0.9, 0.4, 1.0), (1.2, 1.0, 0.25)])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_bm25s_method_matches_at_float64(variant, k1, b, delta, seed):
    docs = random_corpus(seed + 20, empty_doc=seed == 1)
    oracle = bm25s.BM25(method=variant, k1=k1, b=b, delta=delta, dtype="float64")
    oracle.index(docs, show_progress=False)
    ours = BM25(k1=k1, b=b, variant=variant, delta=delta).index(docs)
    for q in random_queries(seed):
        if not any(t in ours.vocab_index for t in q):
            continue  # bm25s drops unknown tokens silently; an all-unknown query is tested separately
        np.testing.assert_allclose(ours.get_scores(q), oracle.get_scores(q), rtol=RTOL, atol=1e-12)


def test_bm25s_robertson_is_okapi_over_k1_plus_1_when_no_idf_is_floored():
    """bm25s's robertson drops the (k1 + 1) factor: the exact relation, on a corpus with every df <= N/2."""
    rng = random.Random(5)
    docs = [rng.sample([f"t{i}" for i in range(40)], k=rng.randint(1, 6)) for _ in range(60)]
    okapi = BM25(k1=1.5, b=0.75, variant="okapi").index(docs)
    assert (okapi.df <= len(docs) / 2).all()
    oracle = bm25s.BM25(method="robertson", k1=1.5, b=0.75, dtype="float64")
    oracle.index(docs, show_progress=False)
    for q in random_queries(5):
        if any(t in okapi.vocab_index for t in q):
            np.testing.assert_allclose(oracle.get_scores(q), okapi.get_scores(q) / 2.5, rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("variant", BM25_VARIANTS)
@pytest.mark.parametrize("k1, b", [(1.5, 0.75), (0.0, 0.0), (1.2, 1.0), (3.0, 0.1)])
def test_fast_path_equals_the_readable_formula(variant, k1, b):
    docs = random_corpus(int(k1 * 10) + 7, empty_doc=True)
    engine = BM25(k1=k1, b=b, variant=variant, delta=0.7, epsilon=0.3).index(docs)
    for q in random_queries(8) + [["t0", "t0", "t0"]]:
        slow = bm25_scores(docs, q, k1=k1, b=b, variant=variant, delta=0.7, epsilon=0.3)
        np.testing.assert_allclose(_quiet_scores(engine, q), slow, rtol=1e-12, atol=1e-12)


def test_repeated_query_tokens_count_every_time():
    docs = random_corpus(1)
    engine = BM25().index(docs)
    np.testing.assert_allclose(engine.get_scores(["t1", "t1"]), 2 * engine.get_scores(["t1"]), rtol=1e-15)


def test_search_returns_matching_documents_best_first_ties_by_index():
    docs = [["a", "b"], ["c"], ["a", "b"], ["b", "a"], ["c", "c", "a"]]
    engine = BM25(variant="bm25+").index(docs)  # bm25+ gives documents without "a" a positive score too
    hits = engine.search(["a"], k=10)
    assert [d for d, _ in hits] == [0, 2, 3, 4]  # doc 1 has no "a"; 0, 2, 3 tie and keep index order
    scores = engine.get_scores(["a"])
    assert [s for _, s in hits] == [scores[d] for d in (0, 2, 3, 4)]
    assert engine.search(["a"], k=2) == hits[:2]
    robertson = BM25(variant="robertson").index(docs + [["a"]] * 3)  # "a": df > N/2, idf floored to 0
    assert robertson.idf[robertson.vocab_index["a"]] == 0 and len(robertson.search(["a"], k=10)) == 7


def test_unknown_terms_are_reported_not_silently_dropped():
    engine = BM25().index(random_corpus(0))
    assert engine.unknown_terms(["t0", "zzz", "t99"]) == ["zzz", "t99"]
    with pytest.warns(UserWarning, match="none of the query terms"):
        scores = engine.get_scores(["zzz", "t99"])
    assert (scores == 0).all()
    with pytest.warns(UserWarning):
        assert engine.search(["zzz"], k=3) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a partly known query does not warn
        engine.get_scores(["t0", "zzz"])


def test_empty_documents_are_allowed_and_documented():
    docs = [["a", "b"], [], ["b"]]
    okapi = BM25(variant="okapi").index(docs)
    assert okapi.get_scores(["b"])[1] == 0.0
    plus = BM25(variant="bm25+", delta=0.5).index(docs)
    assert plus.get_scores(["b"])[1] == pytest.approx(0.5 * np.log(4 / 2))  # only the delta term: idf * delta
    assert (tf_idf(docs)[1].toarray()[1] == 0).all()


def test_unicode_and_case_are_normalised_by_the_tokenizer_only():
    composed, decomposed = "Caf\u00e9", "cafe\u0301"
    assert unicodedata.normalize("NFC", decomposed) != decomposed
    assert tokenize(composed) == tokenize(decomposed) == ["café"]
    assert tokenize("STRASSE straße") == ["strasse", "strasse"]
    assert tokenize("Use __init__(self), x2!") == ["use", "__init__", "self", "x2"]
    engine = BM25().index([["Café"], ["café"], ["x"]])  # raw tokens are compared exactly
    assert engine.get_scores(["café"])[0] == 0 and engine.get_scores(["café"])[1] > 0


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: BM25(k1=-0.5), ValueError, ["k1", ">= 0", "-0.5"]),
        (lambda: BM25(b=1.5), ValueError, ["b", "[0, 1]", "1.5"]),
        (lambda: BM25(b=-0.1), ValueError, ["b", "-0.1"]),
        (lambda: BM25(delta=-1), ValueError, ["delta"]),
        (lambda: BM25(k1="1.2"), TypeError, ["k1", "str"]),
        (lambda: BM25(variant="bm25"), ValueError, ["variant", "okapi", "'bm25'"]),
        (lambda: BM25().index([]), ValueError, ["corpus_tokens", "empty"]),
        (lambda: BM25().index([[], []]), ValueError, ["every document", "empty"]),
        (lambda: BM25().index(["a text", "not tokenized"]), TypeError, ["document", "str", "tokenize"]),
        (lambda: BM25().index("abc"), TypeError, ["corpus_tokens"]),
        (lambda: BM25().index([["a"]]).get_scores([]), ValueError, ["query_tokens", "empty"]),
        (lambda: BM25().index([["a"]]).get_scores("a"), TypeError, ["query_tokens", "str", "tokenize"]),
        (lambda: BM25().get_scores(["a"]), ValueError, ["index", "first"]),
        (lambda: BM25().index([["a"]]).search(["a"], k=0), ValueError, ["k", ">= 1"]),
        (lambda: BM25().index([["a", 1]]), TypeError, ["token", "str"]),
        (lambda: tf_idf([["a"]], tf="bool"), ValueError, ["tf", "'bool'"]),
        (lambda: tf_idf([["a"]], idf="sklearn"), ValueError, ["idf", "'sklearn'"]),
        (lambda: tf_idf([["a"]], norm="l1"), ValueError, ["norm", "'l1'"]),
        (lambda: bm25_idf([1], 2, variant="x"), ValueError, ["variant"]),
        (lambda: reciprocal_rank_fusion([]), ValueError, ["rankings", "empty"]),
        (lambda: reciprocal_rank_fusion([["a", "a"]]), ValueError, ["more than once"]),
        (lambda: reciprocal_rank_fusion([["a"]], k=-1), ValueError, ["k", ">= 0"]),
        (lambda: precision_at_k(["a"], {"a"}, 0), ValueError, ["k", ">= 1"]),
        (lambda: recall_at_k(["a"], set(), 1), ValueError, ["relevant", "non-empty"]),
        (lambda: tokenize(["a"]), TypeError, ["text", "list"]),
        (lambda: inverse_document_frequency(np.array([5]), 3, "plain"), ValueError, ["df", "[1, n_docs = 3]", "5"]),
        (lambda: bm25_tf(2.0, 5.0, avgdl=-4.0), ValueError, ["avgdl", "> 0", "-4.0"]),
        (lambda: bm25_tf([1.0, 2.0], [3.0, 4.0, 5.0], 4.0), ValueError, ["tf", "doc_len", "broadcast"]),
        (lambda: bm25_idf([0, 1], 2), ValueError, ["df", "0"]),
        (lambda: precision_at_k("abc", {"a"}, 1), TypeError, ["ranked", "str"]),
        (lambda: reciprocal_rank(["a", "a"], {"a"}), ValueError, ["ranked", "more than once"]),
        (lambda: TfIdf().index([["a"]]).get_scores(["a", None]), TypeError, ["query_tokens[1]", "str"]),
    ],
)
def test_bad_input_names_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for w in words:
        assert w in str(info.value)


def _quiet_scores(engine, q):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # all-unknown queries are part of the random set
        return engine.get_scores(q)


# ----- RRF and evaluation ------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 1, 60, 2.5])
def test_rrf_matches_brute_force(k):
    rng = random.Random(int(k * 10))
    for _ in range(30):
        pool = list(range(12))
        rankings = [rng.sample(pool, rng.randint(0, 12)) for _ in range(rng.randint(1, 4))]
        fused = reciprocal_rank_fusion(rankings, k=k)
        brute = {d: sum(1 / (k + r.index(d) + 1) for r in rankings if d in r) for r in rankings for d in r}
        assert dict(fused).keys() == brute.keys()
        for d, s in fused:
            assert s == pytest.approx(brute[d], rel=1e-12)
        assert all(a[1] >= b[1] for a, b in zip(fused, fused[1:], strict=False))
    # "x" and "y" tie (both first in one ranking, absent from the other): the smaller id wins, either order
    assert reciprocal_rank_fusion([["x"], ["y"]]) == [("x", 1 / 61), ("y", 1 / 61)]
    assert reciprocal_rank_fusion([["y"], ["x"]]) == [("x", 1 / 61), ("y", 1 / 61)]


def test_rrf_ties_do_not_depend_on_the_order_of_the_rankings():
    # ranks (1, 2) and (2, 1) give equal sums; a better best rank beats a tie that reaches only rank 2
    assert [d for d, _ in reciprocal_rank_fusion([["b", "a"], ["a", "b"]])] == ["a", "b"]
    # k = 0: x (rank 1), z (rank 1) and y (rank 2 twice) all score 1; best single rank, then id, orders them
    assert [d for d, _ in reciprocal_rank_fusion([["x", "y"], ["z", "y"]], k=0)] == ["x", "z", "y"]
    assert [d for d, _ in reciprocal_rank_fusion([["z", "y"], ["x", "y"]], k=0)] == ["x", "z", "y"]
    rng = random.Random(7)
    for _ in range(200):
        pool = list(range(8))
        rankings = [rng.sample(pool, rng.randint(1, 8)) for _ in range(rng.randint(2, 4))]
        k = rng.choice([0, 1, 60])
        outs = {tuple(reciprocal_rank_fusion(list(p), k=k)) for p in itertools.permutations(rankings)}
        assert len(outs) == 1  # exactly the same ids, order and float scores for every order of the inputs
    # ids that do not compare (int and str) still give one answer
    mixed = reciprocal_rank_fusion([[1, "a"], ["a", 1]])
    assert mixed == reciprocal_rank_fusion([["a", 1], [1, "a"]]) and {d for d, _ in mixed} == {1, "a"}


def test_precision_recall_mrr_match_torchmetrics():
    rng = random.Random(0)
    preds, target, indexes, ours = [], [], [], {"p": [], "r": [], "rr": []}
    for q in range(20):
        ranked = rng.sample(range(15), 15)  # a full ranking of every candidate
        relevant = set(rng.sample(range(15), rng.randint(1, 3)))
        preds += [15.0 - i for i in range(15)]
        target += [d in relevant for d in ranked]
        indexes += [q] * 15
        ours["p"].append(precision_at_k(ranked, relevant, 5))
        ours["r"].append(recall_at_k(ranked, relevant, 5))
        ours["rr"].append(reciprocal_rank(ranked, relevant))
    args = (torch.tensor(preds, dtype=torch.float64), torch.tensor(target), torch.tensor(indexes))
    tol = 1e-6  # torchmetrics returns float32 whatever the input dtype; ours are exact fractions in float64
    assert np.mean(ours["p"]) == pytest.approx(RetrievalPrecision(top_k=5)(*args).item(), abs=tol)
    assert np.mean(ours["r"]) == pytest.approx(RetrievalRecall(top_k=5)(*args).item(), abs=tol)
    assert np.mean(ours["rr"]) == pytest.approx(RetrievalMRR()(*args).item(), abs=tol)


def test_metrics_on_short_rankings_by_hand():
    assert precision_at_k(["a", "x"], {"a", "b"}, 5) == 1 / 5  # still divided by k
    assert recall_at_k(["x", "b", "a"], {"a", "b"}, 2) == 1 / 2
    assert reciprocal_rank(["x", "y", "b"], {"b"}) == 1 / 3 and reciprocal_rank(["x"], {"b"}) == 0.0


def test_manual_queries_name_real_topics():
    from lmbook.data import documents

    queries = manual_queries()
    topics = set(documents())
    assert len(queries) >= 30
    assert all(rel and rel <= topics for _, rel in queries)
    assert len({q for q, _ in queries}) == len(queries)


def test_manual_queries_split_is_fixed_disjoint_and_complete():
    every, dev, test = manual_queries(), manual_queries("dev"), manual_queries("test")
    assert manual_queries("all") == every
    assert dev == every[0::2] and test == every[1::2]  # alternate lines of the file, a fixed split
    assert len(dev) == len(test) == len(every) // 2
    assert not {q for q, _ in dev} & {q for q, _ in test}
    with pytest.raises(ValueError, match="split"):
        manual_queries("train")
