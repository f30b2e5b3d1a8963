"""LoRA: fine-tune a frozen model through small low-rank updates of its linear layers (Hu et al. 2021).

A linear layer y = x W^T + b (W: out x in) is adapted as

    y = x W^T + b + s * dropout(x) A^T B^T,   i.e.   W' = W + s * B A,

with W and b frozen, A (r x in) initialised Kaiming-uniform, B (out x r) initialised to zero, so that
B A = 0 and the adapted model starts out exactly equal to the base. The scale is s = alpha / r, or
s = alpha / sqrt(r) for rank-stabilised LoRA (rsLoRA, Kalajdzievski 2023). Only A and B are trained:
r (in + out) numbers per layer instead of in * out. Chapter 15.

This module gives the layer (:class:`LoRALinear`, with ``merge``/``unmerge``), injection into any model
by module name (:func:`add_lora`), merging for inference (:func:`merge_lora`), saving and swapping
adapters (:func:`lora_state_dict`, :func:`load_lora`) and switching them off for a while
(:func:`disabled`, e.g. to get DPO's reference model from the same weights). Conventions follow peft's
``LoraConfig``/``get_peft_model``, which the tests use as the oracle. What training costs (parameters,
bytes, a measured step) is in :mod:`lmbook.finetuning_cost`.

Left out on purpose: several named adapters inside one layer (swap adapters with ``load_lora``
instead), LoRA on embeddings and convolutions, DoRA/PiSSA/LoftQ initialisations, and quantized base
weights (QLoRA's 4-bit storage is discussed, not implemented, in the chapter).
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from . import validate

__all__ = ["LoRALinear", "add_lora", "merge_lora", "remove_lora", "lora_layers", "lora_state_dict", "load_lora",
           "disabled", "energy_kept"]


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update: y = base(x) + s * dropout(x) A^T B^T.

    base: the pretrained layer, wrapped (not copied) and frozen; W is (out, in).
    r: the rank, 1 <= r <= min(in, out). alpha: the scale numerator, s = alpha / r (alpha / sqrt(r) if
    ``rslora``). dropout: probability of zeroing an input of the LoRA path while training (the base path
    never sees dropout). A: (r, in), Kaiming-uniform; B: (out, r), zeros, so the layer starts equal to base.
    Chapter 15.
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0, rslora: bool = False):
        super().__init__()
        _check_layer_args(base, r, alpha, dropout, rslora)
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
        _check_input(x, self.in_features)
        y = self.base(x)
        if self.merged or not self.enabled:  # merged: base.weight already holds W + s B A
            return y
        return y + self.scaling * F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B)

    @torch.no_grad()
    def merge(self) -> None:
        """W <- W + s B A: afterwards the layer costs exactly one matmul, like the base layer."""
        _check_can_merge(self)
        self.base.weight += self.delta_weight().to(self.base.weight.dtype)
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """W <- W - s B A: back to the frozen weight (equal up to floating-point rounding)."""
        _check_can_unmerge(self)
        self.base.weight -= self.delta_weight().to(self.base.weight.dtype)
        self.merged = False

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, r={self.r}, "
                f"alpha={self.alpha}, scaling={self.scaling:.4g}, merged={self.merged}")


def add_lora(model: nn.Module, target_modules, r: int, alpha: float, dropout: float = 0.0,
             rslora: bool = False, seed: int | None = None) -> nn.Module:
    """Freeze every parameter of ``model`` and wrap each ``nn.Linear`` named by ``target_modules`` in a
    :class:`LoRALinear`; in place, and returns ``model``. Chapter 15.

    target_modules: names such as ["q_proj", "v_proj"] (peft's rule: a module matches when its full name
    is the target or ends with "." + target, e.g. "blocks.3.attn.q_proj"), or a regular expression string
    that must match the whole name. Every listed name must match at least one linear layer.
    seed: if given, A is drawn from torch.Generator seeded with it (the same adapter start every time).
    """
    _check_add_lora(model, target_modules, r, alpha, dropout, rslora, seed)  # before anything changes
    model.requires_grad_(False)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    for name in _target_names(model, target_modules):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        layer = LoRALinear(getattr(parent, child), r, alpha, dropout, rslora)
        if generator is not None:  # redraw A from the seeded generator, same distribution
            _redraw_uniform_(layer.lora_A, 1 / math.sqrt(layer.in_features), generator)
        setattr(parent, child, layer)
    return model


def _target_names(model, target_modules) -> list[str]:
    """Full names of the nn.Linear layers that ``target_modules`` (a list of names, or a regex) selects."""
    linear = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if isinstance(target_modules, str):
        return [n for n in linear if re.fullmatch(target_modules, n)]
    return [n for n in linear if any(_matches(n, t) for t in target_modules)]


def _matches(name: str, target: str) -> bool:
    """peft's rule: a target matches a module whose full name is it or ends with '.' + it."""
    return name == target or name.endswith("." + target)


