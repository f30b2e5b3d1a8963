"""Training on a task that a program can check: supervised steps on written solutions, then reinforcement
learning with verifiable rewards (RLVR) by GRPO's loop.

- :func:`supervised_loss`: cross-entropy on the target characters of a batch of problems (chapter 9's loss,
  counted on the answer only);
- :func:`complete`: sample (or greedily write) completions of a batch of prompts, with the mask of the
  generated tokens; :func:`token_logps`: the log-probability of every token of a sequence;
- :func:`accuracy`: the share of problems whose greedy completion the verifier accepts;
- :class:`GRPOConfig` and :func:`grpo_step`: one step of GRPO: a group of completions per prompt, rewards from
  the verifier, group-relative advantages, a few clipped updates with a KL penalty to a frozen reference.
  Chapter 17.

Left out on purpose: a value network (PPO's critic), reward models (the reward here is exact), and the
engineering of large-scale RL (separate inference servers, off-policy buffers): the loop is the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import validate
from .decoding import generate
from .policy_gradient import AGGREGATIONS, group_advantages, grpo_loss, kl_k3
from .reasoning import EOS, FORMATS, VOCAB, _check_problems, decode, encode, encode_examples, prompt, reward, target

__all__ = ["supervised_loss", "complete", "token_logps", "accuracy", "GRPOConfig", "grpo_step"]

EOS_ID = VOCAB.index(EOS)


def supervised_loss(model, problems, fmt: str = "answer") -> torch.Tensor:
    """Mean cross-entropy of the target characters (what follows "a+b="), the prompt left uncounted."""
    ids, target_mask = encode_examples(problems, fmt)  # (N, T), (N, T - 1)
    device = next(model.parameters()).device
    ids, target_mask = ids.to(device), target_mask.to(device)
    logits = model(ids[:, :-1])  # (N, T - 1, V): position t predicts ids[:, t + 1]
    return F.cross_entropy(logits[target_mask].float(), ids[:, 1:][target_mask])


@torch.no_grad()
def complete(model, problems, fmt: str = "answer", n_samples: int = 1, temperature: float = 0.0,
             generator: torch.Generator | None = None):
    """``n_samples`` completions of each problem's prompt (rows p * n_samples ... p * n_samples + n - 1), greedy
    at temperature 0, else sampled. All prompts must have the same length (problems of one size). Returns
    ids (N, T), the mask (N, T - 1) of positions t whose next token ids[:, t + 1] was generated, up to and
    including the first EOS, and the completions' texts."""
    plen = _check_complete(model, problems, fmt, n_samples, temperature, generator)
    prompts = torch.tensor([encode(prompt(a, b, fmt)) for a, b in problems for _ in range(n_samples)])
    max_new = max(len(target(a, b, fmt)) for a, b in problems) + 4  # room for a few characters too many
    ids = generate(model, prompts.to(next(model.parameters()).device), max_new, do_sample=temperature > 0,
                   temperature=temperature or 1.0, eos_id=EOS_ID, generator=generator, use_cache=True)
    new = ids[:, plen:]  # (N, new)
    before_eos = (new == EOS_ID).long().cumsum(dim=1) - (new == EOS_ID).long() == 0  # up to the first EOS
    mask = torch.zeros(ids.shape[0], ids.shape[1] - 1, dtype=torch.bool, device=ids.device)  # (N, T - 1)
    mask[:, plen - 1:] = before_eos
    return ids, mask, [decode(row.tolist()) for row in new]


