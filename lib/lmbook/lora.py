"""LoRA: fine-tune a frozen model through small low-rank updates of its linear layers (Hu et al. 2021).

A linear layer y = x W^T + b (W: out x in) is adapted as

    y = x W^T + b + s * dropout(x) A^T B^T,   i.e.   W' = W + s * B A,

with W and b frozen, A (r x in) initialised Kaiming-uniform, B (out x r) initialised to zero, so that
B A = 0 and the adapted model starts out exactly equal to the base. The scale is s = alpha / r, or
s = alpha / sqrt(r) for rank-stabilised LoRA (rsLoRA, Kalajdzievski 2023). Only A and B are trained:
r (in + out) numbers per layer instead of in * out. Chapter 15.

This module gives the layer (:class:`LoRALinear`, with ``merge``/``unmerge``), injection into any model
by module name (:func:`add_lora`), merging for inference (:func:`merge_lora`), saving and swapping
adapters (:func:`lora_state_dict`, :func:`load_lora`), switching them off for a while (:func:`disabled`,
e.g. to get DPO's reference model from the same weights), counting (:func:`count_parameters`,
:func:`training_memory`) and measuring a training step (:func:`measure_training_step`). Conventions
follow peft's ``LoraConfig``/``get_peft_model``, which the tests use as the oracle.

Left out on purpose: several named adapters inside one layer (swap adapters with ``load_lora``
instead), LoRA on embeddings and convolutions, DoRA/PiSSA/LoftQ initialisations, and quantized base
weights (QLoRA's 4-bit storage is discussed, not implemented, in the chapter).
"""

from __future__ import annotations

import math
import re
import time
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LoRALinear", "add_lora", "merge_lora", "remove_lora", "lora_layers", "lora_state_dict", "load_lora",
           "disabled", "count_parameters", "training_memory", "measure_training_step"]


def _check_number(name, value, kind=(int,), minimum=None, strict=True):
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {value!r}")


def _check_layer_args(base, r, alpha, dropout):
    if not isinstance(base, nn.Linear):
        raise TypeError(f"base must be an nn.Linear, got {type(base).__name__}")
    _check_number("r", r, (int,), 0)
    if r > min(base.in_features, base.out_features):
        raise ValueError(f"r must be <= min(in_features, out_features) = "
                         f"{min(base.in_features, base.out_features)} for a {base.in_features} -> "
                         f"{base.out_features} layer, got r={r}")
    _check_number("alpha", alpha, (int, float), 0)
    _check_number("dropout", dropout, (int, float), 0, strict=False)
    if dropout >= 1:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update: y = base(x) + s * dropout(x) A^T B^T.

    base: the pretrained layer, wrapped (not copied) and frozen; W is (out, in).
    r: the rank, 1 <= r <= min(in, out). alpha: the scale numerator, s = alpha / r (alpha / sqrt(r) if
    ``rslora``). dropout: probability of zeroing an input of the LoRA path while training (the base path
    never sees dropout). A: (r, in), Kaiming-uniform; B: (out, r), zeros, so the layer starts equal to base.
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0, rslora: bool = False):
        super().__init__()
        _check_layer_args(base, r, alpha, dropout)
        self.base = base.requires_grad_(False)
        self.r, self.alpha, self.rslora = r, alpha, rslora
        self.scaling = alpha / math.sqrt(r) if rslora else alpha / r
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, device=w.device, dtype=w.dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, device=w.device, dtype=w.dtype))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # U(-1/sqrt(in), 1/sqrt(in)), as nn.Linear and peft
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.merged = False  # True while s * B A is added into base.weight
        self.enabled = True  # False inside ``disabled(model)``: the layer is then exactly the base layer

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def delta_weight(self) -> torch.Tensor:
        """Delta W = s * B A, shape (out, in): what the adapter adds to the frozen weight."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., in) -> (..., out). Two thin matmuls, x A^T then B^T: never forms the (out, in) update."""
        y = self.base(x)
        if self.merged or not self.enabled:  # merged: base.weight already holds W + s B A
            return y
        return y + self.scaling * F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B)

    @torch.no_grad()
    def merge(self) -> None:
        """W <- W + s B A: afterwards the layer costs exactly one matmul, like the base layer."""
        if self.merged:
            raise ValueError("this LoRA layer is already merged; merging twice would add s * B A twice")
        if not self.enabled:
            raise ValueError("cannot merge a disabled LoRA layer (inside `disabled(model)`)")
        self.base.weight += self.delta_weight().to(self.base.weight.dtype)
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """W <- W - s B A: back to the frozen weight (equal up to floating-point rounding)."""
        if not self.merged:
            raise ValueError("this LoRA layer is not merged, so there is nothing to unmerge")
        self.base.weight -= self.delta_weight().to(self.base.weight.dtype)
        self.merged = False

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, r={self.r}, "
                f"alpha={self.alpha}, scaling={self.scaling:.4g}, merged={self.merged}")


