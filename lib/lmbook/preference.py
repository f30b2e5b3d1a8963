"""Preference optimisation: Bradley–Terry reward models, the KL-regularised objective, and DPO.

- :func:`bradley_terry_loss`: P(y_1 > y_2) = sigma(r_1 - r_2); a reward model is fitted by maximising the
  likelihood of observed preferences, loss = -mean log sigma(r_chosen - r_rejected - margin);
- :func:`kl_optimal_policy`: the maximiser of E_{y~pi}[r(y)] - beta KL(pi || pi_ref), which is
  pi*(y) = pi_ref(y) exp(r(y) / beta) / Z; with :func:`kl_divergence` and :func:`regularised_objective`
  to check it on small discrete problems;
- :func:`sequence_logprobs`: log pi(y | x) of a completion, summed over completion tokens only;
- :func:`dpo_loss`: Direct Preference Optimization (sigmoid), IPO and conservative DPO (cDPO), with
  the implicit rewards beta log pi/pi_ref of the chosen and rejected completions;
- :func:`completion_batch`, :func:`rule_pairs` and :func:`train_dpo`: preference pairs of token ids
  turned into a padded batch (pairs whose chosen equals rejected are reported and left out), pairs
  labelled by a rule, and a small DPO training loop that tracks loss, margin, accuracy and
  log-likelihoods. Chapter 16.

Left out on purpose: PPO and the rest of two-stage RLHF (no rollouts or value networks here), online and
iterative DPO, KTO/ORPO and the other dozen variants of trl, and distributed or mixed-precision training.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

__all__ = ["bradley_terry_loss", "kl_optimal_policy", "kl_divergence", "regularised_objective",
           "sequence_logprobs", "dpo_loss", "LOSS_TYPES", "completion_batch", "rule_pairs", "pair_logprobs",
           "train_dpo"]

LOSS_TYPES = ("sigmoid", "ipo", "cdpo")


def _check_beta(beta) -> None:
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta <= 0:
        raise ValueError(f"beta must be a finite number > 0 (the weight of the KL penalty), got {beta!r}")


def _as_vector(name: str, x) -> torch.Tensor:
    x = torch.as_tensor(x)
    if not x.is_floating_point():
        x = x.double()
    if x.dim() != 1:
        raise ValueError(f"{name} must be a 1-d tensor with one number per pair (B,), got shape {tuple(x.shape)}")
    return x


def _same_batch(**tensors) -> None:
    sizes = {name: t.shape[0] for name, t in tensors.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"batch sizes must match (one entry per pair), got {sizes}")


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
    r_chosen, r_rejected = _as_vector("r_chosen", r_chosen), _as_vector("r_rejected", r_rejected)
    _same_batch(r_chosen=r_chosen, r_rejected=r_rejected)
    margin = torch.as_tensor(margin, dtype=r_chosen.dtype, device=r_chosen.device)
    if margin.dim() > 1 or (margin.dim() == 1 and margin.shape[0] != r_chosen.shape[0]):
        raise ValueError(f"margin must be a number or a (B,) tensor with B = {r_chosen.shape[0]}, "
                         f"got shape {tuple(margin.shape)}")
    return -F.logsigmoid(r_chosen - r_rejected - margin).mean()


# ---------------------------------------------------------------------------------------------------------
# The KL-regularised objective on a discrete set of responses
# ---------------------------------------------------------------------------------------------------------

def _as_distribution(name: str, p) -> torch.Tensor:
    p = torch.as_tensor(p, dtype=torch.float64) if not torch.is_tensor(p) else p
    if not p.is_floating_point() or p.dim() < 1 or p.shape[-1] == 0:
        raise ValueError(f"{name} must be a floating-point tensor of probabilities (..., K), got "
                         f"{p.dtype} {tuple(p.shape)}")
    if (p < 0).any() or not torch.allclose(p.sum(-1), torch.ones((), dtype=p.dtype), atol=1e-6):
        raise ValueError(f"{name} must be non-negative and sum to 1 over the last axis, got sums "
                         f"{p.sum(-1).flatten()[:4].tolist()}")
    return p


def kl_divergence(p, q) -> torch.Tensor:
    """KL(p || q) = sum_y p(y) log(p(y) / q(y)) over the last axis (nats); terms with p(y) = 0 are 0."""
    p, q = _as_distribution("p", p), _as_distribution("q", q)
    terms = torch.where(p > 0, p * (torch.log(p) - torch.log(q)), torch.zeros_like(p))
    return terms.sum(-1)


def regularised_objective(policy, ref_probs, rewards, beta: float) -> torch.Tensor:
    """J(pi) = E_{y~pi}[r(y)] - beta KL(pi || pi_ref): expected reward minus the KL penalty. (..., K) -> (...)."""
    _check_beta(beta)
    policy = _as_distribution("policy", policy)
    rewards = torch.as_tensor(rewards, dtype=policy.dtype)
    return (policy * rewards).sum(-1) - beta * kl_divergence(policy, ref_probs)


def kl_optimal_policy(ref_probs, rewards, beta: float) -> torch.Tensor:
    """The policy that maximises E_{y~pi}[r(y)] - beta KL(pi || pi_ref):

        pi*(y) = pi_ref(y) exp(r(y) / beta) / Z,   Z = sum_y pi_ref(y) exp(r(y) / beta),

    a Bayesian posterior with prior pi_ref and likelihood exp(r / beta). Computed as
    softmax(log pi_ref + r / beta), which never overflows. ref_probs, rewards: (..., K) -> (..., K).
    Large beta keeps pi* at pi_ref; beta -> 0 puts all the mass on the best response. Chapter 16.
    """
    _check_beta(beta)
    ref_probs = _as_distribution("ref_probs", ref_probs)
    rewards = torch.as_tensor(rewards, dtype=ref_probs.dtype, device=ref_probs.device)
    if rewards.shape != ref_probs.shape:
        raise ValueError(f"rewards must have the shape of ref_probs {tuple(ref_probs.shape)}, "
                         f"got {tuple(rewards.shape)}")
    return torch.softmax(torch.log(ref_probs) + rewards / beta, dim=-1)  # log 0 = -inf gives pi* = 0 there


# ---------------------------------------------------------------------------------------------------------
# Sequence log-probabilities and the DPO loss
# ---------------------------------------------------------------------------------------------------------

def sequence_logprobs(model, input_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """log pi(y | x) = sum_t m_t log p(x_t | x_<t), over the completion tokens only.

    input_ids (B, T): prompt then completion, right-padded. completion_mask (B, T): 1 on the completion's
    tokens (its end-of-turn token included), 0 on the prompt and on padding. ``model(ids)`` returns
    logits (B, T, V), where logits[:, t] predicts token t + 1, so the logits are shifted by one against
    the tokens: token t is scored by position t - 1, and position 0 is never scored. Returns (B,).
    Right padding changes nothing for a causal model: no real token attends to a later pad. Chapter 16.
    """
    if not torch.is_tensor(input_ids) or input_ids.is_floating_point() or input_ids.dim() != 2:
        raise ValueError(f"input_ids must be an integer tensor (B, T), got {getattr(input_ids, 'dtype', input_ids)!r} "
                         f"{tuple(getattr(input_ids, 'shape', ()))}")
    mask = torch.as_tensor(completion_mask, device=input_ids.device)
    if mask.shape != input_ids.shape:
        raise ValueError(f"completion_mask must have the shape of input_ids {tuple(input_ids.shape)}, "
                         f"got {tuple(mask.shape)}")
    if ((mask != 0) & (mask != 1)).any():
        raise ValueError("completion_mask must hold only 0 and 1")
    if mask[:, 0].any():
        raise ValueError("completion_mask[:, 0] must be 0: the first token has no context and cannot be scored "
                         "(a completion always follows a prompt)")
    empty = (mask.sum(dim=1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"completion_mask is empty (no completion token) in rows {empty[:8]}")
    logits = model(input_ids)  # (B, T, V)
    logits = logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32))  # (B, T-1, V): predicts 1..T-1
    targets = input_ids[:, 1:]  # (B, T-1)
    token_logps = logits.gather(-1, targets[..., None]).squeeze(-1) - logits.logsumexp(dim=-1)  # (B, T-1)
    return (token_logps * mask[:, 1:].to(token_logps.dtype)).sum(dim=1)


def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta: float = 0.1,
             loss_type: str = "sigmoid", label_smoothing: float = 0.0):
    """The DPO loss and its implicit rewards, from sequence log-probabilities (B,) of the four kinds.

    Implicit rewards: r_w = beta (log pi(y_w|x) - log pi_ref(y_w|x)), r_l likewise; h = (r_w - r_l) / beta.

        "sigmoid" (DPO):  -log sigma(beta h)
        "cdpo" (conservative DPO, labels flipped with probability eps = label_smoothing):
                          -(1 - eps) log sigma(beta h) - eps log sigma(-beta h)
        "ipo" (IPO):      (h - 1 / (2 beta))^2

    Returns (loss averaged over pairs, r_w (B,), r_l (B,)); the rewards are detached. The reference-free
    variant passes zeros as the reference log-probs. trl's IPO divides each log-ratio by its completion
    length first: pass mean per-token log-probs to get it. label_smoothing must be in [0, 0.5) and is used
    only by "cdpo". Chapter 16.
    """
    _check_beta(beta)
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) or not (
            0 <= label_smoothing < 0.5):
        raise ValueError(f"label_smoothing must be in [0, 0.5) (the probability that a label is flipped), "
                         f"got {label_smoothing!r}")
    if label_smoothing and loss_type != "cdpo":
        raise ValueError(f"label_smoothing is used only by loss_type='cdpo', got loss_type={loss_type!r} with "
                         f"label_smoothing={label_smoothing}")
    pc, pr = _as_vector("policy_chosen_logps", policy_chosen_logps), _as_vector("policy_rejected_logps",
                                                                               policy_rejected_logps)
    rc, rr = _as_vector("ref_chosen_logps", ref_chosen_logps), _as_vector("ref_rejected_logps", ref_rejected_logps)
    _same_batch(policy_chosen_logps=pc, policy_rejected_logps=pr, ref_chosen_logps=rc, ref_rejected_logps=rr)
    chosen_logratios = pc - rc.to(pc.dtype)  # log pi(y_w|x) / pi_ref(y_w|x)
    rejected_logratios = pr - rr.to(pr.dtype)
    h = chosen_logratios - rejected_logratios
    if loss_type == "sigmoid":
        losses = -F.logsigmoid(beta * h)
    elif loss_type == "cdpo":
        eps = label_smoothing
        losses = -(1 - eps) * F.logsigmoid(beta * h) - eps * F.logsigmoid(-beta * h)
    else:  # ipo: regress h onto 1 / (2 beta) instead of pushing it to infinity
        losses = (h - 1 / (2 * beta)) ** 2
    return losses.mean(), beta * chosen_logratios.detach(), beta * rejected_logratios.detach()


# ---------------------------------------------------------------------------------------------------------
# Preference pairs, batches, and a DPO training loop
# ---------------------------------------------------------------------------------------------------------

def rule_pairs(labels, max_per_prompt: int = 1) -> list[tuple[int, int, int]]:
    """Pairs from completions labelled by a rule: (prompt index, chosen index, rejected index).

    labels[i][j] is True when completion j of prompt i satisfies the rule. Each prompt gives up to
    ``max_per_prompt`` pairs, matching its accepted and rejected completions in order; a prompt whose
    completions are all accepted, or all rejected, gives none (there is nothing to prefer).
    """
    if isinstance(max_per_prompt, bool) or not isinstance(max_per_prompt, int) or max_per_prompt < 1:
        raise ValueError(f"max_per_prompt must be an int >= 1, got {max_per_prompt!r}")
    pairs = []
    for i, row in enumerate(labels):
        good = [j for j, ok in enumerate(row) if ok]
        bad = [j for j, ok in enumerate(row) if not ok]
        pairs += [(i, w, lo) for w, lo in list(zip(good, bad, strict=False))[:max_per_prompt]]
    return pairs


def completion_batch(pairs, pad_id: int = 0) -> dict:
    """Token ids of preference pairs -> one right-padded batch, chosen rows first (trl's layout).

    pairs: a list of (prompt_ids, chosen_ids, rejected_ids), each a list of ints. Returns a dict with
    input_ids (2N, T) (rows 0..N-1 the prompt + chosen completion, rows N..2N-1 prompt + rejected),
    completion_mask (2N, T) (1 on completion tokens) and ``kept``, the indices of the pairs used. A pair
    whose chosen completion equals its rejected one carries no preference: its DPO gradient is exactly 0.
    Such pairs are left out and reported with a warning, never trained on silently.
    """
    kept, identical = [], []
    for k, (prompt, chosen, rejected) in enumerate(pairs):
        if len(prompt) == 0 or len(chosen) == 0 or len(rejected) == 0:
            raise ValueError(f"pair {k}: the prompt and both completions must be non-empty lists of token ids")
        (identical if list(chosen) == list(rejected) else kept).append(k)
    if identical:
        warnings.warn(f"{len(identical)} of {len(pairs)} pairs have chosen == rejected and are left out "
                      f"(pairs {identical[:8]}): they carry no preference", stacklevel=2)
    if not kept:
        raise ValueError("no usable pair: every pair has chosen == rejected")
    rows = [(pairs[k][0], pairs[k][1]) for k in kept] + [(pairs[k][0], pairs[k][2]) for k in kept]
    width = max(len(p) + len(c) for p, c in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (prompt, completion) in enumerate(rows):
        n_p, n_c = len(prompt), len(completion)
        input_ids[r, :n_p + n_c] = torch.tensor(list(prompt) + list(completion))
        completion_mask[r, n_p:n_p + n_c] = 1
    return {"input_ids": input_ids, "completion_mask": completion_mask, "kept": kept}


def _pair_logps(model, batch, index):
    n = batch["input_ids"].shape[0] // 2
    rows = torch.cat([index, index + n])  # the chosen rows, then their rejected partners
    ids, mask = batch["input_ids"][rows], batch["completion_mask"][rows]
    width = int((mask.cumsum(1) * mask).argmax(1).max()) + 1  # drop padding columns no row of this batch needs
    logps = sequence_logprobs(model, ids[:, :width], mask[:, :width])
    return logps[:len(index)], logps[len(index):]


@torch.no_grad()
def pair_logprobs(model, batch, batch_size: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(y_w|x) and log pi(y_l|x), (N,) each, for every pair of ``batch``, without gradients."""
    n = batch["input_ids"].shape[0] // 2
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items() if torch.is_tensor(v)}
    parts = [_pair_logps(model, batch, torch.arange(s, min(s + batch_size, n), device=device))
             for s in range(0, n, batch_size)]
    return torch.cat([c for c, _ in parts]), torch.cat([r for _, r in parts])


