"""Bad-input cases for lmbook.preference (chapter 16): Bradley–Terry, the KL-regularised optimum, the DPO loss."""

import torch
from lmbook import preference as P

from ._case import Case


def _vector(*values):
    return torch.tensor(values, dtype=torch.float64)


def _logps():
    g = torch.Generator().manual_seed(0)
    names = ("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps")
    return {name: torch.randn(3, generator=g, dtype=torch.float64) - 10 for name in names}


PROBS = (0.5, 0.3, 0.2)
REWARDS = (0.0, 1.0, 2.0)
AS_LIST_OK = {"not_tensor"}  # documented: probabilities and rewards may be given as lists of numbers
BATCH_OK = {"not_tensor", "extra_dim"}  # and p or policy may be a batch (..., K) of distributions
INT_REWARDS_OK = {"not_tensor", "int_dtype"}  # integer rewards are rewards (converted to the probabilities' dtype)

CASES = [
    Case("bradley_terry_loss", lambda: (P.bradley_terry_loss, {"r_chosen": _vector(1.0, 0.5, -0.2),
                                                               "r_rejected": _vector(0.3, 0.8, -1.0),
                                                               "margin": 0.0})),
    Case("bradley_terry_loss", lambda: (P.bradley_terry_loss, {"r_chosen": _vector(1.0, 0.5, -0.2),
                                                               "r_rejected": _vector(0.3, 0.8, -1.0),
                                                               "margin": _vector(0.1, 0.2, 0.3)}),
         label="tensor margin"),
    Case("kl_divergence", lambda: (P.kl_divergence, {"p": _vector(*PROBS), "q": _vector(0.2, 0.2, 0.6)}),
         ok={"p": BATCH_OK, "q": AS_LIST_OK}),
    Case("kl_divergence", lambda: (P.kl_divergence, {"p": list(PROBS), "q": [0.2, 0.2, 0.6]}), label="lists"),
    Case("regularised_objective",
         lambda: (P.regularised_objective, {"policy": _vector(0.2, 0.3, 0.5), "ref_probs": _vector(*PROBS),
                                            "rewards": _vector(*REWARDS), "beta": 0.5}),
         ok={"policy": BATCH_OK, "ref_probs": AS_LIST_OK, "rewards": INT_REWARDS_OK}),
    Case("kl_optimal_policy", lambda: (P.kl_optimal_policy, {"ref_probs": _vector(*PROBS),
                                                             "rewards": _vector(*REWARDS), "beta": 0.5}),
         ok={"ref_probs": AS_LIST_OK, "rewards": INT_REWARDS_OK}),
    Case("kl_optimal_policy", lambda: (P.kl_optimal_policy, {"ref_probs": list(PROBS), "rewards": list(REWARDS),
                                                             "beta": 0.5}), label="lists"),
    Case("dpo_loss", lambda: (P.dpo_loss, {**_logps(), "beta": 0.1, "loss_type": "cdpo", "label_smoothing": 0.0})),
    Case("dpo_loss", lambda: (P.dpo_loss, {**_logps(), "beta": 0.5, "loss_type": "ipo"}), label="ipo"),
]

SKIP = {}
