"""lmbook.experiments.lora_sweeps: the shuffled-label control keeps the lines and the class counts, moves the
labels, and reports the singular values of the update that training actually made."""

import numpy as np
import pytest
import torch
from lmbook import model as M
from lmbook.experiments import lora_sweeps as S

LINES = [(f"x{i}", label) for i, label in enumerate(["A"] * 6 + ["B"] * 4 + ["C"] * 2)]


def test_shuffle_labels_permutes_the_labels_and_keeps_the_lines():
    out = S.shuffle_labels(LINES, seed=0)
    assert [e for e, _ in out] == [e for e, _ in LINES]  # the same lines, in the same order
    assert sorted(label for _, label in out) == sorted(label for _, label in LINES)  # the same class counts
    assert [label for _, label in out] != [label for _, label in LINES]  # but the labels moved
    assert out == S.shuffle_labels(LINES, seed=0) and out != S.shuffle_labels(LINES, seed=1)
    with pytest.raises(TypeError, match="lines"):
        S.shuffle_labels("x0 A")


def test_shuffled_label_run_reports_the_spectra_of_the_update_it_made():
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=30, d_model=32, n_layers=1, n_heads=4, context_length=16))
    labels = ["A", "B", "C"]

    def encode(expr, label):
        return [1 + int(expr[1:]) % 7, 3], [20 + labels.index(label)]

    encoded = {split: [encode(e, label) for e, label in LINES[:6]] for split in ("test", "test_unseen")}
    before = {n: p.detach().clone().numpy() for n, p in model.named_parameters()}
    recipe = {"steps": 5, "batch_size": 4, "lr_full": 1e-2}
    out = S.shuffled_label_run(model, LINES, encode, encoded, [20, 21, 22], recipe)
    assert len(out["losses"]) == 5 and set(out) >= {"spectra", "test", "test_unseen"}
    blocks = [n for n in before if n.startswith("blocks.") and before[n].ndim == 2]
    assert sorted(out["spectra"]) == sorted(blocks)
    for name in blocks:  # numpy's SVD of the update, taken from the weights before and after
        delta = model.get_parameter(name).detach().double().numpy() - before[name].astype(np.float64)
        assert np.abs(delta).max() > 0
        np.testing.assert_allclose(out["spectra"][name], np.linalg.svd(delta, compute_uv=False), atol=2e-6)
