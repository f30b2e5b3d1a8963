"""Chapter 6: how word vectors are evaluated: analogies and an association test for the bias they carry.

- :func:`analogy`: a : b :: c : ?, answered by 3CosAdd (Mikolov et al. 2013c), the intrinsic test the chapter
  scores against simple baselines;
- :func:`weat_scores` and :func:`weat_test`: the word-embedding association test (Caliskan et al. 2017), its
  effect size and an exact one-sided permutation p-value.

Vectors are rows of float numpy arrays; words are given by row index. Left out on purpose: similarity
benchmarks rated by people (none ships offline), 3CosMul (an exercise of the chapter), and debiasing.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import validate

__all__ = ["analogy", "weat_scores", "weat_test"]


def analogy(vectors: np.ndarray, a: int, b: int, c: int, k: int = 1) -> list[int]:
    """a : b :: c : ?  by 3CosAdd (Mikolov et al. 2013c): the k rows x of ``vectors`` (V, d) with the largest
    cos(x, b - a + c) on unit vectors, a, b and c themselves excluded (as is usual), best first (chapter 6)."""
    _check_analogy(vectors, a, b, c, k)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # (V, d)
    scores = unit @ (unit[b] - unit[a] + unit[c])  # (V,): cos up to the query's norm, which ranks the same
    scores[[a, b, c]] = -np.inf
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def weat_scores(targets: np.ndarray, attr_a: np.ndarray, attr_b: np.ndarray) -> np.ndarray:
    """s(w) = mean_a cos(w, a) - mean_b cos(w, b) for each row w of targets (n, d): how much closer w is to
    attribute set A (m, d) than to B (m', d) (Caliskan et al. 2017). Float64, shape (n,)."""
    _check_weat(targets, attr_a, attr_b)
    unit = [np.asarray(m, np.float64) / np.linalg.norm(m, axis=1, keepdims=True) for m in (targets, attr_a, attr_b)]
    return (unit[0] @ unit[1].T).mean(1) - (unit[0] @ unit[2].T).mean(1)  # (n,)


def weat_test(x: np.ndarray, y: np.ndarray, attr_a: np.ndarray, attr_b: np.ndarray) -> tuple[float, float]:
    """WEAT: effect size d = (mean_X s - mean_Y s) / std_{X u Y} s (sample std), and the one-sided
    permutation p-value: the share of the equal-size splits (X', Y') of X u Y whose sum_X' s - sum_Y' s is
    at least the observed one (all splits enumerated: keep |X u Y| small, at most 20)."""
    _check_weat_sets(x, y)
    s = weat_scores(np.concatenate([x, y]), attr_a, attr_b)  # (n_x + n_y,)
    n_x, total = len(x), s.sum()
    effect = (s[:n_x].mean() - s[n_x:].mean()) / s.std(ddof=1)
    observed = 2 * s[:n_x].sum() - total  # sum_X s - sum_Y s
    stats = [2 * s[list(split)].sum() - total for split in itertools.combinations(range(len(s)), n_x)]
    p_value = np.mean(np.array(stats) >= observed - 1e-12)
    return float(effect), float(p_value)


# ----- checks ------------------------------------------------------------------------------------------

def _check_array(name: str, value, ndim: int) -> None:
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype.kind != "f":
        raise TypeError(f"{name} must be a {ndim}-D floating-point numpy array, got {validate.describe(value)}")
    if not np.isfinite(value).all():
        raise ValueError(f"{name} must be finite, but it holds NaN or inf")


def _check_analogy(vectors, a, b, c, k) -> None:
    _check_array("vectors", vectors, 2)
    if not vectors.size:
        raise ValueError(f"vectors must be a non-empty (V, d) array, got shape {vectors.shape}")
    for name, value in (("a", a), ("b", b), ("c", c)):
        validate.integer(name, value, low=0, high=len(vectors) - 1)
    if len({a, b, c}) < 3:
        raise ValueError(f"a, b and c must be three different rows (a : b :: c : ?), got a={a}, b={b}, c={c}")
    validate.integer("k", k, low=1, high=max(1, len(vectors) - 3))


def _check_weat(targets, attr_a, attr_b) -> None:
    for name, value in (("targets", targets), ("attr_a", attr_a), ("attr_b", attr_b)):
        _check_array(name, value, 2)
        if not len(value) or (np.linalg.norm(value, axis=1) == 0).any():
            raise ValueError(f"{name} must hold at least one non-zero vector per row, got shape {value.shape}")
    if not targets.shape[1] == attr_a.shape[1] == attr_b.shape[1]:
        raise ValueError(f"targets, attr_a and attr_b must share the width d, got {targets.shape[1]}, "
                         f"{attr_a.shape[1]} and {attr_b.shape[1]}")


def _check_weat_sets(x, y) -> None:
    for name, value in (("x", x), ("y", y)):
        _check_array(name, value, 2)
        if not value.shape[1]:
            raise ValueError(f"{name} must hold vectors of width d >= 1, got shape {value.shape}")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must share the width d, got {x.shape[1]} and {y.shape[1]}")
    if len(x) < 2 or len(y) < 2 or len(x) + len(y) > 20:
        raise ValueError(f"x and y must hold at least 2 vectors each and at most 20 together (every split is "
                         f"enumerated), got {len(x)} and {len(y)}")
