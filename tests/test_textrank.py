"""lmbook.textrank against an independent TextRank: the graphs are rebuilt here with networkx from the raw
tokens (a sliding window over the candidates or over all positions, the paper's overlap similarity) and
ranked with networkx's pagerank."""

import math
import random

import networkx as nx
import numpy as np
import pytest
from lmbook import data
from lmbook.cooccurrence import STOPWORDS
from lmbook.textrank import (
    content_words,
    cooccurrence_graph,
    keyphrases,
    keywords,
    overlap_similarity,
    similarity_graph,
    summarize,
)


def nx_keyword_scores(sentences, window, is_candidate, span="tokens"):
    G = nx.Graph()
    for sentence in sentences:
        if span == "candidates":  # filter first, then slide the window over what is left
            sentence = [t for t in sentence if is_candidate(t)]
        for i, x in enumerate(sentence):
            if not is_candidate(x):
                continue
            G.add_node(x)
            for y in sentence[i + 1:i + window]:  # the next window - 1 positions
                if is_candidate(y) and y != x:
                    G.add_edge(x, y)
    return nx.pagerank(G, alpha=0.85, tol=1e-15, max_iter=100_000)


def plain_candidate(word):
    return word.isalpha() and word.isascii() and len(word) >= 2 and word not in STOPWORDS


def random_text(seed, n=25):
    rng = random.Random(seed)
    words = ["graph", "node", "edge", "rank", "the", "of", "walk", "page", "link", "a", "score", "x1"]
    return [[rng.choice(words) for _ in range(rng.randint(1, 12))] for _ in range(n)]


@pytest.mark.parametrize("span", ["candidates", "tokens"])
@pytest.mark.parametrize("window", [2, 3, 5])
@pytest.mark.parametrize("name", ["try", "with", "lambda", "import"])
def test_keywords_match_networkx_on_manual_sections(name, window, span):
    sentences = data.sentences(data.documents()[name])
    theirs = nx_keyword_scores(sentences, window, plain_candidate, span)
    ours = keywords(sentences, top=len(theirs), window=window, span=span)
    assert {w for w, _ in ours} == set(theirs)
    for word, score in ours:
        assert score == pytest.approx(theirs[word], abs=1e-10)
    top = sorted(theirs, key=lambda w: -theirs[w])[:5]
    assert [w for w, _ in ours[:5]] == top or np.allclose([theirs[w] for w in top], [s for _, s in ours[:5]])


@pytest.mark.parametrize("seed", range(5))
def test_cooccurrence_graph_on_random_text(seed):
    sentences = random_text(seed)
    vocab, A = cooccurrence_graph(sentences, window=3, span="tokens")
    assert (A != A.T).nnz == 0 and A.diagonal().sum() == 0
    theirs = nx_keyword_scores(sentences, 3, plain_candidate)
    assert set(vocab) == set(theirs)
    edges = {(vocab[i], vocab[j]) for i, j in zip(*A.nonzero(), strict=True)}
    G = nx.Graph()
    for s in sentences:  # brute force again, by pairs of positions
        for i in range(len(s)):
            for j in range(i + 1, min(len(s), i + 3)):
                if plain_candidate(s[i]) and plain_candidate(s[j]) and s[i] != s[j]:
                    G.add_edge(s[i], s[j])
    assert edges == {(x, y) for x, y in G.edges} | {(y, x) for x, y in G.edges}


def test_span_counts_positions_over_candidates_or_tokens():
    sentence = [["context", "of", "the", "manager", "exits"]]
    vocab, A = cooccurrence_graph(sentence, window=2)  # "of the" takes no position: context - manager - exits
    assert vocab == ["context", "manager", "exits"] and A.toarray().tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    vocab, A = cooccurrence_graph(sentence, window=2, span="tokens")  # the stopwords separate context
    assert A.toarray().tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]
    with pytest.raises(ValueError, match="span"):
        keywords(sentence, span="words")


def test_keep_plugs_in_another_filter():
    sentences = [["the", "big", "graph", "has", "nodes"], ["nodes", "link", "graph"]]
    only_plural = lambda tokens: [t.endswith("s") for t in tokens]  # noqa: E731
    vocab, A = cooccurrence_graph(sentences, window=3, keep=only_plural)
    assert vocab == ["has", "nodes"] and A.toarray().tolist() == [[0, 1], [1, 0]]
    assert content_words(["the", "Graph", "x1", "__init__", "é", "ranks"]) == [False, True, False, False, False, True]
    with pytest.raises(ValueError, match="keep"):
        cooccurrence_graph(sentences, keep=lambda tokens: [True])


def test_keyphrases_merge_adjacent_keywords():
    sentences = [["context", "manager", "exits", "the", "context"], ["the", "context", "manager"]]
    assert keyphrases(sentences, {"context", "manager"}) == ["context manager", "context"]
    assert keyphrases(sentences, []) == []


def test_overlap_similarity_formula():
    assert overlap_similarity(["a", "b", "c"], ["b", "c", "c", "d"]) == pytest.approx(2 / (math.log(3) + math.log(4)))
    assert overlap_similarity(["a"], ["a"]) == 0.0  # both single tokens: ln 1 + ln 1 = 0
    assert overlap_similarity(["a"], ["a", "b"]) == pytest.approx(1 / math.log(2))


@pytest.mark.parametrize("seed", range(4))
def test_summary_matches_networkx_weighted_pagerank(seed):
    sentences = [s for s in random_text(seed, n=15) if s]
    G = nx.Graph()
    G.add_nodes_from(range(len(sentences)))
    for i, a in enumerate(sentences):
        for j, b in enumerate(sentences[:i]):
            shared = len(set(a) & set(b))
            denominator = math.log(len(a)) + math.log(len(b))
            if shared and denominator > 0:
                G.add_edge(i, j, weight=shared / denominator)
    theirs = nx.pagerank(G, tol=1e-15, max_iter=100_000, weight="weight")
    W = similarity_graph(sentences)
    assert np.allclose(W, W.T) and np.all(np.diag(W) == 0)
    top = sorted(sorted(theirs, key=lambda i: (-theirs[i], i))[:3])
    assert summarize(sentences, k=3) == top


def test_summary_of_a_manual_section_is_three_sentences_in_order():
    sentences = [s for s in data.sentences(data.documents()["with"]) if len(s) > 1]
    picked = summarize(sentences, k=3)
    assert len(picked) == 3 and picked == sorted(picked)
