"""DPO on a language model: log-probabilities of completions, preference batches, and a training loop.

- :func:`sequence_logprobs`: log pi(y | x) of a completion, summed over completion tokens only;
- :func:`rule_pairs` and :func:`completion_batch`: pairs labelled by a rule, and preference pairs of token ids
  turned into one right-padded batch (pairs whose chosen equals rejected are reported and left out);
- :func:`pair_logprobs` and :func:`train_dpo`: the log-probabilities of every pair, and a small DPO training
  loop (:func:`lmbook.preference.dpo_loss`) that tracks loss, margin, accuracy and log-likelihoods.
Chapter 16.

Left out on purpose: online and iterative DPO (no sampling inside the loop), gradient accumulation, and
distributed or mixed-precision training.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from . import validate
from .preference import LOSS_TYPES, dpo_loss

__all__ = ["sequence_logprobs", "rule_pairs", "completion_batch", "pair_logprobs", "train_dpo"]


# ---------------------------------------------------------------------------------------------------------
# Sequence log-probabilities
# ---------------------------------------------------------------------------------------------------------


def sequence_logprobs(model, input_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """log pi(y | x) = sum_t m_t log p(x_t | x_<t), over the completion tokens only.

    input_ids (B, T): prompt then completion, right-padded. completion_mask (B, T): 1 on the completion's
    tokens (its end-of-turn token included), 0 on the prompt and on padding. ``model(ids)`` returns
    logits (B, T, V), where logits[:, t] predicts token t + 1, so the logits are shifted by one against
    the tokens: token t is scored by position t - 1, and position 0 is never scored. Returns (B,).
    Right padding changes nothing for a causal model: no real token attends to a later pad. Chapter 16.
    """
    _check_sequences(model, input_ids, completion_mask)
    logits = model(input_ids)  # (B, T, V)
    logits = logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32))  # (B, T-1, V): predicts 1..T-1
    targets = input_ids[:, 1:]  # (B, T-1)
    token_logps = logits.gather(-1, targets[..., None]).squeeze(-1) - logits.logsumexp(dim=-1)  # (B, T-1)
    return (token_logps * completion_mask[:, 1:].to(token_logps.dtype)).sum(dim=1)


# ---------------------------------------------------------------------------------------------------------
# Preference pairs, batches, and a DPO training loop
# ---------------------------------------------------------------------------------------------------------


def rule_pairs(labels, max_per_prompt: int = 1) -> list[tuple[int, int, int]]:
    """Pairs from completions labelled by a rule: (prompt index, chosen index, rejected index).

    labels[i][j] is True when completion j of prompt i satisfies the rule. Each prompt gives up to
    ``max_per_prompt`` pairs, matching its accepted and rejected completions in order; a prompt whose
    completions are all accepted, or all rejected, gives none (there is nothing to prefer).
    """
    _check_rule_pairs(labels, max_per_prompt)
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
    kept = _check_pairs(pairs, pad_id)  # the pairs whose chosen differs from rejected
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
    _check_pair_logprobs(model, batch, batch_size)
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
    parameters that require gradients (a LoRA adapter), ``batch_size`` pairs per step, from a fresh permutation
    of the pairs per epoch (a step may straddle two epochs, so one batch can hold a pair twice).

    ref_chosen_logps, ref_rejected_logps (N,): computed once beforehand (e.g. adapter disabled), as the
    reference never changes. Records per step, for the step's pairs before its update: loss, margin r_w - r_l,
    accuracy (r_w > r_l), mean r_w and r_l, mean log pi(y_w|x) and log pi(y_l|x); ``callback(step, model)``
    runs after each step and may return a dict of extra numbers to record. Chapter 16.
    """
    _check_train_dpo(model, batch, ref_chosen_logps, ref_rejected_logps, beta, loss_type, label_smoothing, steps,
                     batch_size, lr, seed, callback)
    params = [p for p in model.parameters() if p.requires_grad]
    device, history = params[0].device, {}
    batch = {k: v.to(device) for k, v in batch.items() if torch.is_tensor(v)}
    ref_c, ref_r = ref_chosen_logps.to(device), ref_rejected_logps.to(device)
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    for step, index in enumerate(_shuffled_batches(len(ref_c), batch_size, steps, seed, device), start=1):
        logp_c, logp_r = _pair_logps(model, batch, index)  # (b,) each: log pi(y_w|x), log pi(y_l|x)
        loss, r_w, r_l = dpo_loss(logp_c, logp_r, ref_c[index], ref_r[index], beta, loss_type, label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        _record(history, step, (loss, r_w, r_l, logp_c, logp_r), callback, model)
    model.eval()
    return history


def _shuffled_batches(n, batch_size, steps, seed, device):
    """``steps`` index tensors of ``batch_size`` pairs each, from a fresh permutation of the n pairs per epoch;
    the leftover of one epoch is topped up from the next, so a batch that straddles two can repeat a pair."""
    generator, order = torch.Generator().manual_seed(seed), []
    for _ in range(steps):
        if len(order) < batch_size:  # a new epoch
            order += torch.randperm(n, generator=generator).tolist()
        index, order = order[:batch_size], order[batch_size:]
        yield torch.tensor(index, device=device)


def _record(history, step, tensors, callback, model):
    """Append one step's numbers to ``history``, then whatever ``callback(step, model)`` returns."""
    loss, r_w, r_l, logp_c, logp_r = tensors
    values = {"step": step, "loss": loss.item(), "margin": (r_w - r_l).mean().item(),
              "accuracy": (r_w > r_l).float().mean().item(), "reward_chosen": r_w.mean().item(),
              "reward_rejected": r_l.mean().item(), "logp_chosen": logp_c.mean().item(),
              "logp_rejected": logp_r.mean().item()}
    if callback is not None:
        values.update(callback(step, model) or {})
    for key, value in values.items():
        history.setdefault(key, []).append(value)


# ---------------------------------------------------------------------------------------------------------
# Checks: each raises a TypeError or ValueError that names the argument
# ---------------------------------------------------------------------------------------------------------


def _vocab_size(model):
    """The number of token ids ``model`` embeds (its config's, else its first nn.Embedding's), or None."""
    if not isinstance(model, nn.Module):
        return None
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    embeddings = [m.num_embeddings for m in model.modules() if isinstance(m, nn.Embedding)]
    return size if size is not None else embeddings[0] if embeddings else None


def _check_model(model):
    if not callable(model) or isinstance(model, type):
        raise TypeError(f"model must be a language model (a module or function of ids (B, T) returning logits "
                        f"(B, T, V)), got {validate.describe(model)}")


def _check_ids_and_mask(input_ids, completion_mask, vocab_size=None, names=("input_ids", "completion_mask")):
    ids_name, mask_name = names
    validate.tensor(ids_name, input_ids, ndim=2, kind="int")
    if input_ids.shape[0] == 0 or input_ids.shape[1] < 2:
        raise ValueError(f"{ids_name} must be (B, T) with B >= 1 and T >= 2 (a prompt token, then the completion), "
                         f"got {tuple(input_ids.shape)}")
    if vocab_size is not None:
        validate.token_ids(ids_name, input_ids, vocab_size)
    validate.tensor(mask_name, completion_mask, kind=None)
    if completion_mask.is_floating_point() or completion_mask.is_complex():
        raise TypeError(f"{mask_name} must be an integer (or bool) tensor of 0 and 1, got {completion_mask.dtype}")
    if completion_mask.shape != input_ids.shape or completion_mask.device != input_ids.device:
        raise ValueError(f"{mask_name} must have the shape {tuple(input_ids.shape)} and device of {ids_name}, "
                         f"got {tuple(completion_mask.shape)} on {completion_mask.device}")
    if ((completion_mask != 0) & (completion_mask != 1)).any():
        raise ValueError(f"{mask_name} must hold only 0 and 1")
    if completion_mask[:, 0].any():
        raise ValueError(f"{mask_name}[:, 0] must be 0: the first token has no context and cannot be scored "
                         "(a completion always follows a prompt)")
    if empty := (completion_mask.sum(dim=1) == 0).nonzero().flatten().tolist():
        raise ValueError(f"{mask_name} is empty (no completion token) in rows {empty[:8]}")


def _check_sequences(model, input_ids, completion_mask):
    _check_model(model)
    _check_ids_and_mask(input_ids, completion_mask, _vocab_size(model))


def _check_rule_pairs(labels, max_per_prompt):
    validate.sequence("labels", labels, what="rows of booleans, one row per prompt")
    for i, row in enumerate(labels):
        if not isinstance(row, (list, tuple)) or not all(isinstance(ok, bool) for ok in row):
            raise TypeError(f"labels[{i}] must be a list of True/False, one per completion, got {row!r}")
    validate.integer("max_per_prompt", max_per_prompt)


def _check_pairs(pairs, pad_id) -> list[int]:
    """Checks the pairs; returns the indices of those whose chosen differs from rejected (warns of the rest)."""
    validate.sequence("pairs", pairs, what="(prompt_ids, chosen_ids, rejected_ids) triples")
    validate.integer("pad_id", pad_id, low=0)
    for k, pair in enumerate(pairs):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 3 and all(
                isinstance(ids, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                                        for t in ids) for ids in pair)):
            raise TypeError(f"pairs[{k}] must be (prompt_ids, chosen_ids, rejected_ids), three lists of token ids "
                            f"(ints >= 0), got {validate.describe(pair)}")
        if not all(pair):
            raise ValueError(f"pairs[{k}]: the prompt and both completions must be non-empty lists of token ids")
    identical = [k for k, (_, chosen, rejected) in enumerate(pairs) if list(chosen) == list(rejected)]
    if identical:
        warnings.warn(f"{len(identical)} of {len(pairs)} pairs have chosen == rejected and are left out "
                      f"(pairs {identical[:8]}): they carry no preference", stacklevel=3)
    if len(identical) == len(pairs):
        raise ValueError("pairs has no usable pair: every pair has chosen == rejected")
    return [k for k in range(len(pairs)) if k not in set(identical)]