def train_dpo(model, batch, ref_chosen_logps, ref_rejected_logps, beta: float = 0.1, loss_type: str = "sigmoid",
              label_smoothing: float = 0.0, steps: int = 10, batch_size: int = 4, lr: float = 1e-3,
              seed: int = 0, callback=None) -> dict:
    """Minimise :func:`dpo_loss` over the pairs of ``batch`` (from :func:`completion_batch`) with AdamW on the
    parameters that require gradients (a LoRA adapter), ``batch_size`` pairs per step, reshuffled every epoch.

    The reference log-probs (N,) are computed once beforehand, e.g. with the adapter disabled: the
    reference never changes, so there is no need for a second forward pass every step. Records per step,
    for the step's pairs as they were before its update: loss, reward margin r_w - r_l and accuracy
    (r_w > r_l), their mean r_w and r_l, and the policy's mean log pi(y_w|x) and log pi(y_l|x).
    ``callback(step, model)`` runs after each step and may return a dict of extra numbers to record.
    """
    _check_beta(beta)
    n = batch["input_ids"].shape[0] // 2
    ref_c, ref_r = _as_vector("ref_chosen_logps", ref_chosen_logps), _as_vector("ref_rejected_logps",
                                                                                 ref_rejected_logps)
    if ref_c.shape[0] != n or ref_r.shape[0] != n:
        raise ValueError(f"batch sizes must match: the batch holds {n} pairs, got {ref_c.shape[0]} and "
                         f"{ref_r.shape[0]} reference log-probs")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no parameter that requires gradients (add a LoRA adapter first)")
    device = params[0].device
    batch = {k: v.to(device) for k, v in batch.items() if torch.is_tensor(v)}
    ref_c, ref_r = ref_c.to(device), ref_r.to(device)
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    history = {k: [] for k in ("step", "loss", "margin", "accuracy", "reward_chosen", "reward_rejected",
                               "logp_chosen", "logp_rejected")}
    order = []
    model.train()
    for step in range(steps):
        if len(order) < batch_size:  # a new epoch: a fresh permutation of the pairs
            order += torch.randperm(n, generator=generator).tolist()
        index, order = torch.tensor(order[:batch_size], device=device), order[batch_size:]
        logp_c, logp_r = _pair_logps(model, batch, index)
        loss, r_w, r_l = dpo_loss(logp_c, logp_r, ref_c[index], ref_r[index], beta, loss_type, label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        values = {"step": step + 1, "loss": loss.item(), "margin": (r_w - r_l).mean().item(),
                  "accuracy": (r_w > r_l).float().mean().item(), "reward_chosen": r_w.mean().item(),
                  "reward_rejected": r_l.mean().item(), "logp_chosen": logp_c.mean().item(),
                  "logp_rejected": logp_r.mean().item()}
        if callback is not None:
            values.update(callback(step + 1, model) or {})
        for key, value in values.items():
            history.setdefault(key, []).append(value)
    model.eval()
    return history
