"""Training a language model: AdamW with warm-up and a cosine schedule, and evaluation in windows. Chapter 9.

- :func:`train`: random windows of one token stream, next-token cross-entropy, AdamW (decay on matrices
  only, :func:`adamw`), a linear warm-up then a half cosine (:func:`learning_rate`), gradient-norm clipping,
  and a validation loss every ``eval_every`` steps;
- :func:`evaluate`: the mean cross-entropy of every token of a stream, in (optionally overlapping) windows.

Left out on purpose: mixed precision, gradient accumulation, multi-device training and checkpointing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from numbers import Real

import torch
import torch.nn.functional as F
from torch import nn

from . import validate
from .utils import progress

__all__ = ["TrainConfig", "learning_rate", "adamw", "set_learning_rate", "random_windows", "evaluate", "train"]


@dataclass
class TrainConfig:
    """The recipe of one training run. Chapter 9."""

    steps: int = 400                # optimizer steps
    batch_size: int = 16            # sequences per step
    seq_len: int = 128              # tokens per training sequence
    lr: float = 2e-3                # peak learning rate, reached after the warm-up
    warmup_steps: int = 30          # linear warm-up: step s gets lr (s + 1) / warmup_steps (0: none)
    min_lr_ratio: float = 0.1       # the cosine decays to lr * min_lr_ratio at the last step (1: constant)
    weight_decay: float = 0.1       # AdamW's decoupled decay, on matrices only (not norms or biases)
    beta2: float = 0.95             # AdamW's second-moment decay (beta1 = 0.9)
    grad_clip: float = 1.0          # rescale the gradient when its global norm exceeds this (math.inf: never)
    eval_every: int = 100           # steps between validation evaluations (and one at the end)
    seed: int = 0                   # seeds the batch sampler

    def __post_init__(self):
        _check_train_config(self)


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up lr (s + 1) / warmup_steps, then a half cosine from lr down to lr * min_lr_ratio at the
    last step: floor + (lr - floor) (1 + cos(pi p)) / 2, p the fraction of the decay done. Chapter 9."""
    _check_step(step, config)
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress_ = (step - config.warmup_steps) / max(1, config.steps - 1 - config.warmup_steps)
    floor = config.lr * config.min_lr_ratio
    return floor + (config.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(progress_, 1.0)))


