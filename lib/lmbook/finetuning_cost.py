"""What fine-tuning costs: parameters, the bytes of training, and one measured training step. Chapter 15.

Training with AdamW keeps, besides the activations, three kinds of tensors: the weights (all N of them),
a gradient for every trainable number and the optimizer's state (m and v: two numbers per trainable
number). So full fine-tuning needs about 4 N numbers before a single activation, and a LoRA adapter
(:mod:`lmbook.lora`) cuts the last three terms to its own few parameters:

    weights = N * b,   gradients = N_train * b,   optimizer = 2 * N_train * b   (b bytes per number).

:func:`count_parameters` and :func:`training_memory` compute these by formula; :func:`measure_training_step`
runs one real step and adds up the tensors it creates, activations included (found with autograd's
saved-tensor hooks), and its time.

Left out on purpose: activation checkpointing, mixed-precision master weights, sharded optimizers (ZeRO)
and the allocator's own overhead; on CUDA the allocator's peak is reported as it is, not explained.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from . import validate

__all__ = ["count_parameters", "training_memory", "measure_training_step"]


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of distinct parameters (a tied matrix counts once); only those with requires_grad if asked."""
    _check_module(model)
    validate.boolean("trainable_only", trainable_only)
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def training_memory(model: nn.Module, optimizer_states: int = 2, bytes_per_number: int | None = None) -> dict:
    """Bytes that training needs besides activations: weights (all), gradients and optimizer state
    (trainable parameters only). AdamW keeps optimizer_states = 2 numbers (m and v) per trainable number.

    weights = N * b,  gradients = N_train * b,  optimizer = optimizer_states * N_train * b,
    with b bytes per number (default: the element size of the model's first parameter).
    """
    _check_memory_args(model, optimizer_states, bytes_per_number)
    b = bytes_per_number or next(model.parameters()).element_size()
    n_all, n_train = count_parameters(model), count_parameters(model, trainable_only=True)
    out = {"weights": n_all * b, "gradients": n_train * b, "optimizer": optimizer_states * n_train * b}
    out["total"] = sum(out.values())
    return out


def measure_training_step(model: nn.Module, ids: torch.Tensor, lr: float = 0.0) -> dict:
    """Run one real training step (next-token cross-entropy on ids (B, T), backward, AdamW) and measure the
    tensors it creates, in bytes: ``weights`` (all parameters), ``gradients`` (every .grad), ``optimizer``
    (AdamW's m and v), ``activations`` (what autograd saved for the backward pass, each storage once,
    parameters excluded), their ``total``, and ``seconds`` for the whole step (on CUDA also
    ``peak_allocated``). lr = 0 (the default) leaves the weights as they were. Chapter 15.
    """
    _check_training_step(model, ids, lr)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer, was_training = torch.optim.AdamW(trainable, lr=lr), model.training
    model.train()
    with _stopwatch(ids.device) as clock:
        with _saved_storages(model) as saved:  # every tensor autograd keeps for the backward pass
            logits = model(ids[:, :-1])  # (B, T - 1, V)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
    state = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0]
    out = {"weights": _nbytes(model.parameters()), "gradients": _nbytes(p.grad for p in trainable),
           "optimizer": _nbytes(state), "activations": sum(saved.values())}  # state: m, v (not the step counter)
    out["total"] = sum(out.values())
    out.update(clock)
    optimizer.zero_grad(set_to_none=True)  # free the gradients; the optimizer state goes with the optimizer
    model.train(was_training)
    return out


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


@contextmanager
def _saved_storages(model):
    """Yields {storage address: bytes} of the tensors autograd saves inside the block, parameters excluded."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield saved


@contextmanager
def _stopwatch(device):
    """Yields a dict that gets ``seconds`` for the block, and on CUDA ``peak_allocated`` (bytes)."""
    cuda, out = device.type == "cuda", {}
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    yield out
    if cuda:
        torch.cuda.synchronize()
    out["seconds"] = time.perf_counter() - start
    if cuda:
        out["peak_allocated"] = torch.cuda.max_memory_allocated()


# ---------------------------------------------------------------------------------------------------------
# Checks: each raises a TypeError or ValueError that names the argument
# ---------------------------------------------------------------------------------------------------------

def _check_module(model):
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module instance, got {validate.describe(model)}")


def _check_memory_args(model, optimizer_states, bytes_per_number):
    _check_module(model)
    if next(model.parameters(), None) is None:
        raise ValueError("model has no parameters")
    validate.integer("optimizer_states", optimizer_states, low=0)
    if bytes_per_number is not None:
        validate.integer("bytes_per_number", bytes_per_number, low=1)


def _vocab_size(model):
    """The number of token ids ``model`` embeds (its config's, else its first nn.Embedding's), or None."""
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    embeddings = [m.num_embeddings for m in model.modules() if isinstance(m, nn.Embedding)]
    return size if size is not None else embeddings[0] if embeddings else None


def _check_training_step(model, ids, lr):
    _check_module(model)
    validate.tensor("ids", ids, ndim=2, kind="int")
    if ids.shape[0] < 1 or ids.shape[1] < 2:
        raise ValueError(f"ids must be a (B, T) tensor of token ids with B >= 1 and T >= 2, got {tuple(ids.shape)}")
    vocab_size = _vocab_size(model)
    if vocab_size is not None:
        validate.token_ids("ids", ids, vocab_size)
    validate.number("lr", lr, low=0)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters (add a LoRA adapter, or call requires_grad_(True))")