def token_logps(model, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(ids[:, t + 1] | ids[:, :t + 1]) for every t: (N, T) -> (N, T - 1), with gradients, under the
    distribution softmax(logits / temperature) that sampled them (the policy GRPO's ratio and KL refer to)."""
    _check_token_logps(model, ids, temperature)
    logits = model(ids[:, :-1]).float() / temperature  # (N, T - 1, V)
    return logits.log_softmax(dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def accuracy(model, problems, fmt: str = "answer") -> float:
    """The share of ``problems`` (one size) whose greedy completion earns reward 1."""
    _, _, texts = complete(model, problems, fmt)
    return sum(reward(t, a, b, fmt) for t, (a, b) in zip(texts, problems, strict=True)) / len(problems)


@dataclass
class GRPOConfig:
    group_size: int = 8  # G completions sampled per prompt
    temperature: float = 1.0  # sampling temperature of the completions
    clip_eps: float = 0.2  # PPO's clip: the ratio is held to [1 - eps, 1 + eps]
    beta: float = 0.04  # weight of the KL penalty to the reference (DeepSeekMath's value)
    updates: int = 2  # gradient steps on each batch of samples; the clip matters only from the second
    aggregation: str = "sequence"  # how token losses are averaged, see policy_gradient.grpo_loss
    scale_advantages: bool = True  # divide by the group's std (GRPO) or not (Dr. GRPO)
    max_length: int | None = None  # "constant" aggregation's fixed divisor; None: the model's context length


def grpo_step(policy, reference, optimizer, problems, fmt: str, config: GRPOConfig,
              generator: torch.Generator | None = None) -> dict:
    """One GRPO step on ``problems`` (P prompts of one size): sample G completions each from the current policy,
    reward them, A = group_advantages(r), then ``config.updates`` steps on grpo_loss. Returns the mean reward,
    the mean per-token KL estimate to the reference, and the share of tokens whose ratio was clipped."""
    _check_grpo_step(policy, reference, optimizer, config)
    ids, mask, texts = complete(policy, problems, fmt, config.group_size, config.temperature, generator)
    pairs = [p for p in problems for _ in range(config.group_size)]
    rewards = torch.tensor([reward(t, a, b, fmt) for t, (a, b) in zip(texts, pairs, strict=True)], device=ids.device)
    advantages = group_advantages(rewards.view(len(problems), -1), config.scale_advantages).flatten()  # (P G,)
    tau = config.temperature or 1.0  # temperature 0 samples greedily: score under the plain softmax
    with torch.no_grad():
        old, ref = token_logps(policy, ids, tau), token_logps(reference, ids, tau)  # (P G, T - 1) each
    for _ in range(config.updates):
        logps = token_logps(policy, ids, tau)
        loss = grpo_loss(logps, old, ref, advantages, mask, config.clip_eps, config.beta, config.aggregation,
                         max_length=config.max_length or policy.config.context_length)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
    ratio = (logps.detach() - old).exp()[mask]
    clipped = ((ratio - 1).abs() > config.clip_eps).float().mean().item()
    return {"reward": rewards.mean().item(), "kl": kl_k3(logps.detach(), ref)[mask].mean().item(),
            "clipped": clipped}


# ---------------------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------------------


def _check_complete(model, problems, fmt, n_samples, temperature, generator) -> int:
    validate.choice("fmt", fmt, FORMATS)
    validate.integer("n_samples", n_samples)
    validate.number("temperature", temperature, low=0.0)
    _check_problems(problems)
    lengths = {len(prompt(a, b, fmt)) for a, b in problems}
    if len(lengths) != 1:
        raise ValueError(f"problems must all have prompts of one length (one size), got lengths {sorted(lengths)}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    return lengths.pop()


def _check_token_logps(model, ids, temperature) -> None:
    validate.token_ids("ids", ids, model.config.vocab_size, ndim=2)
    validate.number("temperature", temperature, low=0.0, low_open=True)


def _check_grpo_step(policy, reference, optimizer, config) -> None:
    if policy is reference:
        raise ValueError("reference must be a frozen copy of the policy, not the policy itself")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not isinstance(config, GRPOConfig):
        raise TypeError(f"config must be a GRPOConfig, got {type(config).__name__}")
    validate.integer("config.group_size", config.group_size, low=2)
    validate.integer("config.updates", config.updates)
    validate.choice("config.aggregation", config.aggregation, AGGREGATIONS)