@torch.no_grad()
def _redraw_uniform_(param, bound, generator):
    param.copy_(torch.rand(param.shape, generator=generator) * 2 * bound - bound)


def lora_layers(model: nn.Module) -> list[tuple[str, LoRALinear]]:
    """(name, layer) for every :class:`LoRALinear` in ``model``, in module order."""
    _check_module(model)
    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoRALinear)]


def merge_lora(model: nn.Module, unload: bool = True) -> nn.Module:
    """Merge every adapter into its weight, W <- W + s B A; in place, returns ``model``.

    unload=True (peft's ``merge_and_unload``): each LoRALinear is replaced by its (now merged) base
    ``nn.Linear``, leaving a plain model. unload=False keeps the wrappers, merged, so ``unmerge`` works.
    """
    validate.boolean("unload", unload)
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
    _check_load(model, state)
    for name, layer in lora_layers(model):
        layer.lora_A.copy_(state[f"{name}.lora_A"])
        layer.lora_B.copy_(state[f"{name}.lora_B"])
    return model


def disabled(model: nn.Module):
    """``with disabled(model): ...`` runs the base model: every LoRA layer returns base(x) exactly.

    Used for DPO's reference policy (the base with the adapter switched off), and for before/after
    comparisons without a second copy of the model. Merged adapters cannot be switched off.
    """
    layers = [layer for _, layer in _require_layers(model)]
    _check_unmerged(layers, "model", "cannot disable merged adapters")
    return _switched_off(layers)


@contextmanager
def _switched_off(layers):
    previous = [layer.enabled for layer in layers]
    for layer in layers:
        layer.enabled = False
    try:
        yield
    finally:
        for layer, state in zip(layers, previous, strict=True):
            layer.enabled = state


def energy_kept(singular_values: torch.Tensor) -> torch.Tensor:
    """From a matrix's singular values (any order), the share of its squared Frobenius norm that its best
    rank-r approximation keeps, for r = 1, 2, ...: cumsum(sigma_i^2) / sum(sigma_i^2), float64 (Eckart-Young).
    Chapter 15."""
    _check_singular_values(singular_values)
    sq = singular_values.double().sort(descending=True).values.pow(2)  # (k,)
    return sq.cumsum(0) / sq.sum()


# ---------------------------------------------------------------------------------------------------------
# Checks: each raises a TypeError or ValueError that names the argument
# ---------------------------------------------------------------------------------------------------------

def _check_module(model, name="model"):
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name} must be an nn.Module instance, got {validate.describe(model)}")


def _check_layer_args(base, r, alpha, dropout, rslora):
    if not isinstance(base, nn.Linear):
        raise TypeError(f"base must be an nn.Linear, got {validate.describe(base)}")
    validate.integer("r", r, low=None)
    if r <= 0:
        raise ValueError(f"r must be > 0 (the rank of the update B A), got {r!r}")
    if r > min(base.in_features, base.out_features):
        raise ValueError(f"r must be <= min(in_features, out_features) = {min(base.in_features, base.out_features)} "
                         f"for a {base.in_features} -> {base.out_features} layer, got r={r}")
    validate.number("alpha", alpha, low=0, low_open=True)
    validate.number("dropout", dropout, low=0, high=1, high_open=True)
    validate.boolean("rslora", rslora)


def _check_input(x, in_features):
    validate.tensor("x", x, kind="float")
    if x.dim() == 0 or x.shape[-1] != in_features:
        raise ValueError(f"x must have shape (..., in_features) = (..., {in_features}), got {tuple(x.shape)}")