def _check_batch(batch, name="batch"):
    if not isinstance(batch, dict) or not {"input_ids", "completion_mask"} <= batch.keys():
        raise TypeError(f"{name} must be a dict with input_ids and completion_mask (from completion_batch), "
                        f"got {validate.describe(batch)}")
    _check_ids_and_mask(batch["input_ids"], batch["completion_mask"],
                        names=(f"{name}['input_ids']", f"{name}['completion_mask']"))
    if batch["input_ids"].shape[0] % 2:
        raise ValueError(f"{name} must hold 2N rows (N chosen, then N rejected), got {batch['input_ids'].shape[0]}")


def _check_pair_logprobs(model, batch, batch_size):
    if not isinstance(model, nn.Module) or next(model.parameters(), None) is None:
        raise TypeError(f"model must be an nn.Module with parameters, got {validate.describe(model)}")
    _check_batch(batch)
    validate.integer("batch_size", batch_size)


def _check_train_dpo(model, batch, ref_chosen_logps, ref_rejected_logps, beta, loss_type, label_smoothing, steps,
                     batch_size, lr, seed, callback):
    _check_pair_logprobs(model, batch, batch_size)
    validate.number("beta", beta, low=0, low_open=True)
    validate.choice("loss_type", loss_type, LOSS_TYPES)
    validate.number("label_smoothing", label_smoothing, low=0, high=0.5, high_open=True)
    validate.tensor("ref_chosen_logps", ref_chosen_logps, ndim=1)
    validate.tensor("ref_rejected_logps", ref_rejected_logps, ndim=1)
    n = batch["input_ids"].shape[0] // 2
    if ref_chosen_logps.shape[0] != n or ref_rejected_logps.shape[0] != n:
        raise ValueError(f"batch sizes must match: the batch holds {n} pairs, got {ref_chosen_logps.shape[0]} "
                         f"ref_chosen_logps and {ref_rejected_logps.shape[0]} ref_rejected_logps")
    validate.integer("steps", steps)
    validate.number("lr", lr, low=0, low_open=True)
    validate.integer("seed", seed, low=0)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be a function callback(step, model) or None, got {validate.describe(callback)}")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no parameter that requires gradients (add a LoRA adapter first)")
