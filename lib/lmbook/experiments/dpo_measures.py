"""What chapter 16's experiment measures on a policy: sampled replies, reward-model features, and the KL to
the reference along completions (the adapter of :mod:`lmbook.lora` switched off). Used by
:mod:`lmbook.experiments.preference_task` (``make dpo``).

Left out: any decoding but plain temperature-1 sampling, and KL estimates from samples alone (the KL here is
exact over the vocabulary at every position of the given completions).
"""

from __future__ import annotations

import torch

from .. import lora, validate
from ..decoding import generate
from ..kv_cache import KVCache
from ..utils import progress

__all__ = ["sample_replies", "completion_features", "completion_kl"]


@torch.no_grad()
def sample_replies(model, prompt_ids: list[list[int]], n: int, eos_id: int, seed: int = 0, batch_size: int = 16,
                   max_new_tokens: int = 32) -> list[list[list[int]]]:
    """``n`` sampled replies (temperature 1) to each prompt: lists of token ids, ending with ``eos_id`` when
    the model finished within ``max_new_tokens``. Prompts of equal length share a batch (no padding)."""
    _check_sampling(model, prompt_ids, n, eos_id, seed, batch_size, max_new_tokens)
    out = [[None] * n for _ in prompt_ids]
    jobs = sorted(((len(p), i, j) for i, p in enumerate(prompt_ids) for j in range(n)))
    generator = torch.Generator().manual_seed(seed)
    groups = {}
    for length, i, j in jobs:
        groups.setdefault(length, []).append((i, j))
    for length, members in progress(sorted(groups.items()), desc="sampling"):
        for s in range(0, len(members), batch_size):
            chunk = members[s:s + batch_size]
            ids = torch.tensor([prompt_ids[i] for i, _ in chunk])
            cache = KVCache.for_model(model, length + max_new_tokens, batch=len(chunk))
            full = generate(model, ids, max_new_tokens, do_sample=True, eos_id=eos_id, generator=generator,
                            cache=cache)
            for (i, j), row in zip(chunk, full[:, length:].tolist(), strict=True):
                out[i][j] = row[:row.index(eos_id) + 1] if eos_id in row else row
    return out


@torch.no_grad()
def completion_features(model, batch: dict, batch_size: int = 16) -> torch.Tensor:
    """Reward-model features: the model's final hidden state (after the last norm) at the last token of
    each completion of ``batch`` (the position whose next-token logits a reward model would replace)."""
    _check_features(model, batch, batch_size)
    captured = []
    hook = model.final_norm.register_forward_hook(lambda module, inputs, output: captured.append(output))
    try:
        rows = []
        for s in range(0, batch["input_ids"].shape[0], batch_size):
            ids, mask = batch["input_ids"][s:s + batch_size], batch["completion_mask"][s:s + batch_size]
            captured.clear()
            model(ids)
            last = (mask * torch.arange(mask.shape[1])).argmax(1)  # index of each row's last completion token
            rows.append(captured[0][torch.arange(len(ids)), last])  # (b, d)
    finally:
        hook.remove()
    return torch.cat(rows)


@torch.no_grad()
def completion_kl(model, input_ids: torch.Tensor, completion_mask: torch.Tensor, batch_size: int = 16):
    """KL between the adapted model and its reference (adapter disabled) along given completions:
    sum over completion tokens t of KL(pi(. | x, y_<t) || pi_ref(. | x, y_<t)), exact over the vocabulary,
    plus log pi(y|x) and log pi_ref(y|x). For completions sampled from pi, the mean is KL(pi || pi_ref) of
    whole replies. Returns three (B,) tensors."""
    _check_kl(model, input_ids, completion_mask, batch_size)
    kls, logps, ref_logps = [], [], []
    for s in range(0, input_ids.shape[0], batch_size):
        ids = input_ids[s:s + batch_size]
        logits = model(ids)[:, :-1]  # (b, T-1, V)
        dtype = torch.promote_types(logits.dtype, torch.float32)
        mask = completion_mask[s:s + batch_size, 1:].to(dtype)
        logp = logits.to(dtype).log_softmax(-1)
        with lora.disabled(model):
            ref = model(ids)[:, :-1].to(dtype).log_softmax(-1)
        kls.append(((logp.exp() * (logp - ref)).sum(-1) * mask).sum(1))
        target = ids[:, 1:, None]
        logps.append((logp.gather(-1, target).squeeze(-1) * mask).sum(1))
        ref_logps.append((ref.gather(-1, target).squeeze(-1) * mask).sum(1))
    return torch.cat(kls), torch.cat(logps), torch.cat(ref_logps)


# ---------------------------------------------------------------------------------------------------------
# Checks: each raises a TypeError or ValueError that names the argument
# ---------------------------------------------------------------------------------------------------------

def _check_model(model):
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be an nn.Module (lmbook's Transformer), got {validate.describe(model)}")


def _check_sampling(model, prompt_ids, n, eos_id, seed, batch_size, max_new_tokens):
    _check_model(model)
    validate.sequence("prompt_ids", prompt_ids, what="lists of token ids")
    for i, ids in enumerate(prompt_ids):
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and t >= 0 for t in ids):
            raise TypeError(f"prompt_ids[{i}] must be a non-empty list of token ids (ints >= 0), got {ids!r}")
    for name, value in (("n", n), ("batch_size", batch_size), ("max_new_tokens", max_new_tokens)):
        validate.integer(name, value)
    validate.integer("eos_id", eos_id, low=0)
    validate.integer("seed", seed, low=0)


def _check_features(model, batch, batch_size):
    _check_model(model)
    if not isinstance(batch, dict) or not {"input_ids", "completion_mask"} <= batch.keys():
        raise TypeError(f"batch must be a dict with input_ids and completion_mask, got {validate.describe(batch)}")
    _check_kl(model, batch["input_ids"], batch["completion_mask"], batch_size)


def _check_kl(model, input_ids, completion_mask, batch_size):
    _check_model(model)
    validate.tensor("input_ids", input_ids, ndim=2, kind="int")
    validate.tensor("completion_mask", completion_mask, kind="int", shape=tuple(input_ids.shape))
    validate.integer("batch_size", batch_size)
