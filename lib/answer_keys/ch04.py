"""Answer keys for chapter 4 (part-of-speech tagging)."""

from __future__ import annotations

import numpy as np
from lmbook.teaching.checks import Case
from scipy.special import logsumexp

from . import Key


def forward_log_likelihood(log_start, log_trans, log_emit):
    log_alpha = log_start + log_emit[0]
    for t in range(1, len(log_emit)):
        log_alpha = logsumexp(log_alpha[:, None] + log_trans, axis=0) + log_emit[t]
    return float(logsumexp(log_alpha))


def bio_constraints(tags):
    def may_follow(prev, tag):
        return not tag.startswith("I-") or prev in ("B-" + tag[2:], tag)

    start = np.array([not t.startswith("I-") for t in tags])
    allowed = np.array([[may_follow(prev, tag) for tag in tags] for prev in tags])
    return start, allowed


def _viterbi_by_hand():
    d1 = {"N": 0.7 * 0.5, "V": 0.3 * 0.3}
    d2 = {"N": max(d1["N"] * 0.4, d1["V"] * 0.8) * 0.5, "V": max(d1["N"] * 0.6, d1["V"] * 0.2) * 0.3}
    d3 = {"N": max(d2["N"] * 0.4, d2["V"] * 0.8) * 0.1, "V": max(d2["N"] * 0.6, d2["V"] * 0.2) * 0.6}
    return max(d3.values())


def _hidden_forward():
    rng = np.random.default_rng(20260404)

    def hmm(K, T, low=0.05):
        return (np.log(rng.dirichlet(np.ones(K))), np.log(rng.dirichlet(np.ones(K), size=K)),
                np.log(rng.uniform(low, 1.0, size=(T, K))))

    sparse = hmm(4, 6)
    sparse[1][:, 3] = -np.inf  # state 3 is never entered after the start
    return [Case(hmm(2, 2)), Case(hmm(6, 30)), Case(hmm(3, 800, low=1e-6)), Case(sparse), Case(hmm(1, 4))]


def _hidden_bio():
    return [
        Case((["B-MISC", "I-MISC", "O"],)),
        Case((["O", "B-A", "B-B", "I-A", "I-B"],)),
        Case((["I-X", "B-X"],)),
        Case((["B-PER", "O", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"],)),
    ]


KEYS = {
    "viterbi_by_hand": Key(answer=_viterbi_by_hand()),
    "forward_log_likelihood": Key(forward_log_likelihood, _hidden_forward, giveaways=("forward_backward",)),
    "bio_constraints": Key(bio_constraints, _hidden_bio),
    "trigram_parameters": Key(answer=17**3),
}