def _matches(name: str, target: str) -> bool:
    """peft's rule: a target matches a module whose full name is it or ends with '.' + it."""
    return name == target or name.endswith("." + target)


def add_lora(model: nn.Module, target_modules, r: int, alpha: float, dropout: float = 0.0,
             rslora: bool = False, seed: int | None = None) -> nn.Module:
    """Freeze every parameter of ``model`` and wrap each ``nn.Linear`` named by ``target_modules`` in a
    :class:`LoRALinear`; in place, and returns ``model``.

    target_modules: names such as ["q_proj", "v_proj"] (peft's rule: a module matches when its full name
    is the target or ends with "." + target, e.g. "blocks.3.attn.q_proj"), or a regular expression string
    that must match the whole name. Every listed name must match at least one linear layer.
    seed: if given, A is drawn from torch.Generator seeded with it (the same adapter start every time).
    """
    if isinstance(target_modules, str):
        pattern = re.compile(target_modules)
        chosen = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and pattern.fullmatch(n)]
        if not chosen:
            raise ValueError(f"target_modules pattern {target_modules!r} matches no nn.Linear in the model (a string "
                             f"is a regular expression for whole names like 'blocks.0.attn.q_proj'; pass a list "
                             f"such as ['q_proj'] to match by the last part of the name)")
    else:
        targets = list(target_modules)
        if not targets or not all(isinstance(t, str) for t in targets):
            raise ValueError(f"target_modules must be a non-empty list of module names, got {target_modules!r}")
        linear = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
        unmatched = [t for t in targets if not any(_matches(n, t) for n in linear)]
        if unmatched:
            examples = sorted({n.rsplit(".", 1)[-1] for n in linear})
            raise ValueError(f"target_modules {unmatched} match no nn.Linear in the model "
                             f"(its linear layers are named like {examples})")
        chosen = [n for n in linear if any(_matches(n, t) for t in targets)]
    inside = [n for n in chosen if n.endswith(".base") and isinstance(model.get_submodule(n[:-5]), LoRALinear)]
    if inside:
        raise ValueError(f"{inside[0][:-5]} already has a LoRA adapter; call merge_lora first")
    for name in chosen:  # every check before anything changes, so a failed call leaves the model as it was
        try:
            _check_layer_args(model.get_submodule(name), r, alpha, dropout)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
    model.requires_grad_(False)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    for name in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        layer = LoRALinear(getattr(parent, child), r, alpha, dropout, rslora)
        if generator is not None:  # redraw A from the seeded generator, same distribution
            bound = 1 / math.sqrt(layer.in_features)
            with torch.no_grad():
                layer.lora_A.copy_(torch.rand(layer.lora_A.shape, generator=generator) * 2 * bound - bound)
        setattr(parent, child, layer)
    return model


