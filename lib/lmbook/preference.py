"""Preferences and the KL-regularised objective: Bradley–Terry reward models, the optimal policy, the DPO loss.

- :func:`bradley_terry_loss`: P(y_1 > y_2) = sigma(r_1 - r_2); a reward model is fitted by maximising the
  likelihood of observed preferences, loss = -mean log sigma(r_chosen - r_rejected - margin);
- :func:`kl_optimal_policy`: the maximiser of E_{y~pi}[r(y)] - beta KL(pi || pi_ref), which is
  pi*(y) = pi_ref(y) exp(r(y) / beta) / Z; with :func:`kl_divergence` and :func:`regularised_objective`
  to check it on small discrete problems;
- :func:`dpo_loss`: Direct Preference Optimization (sigmoid), IPO and conservative DPO (cDPO), with
  the implicit rewards beta log pi/pi_ref of the chosen and rejected completions. Chapter 16.

All of it works on numbers: rewards, probabilities, log-probabilities. Turning a language model and token ids
into those log-probabilities, preference batches and a training loop is :mod:`lmbook.dpo`.
Left out on purpose: PPO and the rest of two-stage RLHF (no rollouts or value networks here), KTO/ORPO and
the other dozen variants of trl.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import validate

__all__ = ["bradley_terry_loss", "kl_optimal_policy", "kl_divergence", "regularised_objective", "dpo_loss",
           "LOSS_TYPES"]

LOSS_TYPES = ("sigmoid", "ipo", "cdpo")


# ---------------------------------------------------------------------------------------------------------
# Bradley–Terry
# ---------------------------------------------------------------------------------------------------------


def bradley_terry_loss(r_chosen, r_rejected, margin=0.0) -> torch.Tensor:
    """Negative log-likelihood of the Bradley–Terry model, averaged over pairs:

        P(chosen > rejected) = sigma(r_chosen - r_rejected),
        loss = -mean_i log sigma(r_chosen_i - r_rejected_i - margin_i).

    r_chosen, r_rejected: (B,) scalar rewards of the preferred and the other completion of each pair.
    margin: a number or (B,) tensor asking the chosen reward to exceed the rejected one by that much (as in
    Llama 2's reward models); 0 is plain Bradley–Terry. Matches trl's RewardTrainer. Chapter 16.
    """
    _check_rewards(r_chosen, r_rejected, margin)
    return -F.logsigmoid(r_chosen - r_rejected - margin).mean()


# ---------------------------------------------------------------------------------------------------------
# The KL-regularised objective on a discrete set of responses
# ---------------------------------------------------------------------------------------------------------


def kl_divergence(p, q) -> torch.Tensor:
    """KL(p || q) = sum_y p(y) log(p(y) / q(y)) over the last axis (nats); terms with p(y) = 0 are 0.

    p: (..., K) probabilities (a tensor or a list); q: the shape of p, or (K,) for one q shared by every p."""
    p, q = _check_kl_args(p, q)
    terms = torch.where(p > 0, p * (torch.log(p) - torch.log(q)), torch.zeros_like(p))
    return terms.sum(-1)


def regularised_objective(policy, ref_probs, rewards, beta: float) -> torch.Tensor:
    """J(pi) = E_{y~pi}[r(y)] - beta KL(pi || pi_ref): expected reward minus the KL penalty. (..., K) -> (...);
    ref_probs and rewards have the policy's shape, or (K,) for one reference and reward shared by all."""
    policy, ref_probs, rewards = _check_objective_args(policy, ref_probs, rewards, beta)
    return (policy * rewards).sum(-1) - beta * kl_divergence(policy, ref_probs)


def kl_optimal_policy(ref_probs, rewards, beta: float) -> torch.Tensor:
    """The policy that maximises E_{y~pi}[r(y)] - beta KL(pi || pi_ref):

        pi*(y) = pi_ref(y) exp(r(y) / beta) / Z,   Z = sum_y pi_ref(y) exp(r(y) / beta),

    a Bayesian posterior with prior pi_ref and likelihood exp(r / beta). Computed as
    softmax(log pi_ref + r / beta), which never overflows. ref_probs, rewards: (..., K) -> (..., K).
    Large beta keeps pi* at pi_ref; beta -> 0 puts all the mass on the best response. Chapter 16.
    """
    ref_probs, rewards = _check_optimum_args(ref_probs, rewards, beta)
    return torch.softmax(torch.log(ref_probs) + rewards / beta, dim=-1)  # log 0 = -inf gives pi* = 0 there


def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta: float = 0.1,
             loss_type: str = "sigmoid", label_smoothing: float = 0.0):
    """The DPO loss and its implicit rewards, from sequence log-probabilities (B,) of the four kinds.

    Implicit rewards: r_w = beta (log pi(y_w|x) - log pi_ref(y_w|x)), r_l likewise; h = (r_w - r_l) / beta.

        "sigmoid" (DPO):  -log sigma(beta h)
        "cdpo" (conservative DPO, labels flipped with probability eps = label_smoothing, in [0, 0.5)):
                          -(1 - eps) log sigma(beta h) - eps log sigma(-beta h)
        "ipo" (IPO):      (h - 1 / (2 beta))^2

    Returns (loss averaged over pairs, r_w (B,), r_l (B,)), the rewards detached. Reference-free DPO passes
    zeros as the reference log-probs; trl's IPO first divides each log-ratio by its completion length (pass
    mean per-token log-probs to get it). Chapter 16.
    """
    _check_dpo_args(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta,
                    loss_type, label_smoothing)
    chosen_logratios = policy_chosen_logps - ref_chosen_logps  # log pi(y_w|x) / pi_ref(y_w|x)
    rejected_logratios = policy_rejected_logps - ref_rejected_logps
    h = chosen_logratios - rejected_logratios
    if loss_type == "sigmoid":
        losses = -F.logsigmoid(beta * h)
    elif loss_type == "cdpo":
        losses = -(1 - label_smoothing) * F.logsigmoid(beta * h) - label_smoothing * F.logsigmoid(-beta * h)
    else:  # ipo: regress h onto 1 / (2 beta) instead of pushing it to infinity
        losses = (h - 1 / (2 * beta)) ** 2
    return losses.mean(), beta * chosen_logratios.detach(), beta * rejected_logratios.detach()


