"""lmbook.metrics against independent implementations: torchmetrics, Hugging Face, torch, scipy, sklearn."""

import math

import numpy as np
import pytest
import scipy.stats
import torch
from lmbook import metrics


def random_batch(seed, B=3, T=7, V=11, ignore_frac=0.2, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g, dtype=dtype) * 3
    targets = torch.randint(0, V, (B, T), generator=g)
    targets[torch.rand(B, T, generator=g) < ignore_frac] = -100
    targets[0, 0] = 1  # at least one scored token
    return logits, targets


@pytest.mark.parametrize("seed", range(5))
def test_perplexity_matches_torchmetrics(seed):
    from torchmetrics.text import Perplexity

    logits, targets = random_batch(seed)
    oracle = Perplexity(ignore_index=-100).set_dtype(torch.float64)  # .double() is a no-op on Metric
    oracle.update(logits, targets)
    assert metrics.perplexity(logits, targets).item() == pytest.approx(oracle.compute().item(), rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_cross_entropy_matches_hugging_face_causal_lm_loss(seed):
    """HF shifts labels inside the model; we do not, so we shift by hand: logits[:, :-1] score ids[:, 1:]."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=2, n_head=2)).eval()
    ids = torch.randint(0, 50, (2, 12))
    labels = ids.clone()
    labels[1, 8:] = -100  # padding that must not be scored
    with torch.no_grad():
        out = model(input_ids=ids, labels=labels)
    ours = metrics.cross_entropy(out.logits[:, :-1], labels[:, 1:])
    assert ours.item() == pytest.approx(out.loss.item(), rel=1e-5)  # HF computes its loss in float32
    assert metrics.perplexity(out.logits[:, :-1], labels[:, 1:]).item() == pytest.approx(
        math.exp(out.loss.item()), rel=1e-5)


def test_cross_entropy_with_masked_classes_at_ignored_positions_matches_torch():
    """-inf logits (masked classes) are allowed; an ignored position whose class 0 is masked must not give NaN."""
    logits = torch.tensor([[-math.inf, 0.0, 0.0], [0.0, 1.0, 2.0], [-math.inf, -math.inf, 3.0]], dtype=torch.float64)
    targets = torch.tensor([-100, 2, 2])
    oracle = torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100)
    ours = metrics.cross_entropy(logits, targets)
    assert torch.isfinite(ours) and ours.item() == pytest.approx(oracle.item(), rel=1e-12)
    ours_ls = metrics.label_smoothed_cross_entropy(logits, targets, 0.0)
    assert ours_ls.item() == pytest.approx(oracle.item(), rel=1e-12)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3, 1.0])
def test_label_smoothing_matches_torch(eps):
    logits, targets = random_batch(7, V=6)
    oracle = torch.nn.CrossEntropyLoss(label_smoothing=eps, ignore_index=-100)(logits.transpose(1, 2), targets)
    ours = metrics.label_smoothed_cross_entropy(logits, targets, eps)
    assert ours.item() == pytest.approx(oracle.item(), abs=1e-12)


def test_smoothed_targets_seed_example_and_rows_sum_to_one():
    q = metrics.smoothed_targets(torch.tensor([2]), num_classes=5, epsilon=0.1)
    assert torch.allclose(q, torch.tensor([[0.02, 0.02, 0.92, 0.02, 0.02]]))
    q = metrics.smoothed_targets(torch.randint(0, 9, (4, 3)), 9, 0.25)
    assert q.shape == (4, 3, 9) and torch.allclose(q.sum(-1), torch.ones(4, 3))


def test_label_smoothing_with_eps_zero_is_cross_entropy():
    logits, targets = random_batch(3)
    assert torch.allclose(metrics.label_smoothed_cross_entropy(logits, targets, 0.0),
                          metrics.cross_entropy(logits, targets))


def test_perplexity_from_probs_worked_examples():
    assert metrics.perplexity_from_probs([0.5, 0.25, 0.125, 0.125]) == pytest.approx(4.756828, abs=1e-6)
    assert metrics.perplexity_from_probs([1 / 8] * 5) == pytest.approx(8.0)
    # dataset perplexity is token-weighted, not the mean of per-string perplexities
    pooled = metrics.perplexity_from_probs([0.5] * 4 + [0.01, 0.9])
    assert pooled == pytest.approx(3.4805, abs=1e-4)
    mean_of = np.mean([metrics.perplexity_from_probs([0.5] * 4), metrics.perplexity_from_probs([0.01, 0.9])])
    assert mean_of == pytest.approx(6.2705, abs=1e-4)


def test_perplexity_from_probs_equals_perplexity_of_logits():
    logits, targets = random_batch(11, ignore_frac=0.0)
    p = torch.softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    assert metrics.perplexity_from_probs(p.numpy()) == pytest.approx(metrics.perplexity(logits, targets).item())


@pytest.mark.parametrize("seed", range(5))
def test_entropy_and_kl_match_scipy_in_any_base(seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    p[0] = 0.0
    p /= p.sum()
    for base in (math.e, 2, 10):
        assert metrics.entropy(p, base=base) == pytest.approx(scipy.stats.entropy(p, base=base), rel=1e-12)
        assert metrics.kl_divergence(p, q, base=base) == pytest.approx(scipy.stats.entropy(p, q, base=base),
                                                                        rel=1e-12)
    # the decomposition H(P, Q) = H(P) + KL(P || Q)
    cross = -np.sum(p[p > 0] * np.log(q[p > 0]))
    assert cross == pytest.approx(metrics.entropy(p) + metrics.kl_divergence(p, q), rel=1e-12)


def test_kl_is_infinite_where_q_misses_support_and_batched_rows_work():
    assert metrics.kl_divergence([0.5, 0.5], [1.0, 0.0]) == math.inf
    P = np.array([[0.5, 0.5], [0.9, 0.1]])
    assert np.allclose(metrics.entropy(P, base=2), [1.0, scipy.stats.entropy([0.9, 0.1], base=2)])


def test_three_bit_entropy_example():
    u = np.full(8, 1 / 8)
    assert metrics.entropy(u, base=2) == pytest.approx(3.0)
    assert math.exp(metrics.entropy(u)) == pytest.approx(8.0)
    assert 2 ** metrics.entropy(u) == pytest.approx(4.2264, abs=1e-4)  # mixing bases is wrong


@pytest.mark.parametrize("tp,fp,fn", [(8, 2, 4), (0, 0, 5), (3, 0, 0), (1, 9, 1)])
def test_precision_recall_f1_match_sklearn(tp, fp, fn):
    from sklearn.metrics import precision_recall_fscore_support

    y_true = [1] * tp + [0] * fp + [1] * fn
    y_pred = [1] * tp + [1] * fp + [0] * fn
    oracle = precision_recall_fscore_support(y_true, y_pred, average="binary", zero_division=0)[:3]
    assert metrics.precision_recall_f1(tp, fp, fn) == pytest.approx(oracle)


@pytest.mark.parametrize("call,match", [
    (lambda: metrics.cross_entropy(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long)), "shape"),
    (lambda: metrics.cross_entropy(torch.zeros(2, 5), torch.tensor([0, 7])), r"\[0, 5\)"),
    (lambda: metrics.cross_entropy(torch.zeros(2, 5), torch.tensor([-100, -100])), "no token to score"),
    (lambda: metrics.cross_entropy(torch.zeros(2, 5), torch.tensor([0.0, 1.0])), "integer"),
    (lambda: metrics.perplexity_from_probs([]), "empty"),
    (lambda: metrics.perplexity_from_probs([0.5, 1.5]), r"\(0, 1\]"),
    (lambda: metrics.perplexity_from_probs([0.5, 0.0]), r"\(0, 1\]"),
    (lambda: metrics.entropy([0.5, 0.4]), "sum to 1"),
    (lambda: metrics.entropy([0.5, 0.5], base=1), "base"),
    (lambda: metrics.kl_divergence([0.5, 0.5], [0.2, 0.3, 0.5]), "same shape"),
    (lambda: metrics.kl_divergence([1.2, -0.2], [0.5, 0.5]), "non-negative"),
    (lambda: metrics.smoothed_targets(torch.tensor([5]), 5, 0.1), r"\[0, 5\)"),
    (lambda: metrics.smoothed_targets(torch.tensor([1]), 5, 1.5), "epsilon"),
    (lambda: metrics.precision_recall_f1(-1, 0, 0), "tp"),
    (lambda: metrics.cross_entropy(torch.tensor([[0.0, float("nan")]]), torch.tensor([0])), "NaN"),
    (lambda: metrics.cross_entropy(torch.zeros(2, 5), torch.tensor([0, 1]), ignore_index=0.5), "ignore_index"),
    (lambda: metrics.perplexity_from_probs(["0.5", 0.25]), "token_probs must hold only numbers"),
    (lambda: metrics.entropy("0.5 0.5"), "p must be a list"),
    (lambda: metrics.label_smoothed_cross_entropy(torch.zeros(2, 1), torch.tensor([0, 0]), 0.1), "V >= 2"),
])
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
