"""lmbook.dense_retrieval (chapter 6) against independent implementations: average precision against
scikit-learn's average_precision_score, cosine ranking and mean vectors against plain loops, and the
residual stream of hidden_states against the model's own forward pass (final norm and head on its last row)."""

import math
import random

import numpy as np
import pytest
import torch
from lmbook import dense_retrieval as dr
from lmbook.model import Transformer, TransformerConfig
from sklearn.metrics import average_precision_score


def test_average_precision_matches_sklearn_when_every_document_is_ranked():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(2, 12)
        ranked = list(range(n))
        rng.shuffle(ranked)
        relevant = set(rng.sample(range(n), rng.randint(1, n)))
        y_true = [int(d in relevant) for d in range(n)]
        y_score = [n - ranked.index(d) for d in range(n)]  # higher score = earlier rank, no ties
        assert dr.average_precision(ranked, relevant) == pytest.approx(average_precision_score(y_true, y_score))


def test_average_precision_counts_unretrieved_relevant_documents_as_zero():
    assert dr.average_precision(["a", "x", "b"], {"a", "b", "c"}) == pytest.approx((1 + 2 / 3) / 3)
    assert dr.average_precision(["x", "y"], {"a"}) == 0.0
    assert dr.average_precision(["a"], {"a"}) == 1.0


def test_evaluate_is_the_mean_of_the_three_measures():
    rankings = [["a", "b", "c"], ["c", "b", "a"]]
    relevant = [{"a"}, {"a", "b"}]
    out = dr.evaluate(rankings, relevant)
    assert out["P@1"] == 0.5
    assert out["MRR"] == pytest.approx((1 + 1 / 2) / 2)
    assert out["MAP"] == pytest.approx((1 + (1 / 2 + 2 / 3) / 2) / 2)


def test_cosine_rank_matches_a_loop():
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(5, 7)), rng.normal(size=(9, 7)) * rng.uniform(0.1, 10, size=(9, 1))
    order = dr.cosine_rank(q, d)
    for i in range(5):
        cos = [sum(a * b for a, b in zip(q[i], d[j], strict=True)) / (math.hypot(*q[i]) * math.hypot(*d[j]))
               for j in range(9)]
        assert order[i].tolist() == sorted(range(9), key=lambda j: -cos[j])
    assert dr.cosine_rank(np.zeros((1, 7)), d)[0].tolist() == list(range(9))  # all ties: document order


def test_mean_vector_matches_a_loop_and_skips_unknown_tokens():
    vectors = np.arange(12, dtype=float).reshape(4, 3)
    index = {"a": 0, "b": 1, "c": 3}
    tokens = ["a", "zzz", "c", "c"]
    expected = [sum(vectors[index[t]][j] for t in tokens if t in index) / 3 for j in range(3)]
    assert np.allclose(dr.mean_vector(tokens, vectors, index), expected)
    assert not dr.mean_vector(["zzz"], vectors, index).any()


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=50, context_length=32, d_model=16, n_layers=3, n_heads=4, n_kv_heads=2,
                               norm="rmsnorm", ffn="swiglu", positional="rope", dropout=0.0)
    return Transformer(config).eval()


def test_hidden_states_are_the_models_residual_stream(tiny_model):
    ids = torch.tensor([3, 14, 15, 9, 2, 6])
    states = dr.hidden_states(tiny_model, ids)
    assert states.shape == (4, 6, 16)
    assert torch.equal(states[0], tiny_model.tok_emb.weight[ids])
    with torch.no_grad():
        logits = tiny_model(ids[None])[0]
        assert torch.allclose(tiny_model.lm_head(tiny_model.final_norm(states[-1])), logits, atol=1e-5)


def test_mean_pooled_states_leave_out_the_first_token(tiny_model):
    ids = torch.tensor([3, 14, 15, 9])
    states = dr.hidden_states(tiny_model, ids).double()
    pooled = dr.mean_pooled_states(tiny_model, ids, [0, 2])
    for row, layer in enumerate([0, 2]):
        assert np.allclose(pooled[row], [sum(states[layer, t, j].item() for t in range(1, 4)) / 3 for j in range(16)])
    single = dr.mean_pooled_states(tiny_model, torch.tensor([7]), [3])  # one token: nothing to leave out
    assert np.allclose(single[0], dr.hidden_states(tiny_model, torch.tensor([7]))[3, 0].double().numpy())