# ---------------------------------------------------------------------------------------------------------
# Checks: each raises a TypeError or ValueError that names the argument
# ---------------------------------------------------------------------------------------------------------


def _check_vectors(**vectors):
    """Each a finite float tensor (B,) with B >= 1, all with the same B (one number per pair)."""
    for name, x in vectors.items():
        validate.tensor(name, x)
        if x.dim() != 1 or x.shape[0] == 0:
            raise ValueError(f"{name} must be a 1-d tensor with one number per pair (B,), B >= 1, got shape "
                             f"{tuple(x.shape)}")
    sizes = {name: x.shape[0] for name, x in vectors.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"batch sizes must match (one entry per pair), got {sizes}")


def _check_rewards(r_chosen, r_rejected, margin):
    _check_vectors(r_chosen=r_chosen, r_rejected=r_rejected)
    if torch.is_tensor(margin):
        validate.tensor("margin", margin, ndim=(0, 1))
        if margin.dim() == 1 and margin.shape[0] != r_chosen.shape[0]:
            raise ValueError(f"margin must be a number or a (B,) tensor with B = {r_chosen.shape[0]}, "
                             f"got shape {tuple(margin.shape)}")
        if (margin < 0).any():
            raise ValueError("margin must be >= 0 (how much the chosen reward must exceed the rejected one)")
    else:
        validate.number("margin", margin, low=0)


def _as_float_tensor(name, x):
    """A tensor as it is, anything else (a list of numbers) as a float64 tensor."""
    if torch.is_tensor(x):
        return x
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be a tensor or a list of numbers, got {validate.describe(x)}")
    try:
        return torch.as_tensor(x, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be a tensor or a list of numbers, got {validate.describe(x)}") from None


def _as_distribution(name, p):
    p = _as_float_tensor(name, p)
    validate.tensor(name, p, kind="float")
    if p.dim() < 1 or p.shape[-1] == 0:
        raise ValueError(f"{name} must hold probabilities over the last axis (..., K) with K >= 1, "
                         f"got shape {tuple(p.shape)}")
    if (p < 0).any() or not torch.allclose(p.sum(-1), torch.ones((), dtype=p.dtype), atol=1e-6):
        raise ValueError(f"{name} must be non-negative and sum to 1 over the last axis, got sums "
                         f"{p.sum(-1).flatten()[:4].tolist()}")
    return p


def _check_shared(name, x, like, like_name):
    if x.shape != like.shape and x.shape != like.shape[-1:]:
        raise ValueError(f"{name} must have the shape of {like_name} {tuple(like.shape)}, or {tuple(like.shape[-1:])}"
                         f", got {tuple(x.shape)}")


def _check_kl_args(p, q):
    p, q = _as_distribution("p", p), _as_distribution("q", q)
    _check_shared("q", q, p, "p")
    return p, q


def _as_rewards(rewards, like):
    rewards = _as_float_tensor("rewards", rewards)
    validate.tensor("rewards", rewards, kind=None)
    return rewards.to(dtype=like.dtype, device=like.device)


def _check_objective_args(policy, ref_probs, rewards, beta):
    validate.number("beta", beta, low=0, low_open=True)
    policy, ref_probs = _as_distribution("policy", policy), _as_distribution("ref_probs", ref_probs)
    rewards = _as_rewards(rewards, policy)
    _check_shared("ref_probs", ref_probs, policy, "policy")
    _check_shared("rewards", rewards, policy, "policy")
    return policy, ref_probs, rewards


def _check_optimum_args(ref_probs, rewards, beta):
    validate.number("beta", beta, low=0, low_open=True)
    ref_probs = _as_distribution("ref_probs", ref_probs)
    rewards = _as_rewards(rewards, ref_probs)
    if rewards.shape != ref_probs.shape:
        raise ValueError(f"rewards must have the shape of ref_probs {tuple(ref_probs.shape)}, "
                         f"got {tuple(rewards.shape)}")
    return ref_probs, rewards


def _check_dpo_args(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta,
                    loss_type, label_smoothing):
    validate.number("beta", beta, low=0, low_open=True)
    validate.choice("loss_type", loss_type, LOSS_TYPES)
    validate.number("label_smoothing", label_smoothing, low=0, high=0.5, high_open=True)
    if label_smoothing and loss_type != "cdpo":
        raise ValueError(f"label_smoothing is used only by loss_type='cdpo', got loss_type={loss_type!r} with "
                         f"label_smoothing={label_smoothing}")
    _check_vectors(policy_chosen_logps=policy_chosen_logps, policy_rejected_logps=policy_rejected_logps,
                   ref_chosen_logps=ref_chosen_logps, ref_rejected_logps=ref_rejected_logps)