def adamw(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW (betas 0.9 and beta2) with weight decay on the matrices only: norm gains and biases are not
    pulled towards 0. Chapter 9."""
    _check_model_and_config(model, config)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=config.lr, betas=(0.9, config.beta2))


def train(model: nn.Module, train_ids: torch.Tensor, val_ids: torch.Tensor | None = None,
          config: TrainConfig | None = None) -> dict:
    """Minimise the mean of -log p(x_{t+1} | x_1..x_t) over random windows of the stream train_ids (N,).

    AdamW, warm-up + cosine learning rate, gradient-norm clipping. Returns the history: step, train_loss,
    lr, and val_step/val_loss every eval_every steps and at the end (if val_ids is given), and seconds. Chapter 9.
    """
    config = TrainConfig() if config is None else config
    _check_train(model, train_ids, val_ids, config)
    optimizer, generator = adamw(model, config), torch.Generator().manual_seed(config.seed)
    history, start = {"step": [], "train_loss": [], "lr": [], "val_step": [], "val_loss": []}, time.perf_counter()
    model.train()
    for step in progress(range(config.steps), desc="training"):
        lr = set_learning_rate(optimizer, step, config)
        batch = random_windows(train_ids, config, generator).to(next(model.parameters()).device)  # (B, L + 1)
        logits = model(batch[:, :-1])  # (B, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())  # (B L, V) against (B L,)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        _record(history, step=step, train_loss=loss.item(), lr=lr)
        if val_ids is not None and ((step + 1) % config.eval_every == 0 or step + 1 == config.steps):
            _record(history, val_step=step + 1, val_loss=evaluate(model, val_ids, config.seq_len))
    model.eval()
    return history | {"seconds": time.perf_counter() - start}


def set_learning_rate(optimizer: torch.optim.Optimizer, step: int, config: TrainConfig) -> float:
    """Give every parameter group the rate learning_rate(step, config) and return it. Chapter 9."""
    _check_optimizer(optimizer)
    lr = learning_rate(step, config)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def random_windows(ids: torch.Tensor, config: TrainConfig, generator: torch.Generator) -> torch.Tensor:
    """batch_size windows of seq_len + 1 tokens of the stream ids (N,), at random starts: (B, L + 1). Chapter 9."""
    _check_windows(ids, config, generator)
    starts = torch.randint(len(ids) - config.seq_len, (config.batch_size,), generator=generator)
    return torch.stack([ids[s:s + config.seq_len + 1] for s in starts])  # (B, L + 1)


def _record(history: dict, **values) -> None:
    for key, value in values.items():
        history[key].append(value)


@torch.no_grad()
def evaluate(model: nn.Module, ids: torch.Tensor, seq_len: int = 128, stride: int | None = None,
             batch_size: int = 32) -> float:
    """Mean cross-entropy (nats per token) of every token of the stream ids (N,) but the first. Chapter 9.

    The model reads windows of seq_len tokens that start every stride tokens (default: seq_len, windows side
    by side). Each token is scored once, in the first window where it has the most context: with stride <
    seq_len every token after the first window sees at least seq_len - stride earlier tokens.
    """
    stride = seq_len if stride is None else stride
    _check_evaluate(model, ids, seq_len, stride, batch_size)
    was_training, device = model.training, next(model.parameters()).device
    model.eval()
    windows, total = _windows(len(ids), seq_len, stride), 0.0
    for i in range(0, len(windows), batch_size):
        groups = {}  # windows of equal length share a batch
        for start, n_new in windows[i:i + batch_size]:
            groups.setdefault(min(seq_len, len(ids) - 1 - start), []).append((start, n_new))
        for length, group in groups.items():
            batch = torch.stack([ids[s:s + length + 1] for s, _ in group]).to(device)  # (b, length + 1)
            logp = model(batch[:, :-1]).float().log_softmax(dim=-1)  # (b, length, V)
            nll = -logp.gather(-1, batch[:, 1:, None]).squeeze(-1)  # (b, length)
            total += sum(nll[j, length - n_new:].sum().item() for j, (_, n_new) in enumerate(group))
    model.train(was_training)
    return total / (len(ids) - 1)


def _windows(n: int, seq_len: int, stride: int) -> list[tuple[int, int]]:
    """(start, number of new targets at the end of the window) for every window over a stream of n tokens."""
    windows, scored_until = [], 0
    for start in range(0, n - 1, stride):
        end = min(start + seq_len, n - 1)  # this window predicts ids[start + 1 : end + 1]
        windows.append((start, end - scored_until))
        scored_until = end
        if end == n - 1:
            break
    return windows


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_train_config(c: TrainConfig) -> None:
    for name in ("steps", "batch_size", "seq_len", "eval_every"):
        validate.integer(name, getattr(c, name))
    validate.integer("warmup_steps", c.warmup_steps, low=0)
    validate.integer("seed", c.seed, low=0)
    validate.number("lr", c.lr, low=0, low_open=True)
    validate.number("min_lr_ratio", c.min_lr_ratio, low=0, high=1)
    validate.number("weight_decay", c.weight_decay, low=0)
    validate.number("beta2", c.beta2, low=0, high=1, high_open=True)
    if isinstance(c.grad_clip, bool) or not isinstance(c.grad_clip, Real):
        raise TypeError(f"grad_clip must be a number (math.inf: no clipping), got {validate.describe(c.grad_clip)}")
    if math.isnan(c.grad_clip) or c.grad_clip <= 0:
        raise ValueError(f"grad_clip must be > 0 (math.inf: no clipping), got {c.grad_clip!r}")


def _check_model(model) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch module that maps ids (B, T) to logits (B, T, V), got "
                        f"{validate.describe(model)}")
    if next(model.parameters(), None) is None:
        raise ValueError("model must have parameters, got a module without any")


def _check_model_and_config(model, config) -> None:
    _check_model(model)
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {validate.describe(config)}")


def _check_step(step, config) -> None:
    validate.integer("step", step, low=0)
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {validate.describe(config)}")


def _check_stream(name: str, ids, model, least: int, why: str) -> None:
    """A 1-d stream of token ids that the model's vocabulary covers, with at least ``least`` tokens."""
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    validate.tensor(name, ids, ndim=1, kind="int")
    if vocab_size is not None:
        validate.token_ids(name, ids, vocab_size)
    if len(ids) < least:
        raise ValueError(f"{name} has {len(ids)} tokens, fewer than {why} = {least}")


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch optimizer, got {validate.describe(optimizer)}")


def _check_windows(ids, config, generator) -> None:
    """Cheap (no pass over ids): train calls this every step, and the model checks the ids it is given."""
    _check_step(0, config)
    validate.tensor("ids", ids, ndim=1, kind="int")
    if ids.numel() and ids.min() < 0:  # ids too large for the vocabulary are caught by the model's forward
        raise ValueError(f"ids must be token ids >= 0, found {ids.min().item()}")
    if len(ids) < config.seq_len + 1:
        raise ValueError(f"ids has {len(ids)} tokens, fewer than seq_len + 1 = {config.seq_len + 1}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {validate.describe(generator)}")


def _check_train(model, train_ids, val_ids, config) -> None:
    _check_model_and_config(model, config)
    _check_stream("train_ids", train_ids, model, config.seq_len + 1, "seq_len + 1")
    if val_ids is not None:
        _check_stream("val_ids", val_ids, model, 2, "the 2 that one prediction needs")


def _check_evaluate(model, ids, seq_len, stride, batch_size) -> None:
    _check_model(model)
    validate.integer("seq_len", seq_len)
    validate.integer("stride", stride, high=seq_len)
    validate.integer("batch_size", batch_size)
    _check_stream("ids", ids, model, 2, "the 2 that one prediction needs")
