"""Bad-input cases for lmbook.policy_gradient (chapter 17): the bandit, REINFORCE, group advantages, k3, GRPO."""

import torch
from lmbook import policy_gradient as PG

from ._case import Case


def _t(*values):
    return torch.tensor(values, dtype=torch.float64)


def _grpo():
    g = torch.Generator().manual_seed(0)
    logps = -torch.rand(2, 3, generator=g, dtype=torch.float64)
    return {"logps": logps, "old_logps": logps + 0.1, "ref_logps": logps - 0.1, "advantages": _t(0.5, -0.5)}


MASK = torch.tensor([[True, True, False], [True, True, True]])
VALID_ZERO = {"zero", "negative"}  # documented: any finite baseline (constant b) is allowed

CASES = [
    Case("bandit_gradient", lambda: (PG.bandit_gradient, {"logits": _t(0.1, 0.5, -0.2), "rewards": _t(1.0, 0.0, 0.5)})),
    Case("reinforce_bandit_estimate",
         lambda: (PG.reinforce_bandit_estimate, {"logits": _t(0.1, 0.5, -0.2), "rewards": _t(1.0, 0.0, 0.5),
                                                 "n_samples": 4, "baseline": 0.5,
                                                 "generator": torch.Generator().manual_seed(0)}),
         ok={"baseline": VALID_ZERO}),
    Case("reinforce_loss", lambda: (PG.reinforce_loss, {"logps": _t(-1.0, -2.0), "rewards": _t(1.0, 0.0),
                                                        "baseline": 0.5}), ok={"baseline": VALID_ZERO}),
    Case("reinforce_loss", lambda: (PG.reinforce_loss, {"logps": _t(-1.0, -2.0), "rewards": _t(1.0, 0.0),
                                                        "baseline": _t(0.5, 0.5)}), label="tensor baseline"),
    Case("group_advantages", lambda: (PG.group_advantages, {"rewards": torch.tensor([[1.0, 0.0, 1.0]]),
                                                            "scale": True, "eps": 1e-4})),
    Case("kl_k3", lambda: (PG.kl_k3, {"logps": _t(-1.0, -2.0), "ref_logps": _t(-1.5, -0.5)})),
    Case("grpo_token_loss", lambda: (PG.grpo_token_loss, {**_grpo(), "clip_eps": 0.2, "beta": 0.04}),
         ok={"beta": {"zero"}}),  # documented: beta = 0 drops the KL penalty
    Case("grpo_loss", lambda: (PG.grpo_loss, {**_grpo(), "mask": MASK.clone(), "clip_eps": 0.2, "beta": 0.04,
                                              "aggregation": "token", "max_length": 4}), ok={"beta": {"zero"}}),
]

SKIP = {}