def _check_can_merge(layer):
    if layer.merged:
        raise ValueError("this LoRA layer is already merged; merging twice would add s * B A twice")
    if not layer.enabled:
        raise ValueError("cannot merge a disabled LoRA layer (inside `disabled(model)`)")


def _check_can_unmerge(layer):
    if not layer.merged:
        raise ValueError("this LoRA layer is not merged, so there is nothing to unmerge")


def _check_add_lora(model, target_modules, r, alpha, dropout, rslora, seed):
    _check_module(model)
    if isinstance(target_modules, str):
        try:
            re.compile(target_modules)
        except re.error as err:
            raise ValueError(f"target_modules {target_modules!r} is not a valid regular expression: {err}") from None
    else:
        validate.strings("target_modules", target_modules)
    if seed is not None:
        validate.integer("seed", seed, low=0)
    chosen = _target_names(model, target_modules)
    linear = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if isinstance(target_modules, str) and not chosen:
        raise ValueError(f"target_modules pattern {target_modules!r} matches no nn.Linear in the model (a string "
                         f"is a regular expression for whole names like 'blocks.0.attn.q_proj'; pass a list "
                         f"such as ['q_proj'] to match by the last part of the name)")
    wrapped = [n for n, m in model.named_modules() if isinstance(m, LoRALinear)
               and not isinstance(target_modules, str) and any(_matches(n, t) for t in target_modules)]
    if wrapped:
        raise ValueError(f"{wrapped[0]} already has a LoRA adapter; call remove_lora(model) (or merge_lora) "
                         f"before adding new adapters")
    unmatched = [] if isinstance(target_modules, str) else [
        t for t in target_modules if not any(_matches(n, t) for n in linear)]
    if unmatched:
        raise ValueError(f"target_modules {unmatched} match no nn.Linear in the model "
                         f"(its linear layers are named like {sorted({n.rsplit('.', 1)[-1] for n in linear})})")
    inside = [n[:-5] for n in chosen if n.endswith(".base") and isinstance(model.get_submodule(n[:-5]), LoRALinear)]
    if inside:
        raise ValueError(f"{inside[0]} already has a LoRA adapter (target_modules selects its base); "
                         f"call merge_lora first")
    names_of = {}  # a tied weight (lm_head and tok_emb) is one Parameter under several names
    for n, p in model.named_parameters(remove_duplicate=False):
        names_of.setdefault(id(p), []).append(n)
    for name in chosen:
        if tied := [n for n in names_of.get(id(model.get_submodule(name).weight), []) if n != name + ".weight"]:
            raise ValueError(f"target_modules selects {name}, whose weight is tied to {tied}: merging would change "
                             f"those too; leave {name.rsplit('.', 1)[-1]!r} out of target_modules")
        try:
            _check_layer_args(model.get_submodule(name), r, alpha, dropout, rslora)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None


def _require_layers(model):
    layers = lora_layers(model)
    if not layers:
        raise ValueError("the model has no LoRA layers; call add_lora(model, ...) first")
    return layers


def _check_unmerged(layers, name, what):
    if any(layer.merged for layer in layers):
        raise ValueError(f"{what}: {name} has merged LoRA layers; unmerge them first")


def _check_load(model, state):
    layers = dict(_require_layers(model))
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict of tensors from lora_state_dict, got {validate.describe(state)}")
    expected = {f"{n}.{p}" for n in layers for p in ("lora_A", "lora_B")}
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected, key=str)
    if missing or unexpected:
        raise ValueError(f"state does not fit the model's LoRA layers: missing {missing[:4]}, "
                         f"unexpected {unexpected[:4]}")
    _check_unmerged(layers.values(), "model", "cannot load an adapter into merged layers")
    for name, layer in layers.items():
        for part in ("lora_A", "lora_B"):
            value = state[f"{name}.{part}"]
            validate.tensor(f"state[{name}.{part!r}]", value, kind="float")
            if getattr(layer, part).shape != value.shape:
                raise ValueError(f"{name}.{part} has shape {tuple(getattr(layer, part).shape)} in the model but "
                                 f"{tuple(value.shape)} in state (a different rank?)")


def _check_singular_values(s):
    validate.tensor("singular_values", s, ndim=1)
    if s.numel() == 0 or bool((s < 0).any()) or not bool((s > 0).any()):
        raise ValueError(f"singular_values must be non-negative with at least one > 0, got {s.tolist()[:6]}")