def lora_layers(model: nn.Module) -> list[tuple[str, LoRALinear]]:
    """(name, layer) for every :class:`LoRALinear` in ``model``, in module order."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoRALinear)]


def _require_layers(model):
    layers = lora_layers(model)
    if not layers:
        raise ValueError("the model has no LoRA layers; call add_lora(model, ...) first")
    return layers


def merge_lora(model: nn.Module, unload: bool = True) -> nn.Module:
    """Merge every adapter into its weight, W <- W + s B A; in place, returns ``model``.

    unload=True (peft's ``merge_and_unload``): each LoRALinear is replaced by its (now merged) base
    ``nn.Linear``, leaving a plain model. unload=False keeps the wrappers, merged, so ``unmerge`` works.
    """
    for name, layer in _require_layers(model):
        layer.merge()
        if unload:
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, layer.base)
    return model


def remove_lora(model: nn.Module) -> nn.Module:
    """Throw the adapters away: each LoRALinear is replaced by its base layer, unmerged first if it was
    merged (peft's ``unload``); in place, returns ``model``. The base stays frozen."""
    for name, layer in _require_layers(model):
        if layer.merged:
            layer.unmerge()
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, layer.base)
    return model


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapter alone: {"<layer name>.lora_A": (r, in), "<layer name>.lora_B": (out, r)}, detached copies.

    r (in + out) numbers per adapted layer: kilobytes to megabytes, where the base model is hundreds of MB.
    """
    state = {}
    for name, layer in _require_layers(model):
        state[f"{name}.lora_A"] = layer.lora_A.detach().clone()
        state[f"{name}.lora_B"] = layer.lora_B.detach().clone()
    return state


@torch.no_grad()
def load_lora(model: nn.Module, state: dict[str, torch.Tensor]) -> nn.Module:
    """Copy an adapter saved by :func:`lora_state_dict` into the LoRA layers of ``model`` (same names and
    ranks); the base weights are not touched, so swapping adapters never reloads the base."""
    layers = dict(_require_layers(model))
    expected = {f"{n}.{p}" for n in layers for p in ("lora_A", "lora_B")}
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing or unexpected:
        raise ValueError(f"state does not fit the model's LoRA layers: missing {missing[:4]}, "
                         f"unexpected {unexpected[:4]}")
    for name, layer in layers.items():
        if layer.merged:
            raise ValueError(f"{name} is merged; unmerge it before loading another adapter")
        for part in ("lora_A", "lora_B"):
            param, value = getattr(layer, part), state[f"{name}.{part}"]
            if param.shape != value.shape:
                raise ValueError(f"{name}.{part} has shape {tuple(param.shape)} in the model but "
                                 f"{tuple(value.shape)} in state (a different rank?)")
            param.copy_(value)
    return model


@contextmanager
def disabled(model: nn.Module):
    """``with disabled(model): ...`` runs the base model: every LoRA layer returns base(x) exactly.

    Used for DPO's reference policy (the base with the adapter switched off), and for before/after
    comparisons without a second copy of the model. Merged adapters cannot be switched off.
    """
    layers = _require_layers(model)
    merged = [n for n, layer in layers if layer.merged]
    if merged:
        raise ValueError(f"cannot disable merged adapters ({merged[0]} ...); unmerge them first")
    previous = [layer.enabled for _, layer in layers]
    for _, layer in layers:
        layer.enabled = False
    try:
        yield model
    finally:
        for (_, layer), state in zip(layers, previous, strict=True):
            layer.enabled = state


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of distinct parameters (a tied matrix counts once); only those with requires_grad if asked."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def training_memory(model: nn.Module, optimizer_states: int = 2, bytes_per_number: int | None = None) -> dict:
    """Bytes that training needs besides activations: weights (all), gradients and optimizer state
    (trainable parameters only). AdamW keeps optimizer_states = 2 numbers (m and v) per trainable number.

    weights = N * b,  gradients = N_train * b,  optimizer = optimizer_states * N_train * b,
    with b bytes per number (default: the element size of the model's first parameter).
    """
    params = list(model.parameters())
    if not params:
        raise ValueError("the model has no parameters")
    b = bytes_per_number or params[0].element_size()
    n_all, n_train = count_parameters(model), count_parameters(model, trainable_only=True)
    out = {"weights": n_all * b, "gradients": n_train * b, "optimizer": optimizer_states * n_train * b}
    out["total"] = sum(out.values())
    return out


def measure_training_step(model: nn.Module, ids: torch.Tensor, lr: float = 0.0) -> dict:
    """Run one real training step (next-token cross-entropy on ids (B, T), backward, AdamW) and measure the
    tensors it creates, in bytes: ``weights`` (all parameters), ``gradients`` (every .grad), ``optimizer``
    (AdamW's state), ``activations`` (what autograd saved for the backward pass, each storage once,
    parameters excluded), their ``total``, and ``seconds`` for the whole step. On CUDA also
    ``peak_allocated`` from the allocator. lr = 0 (the default) leaves the weights as they were.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must be a (B, T) tensor of token ids with T >= 2, got {getattr(ids, 'shape', ids)}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable parameters")
    param_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t):  # called for every tensor autograd keeps for the backward pass
        storage = t.untyped_storage()
        if storage.data_ptr() not in param_storages:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    cuda = ids.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    optimizer = torch.optim.AdamW(trainable, lr=lr)
    was_training = model.training
    model.train()
    start = time.perf_counter()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(ids[:, :-1])  # (B, T - 1, V)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
    loss.backward()
    optimizer.step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    grads = sum(p.grad.numel() * p.grad.element_size() for p in trainable if p.grad is not None)
    state = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
                if isinstance(t, torch.Tensor) and t.dim() > 0)  # m and v; the step counters are scalars
    out = {"weights": sum(p.numel() * p.element_size() for p in model.parameters()), "gradients": grads,
           "optimizer": state, "activations": sum(saved.values())}
    out["total"] = sum(out.values())
    out["seconds"] = seconds
    if cuda:
        out["peak_allocated"] = torch.cuda.max_memory_allocated()
    optimizer.zero_grad(set_to_none=True)  # free the gradients; the optimizer state goes with the optimizer
    model.train(was_training)
    return out
