"""Policy gradients with verifiable rewards: REINFORCE with a baseline, and GRPO.

- :func:`bandit_gradient` and :func:`reinforce_bandit_estimate`: the exact gradient of the expected reward of a
  softmax policy over K arms, p_i (r_i - E[r]), and REINFORCE's Monte Carlo estimate of it;
- :func:`reinforce_loss`: -mean_i (r_i - b) log pi(y_i), whose gradient is the REINFORCE estimate;
- :func:`group_advantages`: GRPO's advantage, each reward minus its group's mean, divided by the group's std;
- :func:`kl_k3`: the per-token estimator exp(d) - d - 1, d = log pi_ref - log pi, of KL(pi || pi_ref);
- :func:`grpo_token_loss` and :func:`grpo_loss`: PPO's clipped ratio objective with group advantages and a
  KL penalty, per token, then averaged over the completion tokens in one of ``AGGREGATIONS``. Chapter 17.

All of it works on numbers: rewards and log-probabilities. Sampling completions and scoring them is the
chapter's loop. Left out on purpose: value networks (PPO's critic, which GRPO replaces by the group mean),
sequence-level ratios (GSPO) and trl's other loss variants.
"""

from __future__ import annotations

import torch

from . import validate

__all__ = ["AGGREGATIONS", "bandit_gradient", "reinforce_bandit_estimate", "reinforce_loss", "group_advantages",
           "kl_k3", "grpo_token_loss", "grpo_loss"]

AGGREGATIONS = ("sequence", "token", "constant")


# ---------------------------------------------------------------------------------------------------------
# REINFORCE on a bandit, where the gradient is known
# ---------------------------------------------------------------------------------------------------------


