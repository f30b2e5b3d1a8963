"""lmbook.graphs against networkx's pagerank and google_matrix (weights, dangling nodes, personalisation and
dangling distributions), against a brute-force eigenvector of the dense Google matrix, and the manual's
cross-reference graph against hand-made documents."""

import warnings

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from lmbook import data
from lmbook.graphs import cross_references, google_matrix, headings, pagerank, transition_matrix


def random_graph(seed, n=12, p=0.25, weighted=True):
    """A random directed graph as a dense array, with at least two dangling nodes and a self-loop."""
    rng = np.random.default_rng(seed)
    A = (rng.random((n, n)) < p) * (rng.uniform(0.5, 3.0, (n, n)) if weighted else 1.0)
    A[:2] = 0  # nodes 0 and 1 are dangling
    A[3, 3] = 1.5  # networkx keeps self-loops as links too
    return A


def nx_pagerank(A, **kwargs):
    G = nx.from_numpy_array(A, create_using=nx.DiGraph)
    pr = nx.pagerank(G, tol=1e-15, max_iter=100_000, **kwargs)
    return np.array([pr[i] for i in range(A.shape[0])])


def as_dict(vector):
    return dict(enumerate(vector))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("damping", [0.5, 0.85, 0.99])
def test_pagerank_matches_networkx(seed, damping):
    A = random_graph(seed)
    ours = pagerank(A, damping=damping, tol=1e-14, max_iter=100_000)
    assert ours.converged
    np.testing.assert_allclose(ours.scores, nx_pagerank(A, alpha=damping), rtol=0, atol=1e-10)
    assert ours.scores.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_personalised_and_dangling_distributions_match_networkx(seed):
    rng = np.random.default_rng(100 + seed)
    A = random_graph(seed, weighted=seed % 2 == 0)
    v = rng.uniform(0, 2, A.shape[0]) * (rng.random(A.shape[0]) < 0.6)  # zeros: some nodes never teleported to
    v[5] = 1.0
    w = rng.uniform(0, 1, A.shape[0])
    theirs_v = nx_pagerank(A, personalization=as_dict(v))  # dangling follows personalization, as ours
    np.testing.assert_allclose(pagerank(A, personalization=v, tol=1e-14).scores, theirs_v, atol=1e-10, rtol=0)
    theirs_vw = nx_pagerank(A, personalization=as_dict(v), dangling=as_dict(w))
    ours_vw = pagerank(sp.csr_matrix(A), personalization=list(v), dangling=w, tol=1e-14).scores
    np.testing.assert_allclose(ours_vw, theirs_vw, atol=1e-10, rtol=0)


