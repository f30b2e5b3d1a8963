"""Training a language model: AdamW with warm-up and a cosine schedule, and evaluation in windows.

- :func:`train`: random windows of one token stream, next-token cross-entropy, AdamW (decay on matrices
  only), a linear warm-up then a half cosine (:func:`learning_rate`), gradient-norm clipping, and a
  validation loss every ``eval_every`` steps;
- :func:`evaluate`: the mean cross-entropy of every token of a stream, in (optionally overlapping) windows.

Left out on purpose: mixed precision, gradient accumulation, multi-device training and checkpointing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .model import Transformer
from .utils import progress

__all__ = ["TrainConfig", "learning_rate", "evaluate", "train"]


@dataclass
class TrainConfig:
    steps: int = 400                # optimizer steps
    batch_size: int = 16            # sequences per step
    seq_len: int = 128              # tokens per training sequence
    lr: float = 2e-3                # peak learning rate, reached after the warm-up
    warmup_steps: int = 30          # linear warm-up from 0
    min_lr_ratio: float = 0.1       # the cosine decays to lr * min_lr_ratio at the last step
    weight_decay: float = 0.1       # AdamW's decoupled decay, on matrices only (not norms or biases)
    beta2: float = 0.95             # AdamW's second-moment decay (beta1 = 0.9)
    grad_clip: float = 1.0          # rescale the gradient when its global norm exceeds this
    eval_every: int = 100           # steps between validation evaluations (and one at the end)
    seed: int = 0                   # seeds the batch sampler


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up to lr, then a half cosine down to lr * min_lr_ratio at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress_ = (step - config.warmup_steps) / max(1, config.steps - 1 - config.warmup_steps)
    floor = config.lr * config.min_lr_ratio
    return floor + (config.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(progress_, 1.0)))


def _check_ids(name, ids, seq_len):
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.is_floating_point():
        raise TypeError(f"{name} must be a 1-d integer tensor (one long token stream), got {type(ids).__name__}")
    if len(ids) < seq_len + 1:
        raise ValueError(f"{name} has {len(ids)} tokens, fewer than seq_len + 1 = {seq_len + 1}")


@torch.no_grad()
def evaluate(model: Transformer, ids: torch.Tensor, seq_len: int = 128, stride: int | None = None,
             batch_size: int = 32) -> float:
    """Mean cross-entropy (nats per token) of every token of the stream ``ids`` but the first.

    The model reads windows of ``seq_len`` tokens that start every ``stride`` tokens (default: seq_len,
    windows side by side). Each token is scored once, in the first window where it has the most context:
    with stride < seq_len every token after the first window sees at least seq_len - stride earlier tokens.
    """
    _check_ids("ids", ids, 1)
    stride = seq_len if stride is None else stride
    if not 1 <= stride <= seq_len:
        raise ValueError(f"stride must be in [1, seq_len={seq_len}], got {stride}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    windows, scored_until = [], 0  # (start, number of new targets at the end of the window)
    for start in range(0, len(ids) - 1, stride):
        end = min(start + seq_len, len(ids) - 1)  # this window predicts ids[start + 1 : end + 1]
        windows.append((start, end - scored_until))
        scored_until = end
        if end == len(ids) - 1:
            break
    total = 0.0
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


def train(model: Transformer, train_ids: torch.Tensor, val_ids: torch.Tensor | None = None,
          config: TrainConfig | None = None) -> dict:
    """Train ``model`` on random windows of the token stream ``train_ids`` (1-d).

    Loss: mean cross-entropy of each next token. Optimiser: AdamW with warm-up + cosine learning rate and
    gradient-norm clipping. Returns the history: step, train_loss, lr, and val_step/val_loss every
    ``eval_every`` steps and at the end (if ``val_ids`` is given), plus the wall time in seconds.
    """
    config = config or TrainConfig()
    _check_ids("train_ids", train_ids, config.seq_len)
    device = next(model.parameters()).device
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr,
                                  betas=(0.9, config.beta2))
    generator = torch.Generator().manual_seed(config.seed)
    history = {"step": [], "train_loss": [], "lr": [], "val_step": [], "val_loss": []}
    start = time.perf_counter()
    model.train()
    for step in progress(range(config.steps), desc="training"):
        lr = learning_rate(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(len(train_ids) - config.seq_len, (config.batch_size,), generator=generator)
        batch = torch.stack([train_ids[s:s + config.seq_len + 1] for s in starts]).to(device)  # (B, L + 1)
        logits = model(batch[:, :-1])  # (B, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        history["step"].append(step)
        history["train_loss"].append(loss.item())
        history["lr"].append(lr)
        if val_ids is not None and ((step + 1) % config.eval_every == 0 or step + 1 == config.steps):
            history["val_step"].append(step + 1)
            history["val_loss"].append(evaluate(model, val_ids, config.seq_len))
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history