def bandit_gradient(logits: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    """The exact gradient of J = E_{i ~ softmax(logits)}[r_i] with respect to the logits:

        dJ/dz_i = p_i (r_i - sum_j p_j r_j),   p = softmax(z).   logits, rewards: (K,) -> (K,)."""
    _check_bandit(logits, rewards)
    p = torch.softmax(logits, dim=-1)
    return p * (rewards - (p * rewards).sum())


def reinforce_bandit_estimate(logits: torch.Tensor, rewards: torch.Tensor, n_samples: int,
                              baseline: float = 0.0, generator: torch.Generator | None = None) -> torch.Tensor:
    """REINFORCE's Monte Carlo estimate of :func:`bandit_gradient` from ``n_samples`` arms a_s ~ p:

        g = (1/S) sum_s (r_{a_s} - b) grad log p_{a_s},   grad_z log p_a = onehot(a) - p.

    Unbiased for any constant baseline b, because E[grad log p_a] = 0; a good b lowers its variance."""
    _check_estimate(logits, rewards, n_samples, baseline, generator)
    p = torch.softmax(logits, dim=-1)  # (K,)
    arms = torch.multinomial(p, n_samples, replacement=True, generator=generator)  # (S,)
    score = torch.nn.functional.one_hot(arms, p.numel()).to(p.dtype) - p  # (S, K): grad log p_a
    return ((rewards[arms] - baseline)[:, None] * score).mean(dim=0)


def reinforce_loss(logps: torch.Tensor, rewards: torch.Tensor, baseline: float | torch.Tensor = 0.0) -> torch.Tensor:
    """The surrogate loss whose gradient is REINFORCE's estimate of -grad E[r]:

        loss = -(1/N) sum_i (r_i - b_i) log pi(y_i).   logps, rewards: (N,); baseline: a float or (N,).

    The advantage r - b is a constant (no gradient flows into the baseline)."""
    _check_reinforce(logps, rewards, baseline)
    advantage = (rewards - baseline).detach()
    return -(advantage * logps).mean()


# ---------------------------------------------------------------------------------------------------------
# GRPO
# ---------------------------------------------------------------------------------------------------------


def group_advantages(rewards: torch.Tensor, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """GRPO's advantage for G completions of each of P prompts (DeepSeekMath, outcome supervision):

        A_pg = (r_pg - mean_g r_pg) / (std_g r_pg + eps)    (std with Bessel's correction, as trl);
        scale=False: A_pg = r_pg - mean_g r_pg               (Dr. GRPO: no division by the std).

    rewards (P, G) -> (P, G). A group whose rewards are all equal gets advantage 0: it teaches nothing. Dividing
    by the std up-weights prompts that are nearly always solved or nearly always failed (small std), the bias
    that Dr. GRPO removes with scale=False."""
    _check_group_advantages(rewards, scale, eps)
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # (P, G)
    if not scale:
        return centred
    return centred / (rewards.std(dim=1, keepdim=True) + eps)


def kl_k3(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(pi || pi_ref) at sampled tokens y ~ pi (DeepSeekMath, after Schulman):

        k3 = exp(d) - d - 1,   d = log pi_ref(y) - log pi(y).

    E_pi[exp(d)] = 1, so E_pi[k3] = E_pi[-d] = KL(pi || pi_ref): unbiased; and e^d >= 1 + d makes k3 >= 0
    for every sample. Shapes: any, equal -> the same shape."""
    _check_same_shape(logps=logps, ref_logps=ref_logps)
    d = ref_logps - logps
    return torch.exp(d) - d - 1


def grpo_token_loss(logps, old_logps, ref_logps, advantages, clip_eps: float = 0.2,
                    beta: float = 0.04) -> torch.Tensor:
    """GRPO's loss at every completion token, to be averaged by :func:`grpo_loss`:

        rho_t = exp(log pi(y_t) - log pi_old(y_t))          (the importance ratio; 1 on-policy)
        l_t = -min(rho_t A, clip(rho_t, 1 - eps, 1 + eps) A) + beta k3_t

    logps, old_logps, ref_logps: (B, T) log-probs of the sampled tokens; advantages: (B,) -> (B, T)."""
    _check_grpo(logps, old_logps, ref_logps, advantages, clip_eps, beta)
    ratio = torch.exp(logps - old_logps.detach())  # (B, T)
    adv = advantages.detach()[:, None]  # (B, 1): one advantage for every token of a completion
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    return -surrogate + beta * kl_k3(logps, ref_logps.detach())


def grpo_loss(logps, old_logps, ref_logps, advantages, mask, clip_eps: float = 0.2, beta: float = 0.04,
              aggregation: str = "sequence", max_length: int | None = None) -> torch.Tensor:
    """GRPO's loss: :func:`grpo_token_loss` averaged over the completion tokens (``mask`` (B, T) bool, False at
    padding), in one of three ways, with |o_i| = sum_t mask[i, t]:

        "sequence": (1/B) sum_i (1/|o_i|) sum_t l_it   (DeepSeekMath's GRPO: each completion weighs the same)
        "token":    sum_it l_it / sum_i |o_i|          (each token weighs the same; DAPO, trl's "bnpo")
        "constant": sum_it l_it / (B L)                (Dr. GRPO: no length normalisation)

    L is ``max_length``, the longest completion the sampler may write, fixed for the whole run (Dr. GRPO,
    trl's max_completion_length); it defaults to mask.shape[1], which is only fixed if every batch is padded
    to the same length.

    "sequence" gives a long wrong answer a smaller penalty per token than a short one, a bias towards longer
    wrong answers; "constant" with ``group_advantages(scale=False)`` is Dr. GRPO."""
    _check_grpo_loss(mask, logps, aggregation, max_length)
    per_token = grpo_token_loss(logps, old_logps, ref_logps, advantages, clip_eps, beta)  # (B, T)
    per_token = per_token.masked_fill(~mask, 0.0)  # padding counts for nothing, even where its loss is inf
    if aggregation == "sequence":
        return (per_token.sum(dim=1) / mask.sum(dim=1)).mean()
    if aggregation == "token":
        return per_token.sum() / mask.sum()
    return per_token.sum() / (mask.shape[0] * (max_length or mask.shape[1]))


# ---------------------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------------------


def _check_bandit(logits, rewards) -> None:
    validate.tensor("logits", logits, ndim=1)
    if logits.numel() < 2:
        raise ValueError(f"logits must hold at least 2 arms, got shape {tuple(logits.shape)}")
    _check_same_shape(logits=logits, rewards=rewards)


def _check_estimate(logits, rewards, n_samples, baseline, generator) -> None:
    _check_bandit(logits, rewards)
    validate.integer("n_samples", n_samples)
    validate.number("baseline", baseline)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {validate.describe(generator)}")


def _check_reinforce(logps, rewards, baseline) -> None:
    _check_same_shape(logps=logps, rewards=rewards, ndim=1)
    if isinstance(baseline, torch.Tensor):
        validate.tensor("baseline", baseline, ndim=1, shape=tuple(logps.shape))
    else:
        validate.number("baseline", baseline)


def _check_group_advantages(rewards, scale, eps) -> None:
    validate.tensor("rewards", rewards, ndim=2)
    if rewards.shape[0] < 1 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must have shape (P, G) with P >= 1 prompts and G >= 2 completions each, "
                         f"got {tuple(rewards.shape)}")
    validate.boolean("scale", scale)
    validate.number("eps", eps, low=0, low_open=True)


def _check_same_shape(ndim=None, **tensors) -> None:
    (first, ref), *rest = tensors.items()
    validate.tensor(first, ref, ndim=ndim)
    if ref.numel() == 0:
        raise ValueError(f"{first} must not be empty, got shape {tuple(ref.shape)}")
    for name, value in rest:
        validate.tensor(name, value)
        if value.shape != ref.shape:
            raise ValueError(f"{name} must have the shape of {first} {tuple(ref.shape)}, got {tuple(value.shape)}")


def _check_grpo(logps, old_logps, ref_logps, advantages, clip_eps, beta) -> None:
    _check_same_shape(logps=logps, old_logps=old_logps, ref_logps=ref_logps, ndim=2)
    validate.tensor("advantages", advantages, ndim=1, shape=(logps.shape[0],))
    validate.number("clip_eps", clip_eps, low=0, high=1, low_open=True, high_open=True)
    validate.number("beta", beta, low=0)


def _check_grpo_loss(mask, logps, aggregation, max_length) -> None:
    validate.choice("aggregation", aggregation, AGGREGATIONS)
    validate.tensor("mask", mask, kind=None, ndim=2)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True at completion tokens), got {validate.describe(mask)}")
    validate.tensor("logps", logps, ndim=2)
    if mask.shape != logps.shape:
        raise ValueError(f"mask must have the shape of logps {tuple(logps.shape)}, got {tuple(mask.shape)}")
    if mask.numel() == 0 or not mask.any(dim=1).all():
        raise ValueError("mask must mark at least one completion token in every row")
    if max_length is not None:
        validate.integer("max_length", max_length, low=mask.shape[1])