@pytest.mark.parametrize("seed", range(3))
def test_google_matrix_matches_networkx_and_is_row_stochastic(seed):
    rng = np.random.default_rng(seed)
    A = random_graph(seed)
    v, w = rng.uniform(0.1, 1, A.shape[0]), rng.uniform(0.1, 1, A.shape[0])
    G = google_matrix(A, damping=0.8, personalization=v, dangling=w)
    theirs = nx.google_matrix(nx.from_numpy_array(A, create_using=nx.DiGraph), alpha=0.8,
                              personalization=as_dict(v), dangling=as_dict(w), nodelist=range(A.shape[0]))
    np.testing.assert_allclose(G, np.asarray(theirs), atol=1e-14, rtol=0)
    np.testing.assert_allclose(G.sum(axis=1), 1.0, atol=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_pagerank_is_the_leading_left_eigenvector_of_the_google_matrix(seed):
    """Brute force: numpy's eig of the dense G^T; the eigenvalue 1 is the largest and its vector is PageRank."""
    A = random_graph(seed, n=15)
    G = google_matrix(A, damping=0.85)
    values, vectors = np.linalg.eig(G.T)
    top = np.argmax(values.real)
    assert values[top].real == pytest.approx(1.0, abs=1e-12)
    assert np.sort(np.abs(values))[-2] <= 0.85 + 1e-9  # |lambda_2| <= d
    stationary = np.abs(vectors[:, top].real) / np.abs(vectors[:, top].real).sum()
    np.testing.assert_allclose(pagerank(A, tol=1e-14).scores, stationary, atol=1e-10, rtol=0)


def test_linear_system_form_and_unnormalised_variant_are_proportional():
    """pi = (1 - d) v (I - d S)^-1 by a direct solve; and the paper-style iteration x = (1 - d) + d x P, whose
    dangling nodes leak mass, is proportional to PageRank with uniform teleport and dangling jumps."""
    A, d = random_graph(7), 0.85
    n = A.shape[0]
    P, dangling = transition_matrix(A)
    S = P.toarray() + np.outer(dangling, np.full(n, 1 / n))
    direct = np.linalg.solve((np.eye(n) - d * S).T, np.full(n, (1 - d) / n))
    pr = pagerank(A, damping=d, tol=1e-14).scores
    np.testing.assert_allclose(pr, direct, atol=1e-12, rtol=0)
    x = np.ones(n)
    for _ in range(500):
        x = (1 - d) + d * (P.T @ x)
    np.testing.assert_allclose(x / x.sum(), pr, atol=1e-12, rtol=0)


@pytest.mark.parametrize("damping", [0.5, 0.85, 0.95])
def test_each_step_shrinks_the_change_by_at_least_the_damping_factor(damping):
    A = random_graph(3, n=30, p=0.1)
    changes = pagerank(A, damping=damping, tol=1e-13).changes
    ratios = np.array(changes[1:]) / np.array(changes[:-1])
    assert (ratios <= damping + 1e-6).all(), ratios.max()


def test_no_convergence_warns_and_says_so():
    with pytest.warns(UserWarning, match="did not converge"):
        result = pagerank(random_graph(0), tol=1e-15, max_iter=3)
    assert not result.converged and len(result.changes) == 3


def test_graph_without_links_and_a_single_node():
    np.testing.assert_allclose(pagerank(np.zeros((4, 4))).scores, 0.25)  # every node dangling: uniform
    assert pagerank(np.array([[0.0]])).scores.tolist() == [1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cycle = np.roll(np.eye(5), 1, axis=1)  # a directed 5-cycle: periodic, damping still converges
        np.testing.assert_allclose(pagerank(cycle).scores, 0.2, atol=1e-12)


DOCS = {
    "alpha": 'The "alpha" statement\n*********************\n\nSee section Beta things. Also the Gamma part\n'
             "section. It is described in Deep dive, and see The alpha statement.\n",
    "beta": "Beta things\n***********\n\nNo links here; section Nowhere.\n\nDeep dive\n=========\n\nText.\n",
    "gamma": "Gamma part\n**********\n\nsee also Beta things, see also Beta things.\n\nDeep dive\n---------\n",
}


def test_headings_and_cross_references_on_hand_made_topics():
    assert headings(DOCS["beta"]) == [("Beta things", True), ("Deep dive", False)]
    assert headings(DOCS["alpha"]) == [("The alpha statement", True)]  # the code quotes are dropped
    names, A, links = cross_references(DOCS)
    assert names == ["alpha", "beta", "gamma"]
    # alpha: beta (section ...), gamma (the ... section), "Deep dive" split between beta and gamma; its own
    # title is a self-reference and is dropped; gamma cites beta twice; "Nowhere" is not a title
    np.testing.assert_allclose(A.toarray(), [[0, 1.5, 1.5], [0, 0, 0], [0, 2, 0]])
    assert ("alpha", "Deep dive", ["beta", "gamma"]) in links and len(links) == 5


def test_the_manual_graph_holds_the_references_read_in_the_text():
    names, A, links = cross_references(data.documents())
    at = {name: i for i, name in enumerate(names)}
    assert len(names) == 79 and len(links) == 64 and A.sum() == pytest.approx(64)
    for source, target in [("try", "raise"), ("raise", "try"), ("with", "context-managers"),
                           ("context-managers", "with"), ("lambda", "function"), ("types", "specialnames")]:
        assert A[at[source], at[target]] > 0, (source, target)
    assert A.diagonal().sum() == 0
    assert ("types", "Implementing Descriptors", ["attribute-access", "specialnames"]) in links
