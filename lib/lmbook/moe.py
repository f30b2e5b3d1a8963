"""Mixture-of-experts layers: a router picks k of E feed-forward experts for each token. Chapter 14.

- :func:`route`: softmax over the router's logits, the top k, and (Mixtral) the k weights renormalised;
- :func:`moe_per_token`: the readable definition, one token and one chosen expert at a time;
- :func:`dispatch`: the same sum computed expert by expert (sort the assignments by expert, gather each
  expert's tokens, scatter the weighted outputs back with ``index_add_``), with an optional capacity;
- :class:`MoEConfig` and :class:`MoE`: the layer that replaces chapter 9's FeedForward in a block, with
  DeepSeekMoE's shared experts and the statistics a training loop needs (balancing loss, z-loss, load);
- :func:`load_balancing_loss` (Switch/GShard), :func:`router_z_loss` (ST-MoE), :func:`expert_capacity`;
- :func:`soft_moe`: Soft MoE's slots, a weighted mix with no discrete choice, for contrast;
- :func:`moe_transformer`: chapter 9's Transformer with every FFN replaced by an MoE layer.

Left out on purpose: expert parallelism across devices (all-to-all), grouped GEMM kernels, router jitter
noise, DeepSeek-V3's sigmoid router with bias-based balancing, and expert-choice routing (an exercise).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from . import validate
from .model import FeedForward, Transformer, TransformerConfig

__all__ = ["MoEConfig", "MoE", "route", "moe_per_token", "dispatch", "expert_capacity", "load_balancing_loss",
           "router_z_loss", "soft_moe", "expert_ffn", "moe_transformer", "moe_layers", "parameter_counts"]


@dataclass
class MoEConfig:
    """The shape of one mixture-of-experts layer. Chapter 14."""
    d_model: int = 128                    # d, the width of the residual stream
    d_expert: int = 172                   # each expert's SwiGLU hidden width
    n_experts: int = 8                    # E routed experts
    top_k: int = 2                        # k experts per token
    renormalize: bool = True              # rescale the k chosen weights to sum to 1 (Mixtral); Switch does not
    n_shared: int = 0                     # experts that every token uses, outside the router (DeepSeekMoE)
    capacity_factor: float | None = None  # None: no limit; c: each expert takes at most ceil(c k N / E) tokens
    router_std: float = 0.02              # standard deviation of the router's initial weights
    def __post_init__(self):
        _check_config(self)


def route(logits: torch.Tensor, top_k: int, renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """p = softmax(logits) over the E experts, then the k largest: weights (N, k) and expert ids (N, k).
    renormalize: weights p_i / sum of the k chosen p (Mixtral); else the raw p_i (Switch). Chapter 14."""
    _check_route(logits, top_k, renormalize)
    probs = _wide(logits).softmax(dim=-1)  # (N, E): softmax FIRST, over all E experts
    weights, chosen = probs.topk(top_k, dim=-1)  # (N, k), (N, k)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(logits.dtype), chosen


def moe_per_token(x: torch.Tensor, router: nn.Module, experts: nn.ModuleList, top_k: int,
                  renormalize: bool = True) -> torch.Tensor:
    """y_t = sum over the k experts i chosen for token t of g_{t,i} FFN_i(x_t); x (N, d) -> y (N, d).
    The definition, one token at a time: slow, and the oracle for :func:`dispatch`. Chapter 14."""
    _check_loop(x, experts)
    weights, chosen = route(router(x), top_k, renormalize)  # (N, k), (N, k)
    rows = []
    for t in range(x.shape[0]):
        y_t = torch.zeros_like(x[t])  # (d,)
        for j in range(top_k):
            y_t = y_t + weights[t, j] * experts[int(chosen[t, j])](x[t])
        rows.append(y_t)
    return torch.stack(rows)  # (N, d)


def dispatch(x: torch.Tensor, weights: torch.Tensor, chosen: torch.Tensor, experts: nn.ModuleList,
             capacity: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The same sum as :func:`moe_per_token`, one batched call per expert: x (N, d), weights and chosen (N, k)
    -> y (N, d) and kept (N, k). With a capacity C an expert takes its first C assignments, all first choices
    before any second choice (GShard's priority); the others are dropped and add nothing. Chapter 14."""
    _check_dispatch(x, weights, chosen, experts, capacity)
    N, k = chosen.shape
    expert_of = chosen.T.reshape(-1)  # (k N,): slot-major, so every token's first choice comes first
    token_of = torch.arange(N, device=x.device).repeat(k)  # (k N,)
    weight_of = weights.T.reshape(-1)  # (k N,)
    order = torch.argsort(expert_of, stable=True)  # assignments grouped by expert, in priority order
    counts = torch.bincount(expert_of, minlength=len(experts)).tolist()
    y, kept = torch.zeros_like(x), torch.zeros(k * N, dtype=torch.bool, device=x.device)
    start = 0
    for e, n in enumerate(counts):
        mine = order[start:start + n][:capacity]  # this expert's assignments that fit; capacity None keeps all
        start += n
        if len(mine):
            tokens = token_of[mine]  # (n_e,)
            y.index_add_(0, tokens, weight_of[mine, None] * experts[e](x[tokens]))  # (n_e, d) added to rows
            kept[mine] = True
    return y, kept.view(k, N).T  # (N, d), (N, k)


def expert_capacity(n_tokens: int, n_experts: int, top_k: int, capacity_factor: float) -> int:
    """C = ceil(c k N / E): the tokens one expert may take when N tokens each choose k of E. Chapter 14."""
    validate.integer("n_tokens", n_tokens)
    validate.integer("n_experts", n_experts)
    validate.integer("top_k", top_k, high=n_experts)
    validate.number("capacity_factor", capacity_factor, low=0, low_open=True)
    return math.ceil(capacity_factor * top_k * n_tokens / n_experts)


def load_balancing_loss(logits: torch.Tensor, top_k: int = 1) -> torch.Tensor:
    """E sum_i f_i P_i (Switch, GShard): f_i the fraction of the k N assignments that go to expert i (no
    gradient: a count), P_i the mean router probability of i (differentiable). 1 when the load is uniform.
    logits (N, E). Chapter 14."""
    _check_route(logits, top_k, True)
    probs = _wide(logits).softmax(dim=-1)  # (N, E)
    chosen = probs.topk(top_k, dim=-1).indices  # (N, k)
    E = probs.shape[-1]
    f = torch.bincount(chosen.reshape(-1), minlength=E).to(probs) / chosen.numel()  # (E,), sums to 1
    P = probs.mean(dim=0)  # (E,), sums to 1
    return E * (f * P).sum()


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE's z-loss: the mean over tokens of (log sum_i exp z_i)^2, which keeps router logits small.
    logits (N, E). Chapter 14."""
    _check_route(logits, 1, True)
    return _wide(logits).logsumexp(dim=-1).pow(2).mean()


def soft_moe(x: torch.Tensor, phi: torch.Tensor, experts: nn.ModuleList) -> torch.Tensor:
    """Soft MoE on one group of tokens x (m, d), with s slots per expert, phi (d, E s): logits = x phi;
    dispatch D = softmax over the m tokens (each slot is a mix of tokens), combine C = softmax over the E s
    slots (each token is a mix of slot outputs); expert i processes its s slots. -> (m, d). Chapter 14."""
    _check_soft(x, phi, experts)
    logits = x @ phi  # (m, E s)
    D, C = logits.softmax(dim=0), logits.softmax(dim=1)  # (m, E s) each
    slots = (D.T @ x).view(len(experts), -1, x.shape[-1])  # (E, s, d): slot inputs, weighted sums of tokens
    outputs = torch.cat([expert(slot) for expert, slot in zip(experts, slots, strict=True)])  # (E s, d)
    return C @ outputs  # (m, d)


def expert_ffn(d_model: int, d_expert: int) -> FeedForward:
    """One expert: chapter 9's SwiGLU FeedForward of width d_expert, without biases. Chapter 14."""
    validate.integer("d_model", d_model)
    validate.integer("d_expert", d_expert)
    return FeedForward(TransformerConfig(vocab_size=1, d_model=d_model, n_layers=1, n_heads=1, d_ff=d_expert,
                                         positional="none"))


class MoE(nn.Module):
    """x (..., d) -> (..., d): route every token to k of E SwiGLU experts, add the shared experts. After each
    call: aux_loss (Switch balancing loss), z_loss, load (fraction of assignments per expert), dropped
    (fraction of assignments over capacity) and kept ((N, k) mask of the assignments served). Chapter 14."""
    def __init__(self, config: MoEConfig):
        super().__init__()
        _check_is_config(config)
        self.config = config
        self.router = nn.Linear(config.d_model, config.n_experts, bias=False)  # W_r, one row per expert
        self.experts = nn.ModuleList(expert_ffn(config.d_model, config.d_expert) for _ in range(config.n_experts))
        self.shared = nn.ModuleList(expert_ffn(config.d_model, config.d_expert) for _ in range(config.n_shared))
        nn.init.normal_(self.router.weight, std=config.router_std)
        self.aux_loss = self.z_loss = self.load = self.dropped = self.kept = None
    def forward(self, x):
        _check_width(x, self.config.d_model)
        c = self.config
        tokens = x.reshape(-1, c.d_model)  # (N, d), N = B T
        logits = self.router(tokens)  # (N, E)
        weights, chosen = route(logits, c.top_k, c.renormalize)  # (N, k), (N, k)
        capacity = None if c.capacity_factor is None else expert_capacity(len(tokens), c.n_experts, c.top_k,
                                                                          c.capacity_factor)
        y, kept = dispatch(tokens, weights, chosen, self.experts, capacity)  # (N, d), (N, k)
        for expert in self.shared:
            y = y + expert(tokens)  # every token, weight 1
        self.aux_loss, self.z_loss = load_balancing_loss(logits, c.top_k), router_z_loss(logits)
        self.load = torch.bincount(chosen.reshape(-1), minlength=c.n_experts).detach().float() / chosen.numel()
        self.dropped, self.kept = 1.0 - kept.float().mean().item(), kept
        return y.view(x.shape)


def moe_transformer(config: TransformerConfig, moe_config: MoEConfig) -> Transformer:
    """Chapter 9's Transformer with each block's FFN replaced by an MoE layer. The experts are initialised as
    the model initialises its FFNs (std 0.02; W_down 0.02 / sqrt(2 L)); the rest is untouched. Chapter 14."""
    _check_is_config(moe_config, "moe_config")
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {validate.describe(config)}")
    if config.d_model != moe_config.d_model:
        raise ValueError(f"moe_config.d_model={moe_config.d_model} must equal config.d_model={config.d_model}")
    model = Transformer(config)
    for block in model.blocks:
        block.ffn = MoE(moe_config)
        for name, p in block.ffn.named_parameters():
            if not name.startswith("router."):
                std = 0.02 / math.sqrt(2 * config.n_layers) if name.endswith("down_proj.weight") else 0.02
                nn.init.normal_(p, std=std)
    return model


def moe_layers(model: nn.Module) -> list[MoE]:
    """The MoE layers of a model, in order: sum their aux_loss after a forward pass. Chapter 14."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch module, got {validate.describe(model)}")
    return [m for m in model.modules() if isinstance(m, MoE)]


def parameter_counts(model: nn.Module) -> tuple[int, int]:
    """(total, active): a token uses k of the E routed experts of each MoE layer and every other parameter,
    embeddings included (a tied matrix counts once). Chapter 14."""
    layers = moe_layers(model)  # checks model
    total = sum(p.numel() for p in model.parameters())
    idle = sum((m.config.n_experts - m.config.top_k) * sum(p.numel() for p in m.experts[0].parameters())
               for m in layers)  # the E - k experts a token does not visit, in every layer
    return total, total - idle


def _wide(t: torch.Tensor) -> torch.Tensor:
    """Router arithmetic in float32 at least (as Mixtral does), float64 kept."""
    return t if t.dtype == torch.float64 else t.float()


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_config(c: MoEConfig) -> None:
    for name in ("d_model", "d_expert", "n_experts"):
        validate.integer(name, getattr(c, name))
    validate.integer("top_k", c.top_k, high=c.n_experts if isinstance(c.n_experts, int) else None)
    validate.integer("n_shared", c.n_shared, low=0)
    validate.boolean("renormalize", c.renormalize)
    if c.capacity_factor is not None:
        validate.number("capacity_factor", c.capacity_factor, low=0, low_open=True)
    validate.number("router_std", c.router_std, low=0)
    if c.top_k == 1 and c.renormalize:
        warnings.warn("MoEConfig(top_k=1, renormalize=True) gives every token the gate weight 1, so the router gets "
                      "no gradient from the model's loss; use renormalize=False (Switch) for top-1", stacklevel=4)


def _check_is_config(config, name: str = "config") -> None:
    if not isinstance(config, MoEConfig):
        raise TypeError(f"{name} must be an MoEConfig, got {validate.describe(config)}")


def _check_route(logits, top_k, renormalize) -> None:
    validate.tensor("logits", logits, ndim=2)
    if logits.shape[0] == 0 or logits.shape[1] == 0:
        raise ValueError(f"logits must have shape (N, E) with N, E >= 1, got {tuple(logits.shape)}")
    validate.integer("top_k", top_k, high=logits.shape[1])
    validate.boolean("renormalize", renormalize)


def _check_tokens(x) -> None:
    validate.tensor("x", x, ndim=2)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x must have shape (N, d) with N, d >= 1, got {tuple(x.shape)}")


def _check_width(x, d) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() == 0 or x.shape[-1] != d:
        raise ValueError(f"x must be a floating-point tensor of shape (..., d) with d={d}, got {validate.describe(x)}")


def _check_experts(experts) -> None:
    if not isinstance(experts, nn.ModuleList) or len(experts) == 0:
        raise TypeError(f"experts must be a non-empty nn.ModuleList, got {validate.describe(experts)}")


def _check_loop(x, experts) -> None:
    _check_tokens(x)
    _check_experts(experts)


def _check_dispatch(x, weights, chosen, experts, capacity) -> None:
    _check_tokens(x)
    _check_experts(experts)
    validate.tensor("weights", weights, ndim=2)
    validate.tensor("chosen", chosen, ndim=2, kind="int")
    if weights.shape != chosen.shape or chosen.shape[0] != x.shape[0]:
        raise ValueError(f"weights and chosen must both have shape (N, k) with N={x.shape[0]}, got "
                         f"{tuple(weights.shape)} and {tuple(chosen.shape)}")
    if chosen.numel() and (chosen.min() < 0 or chosen.max() >= len(experts)):
        raise ValueError(f"chosen must hold expert ids in [0, {len(experts) - 1}], found {chosen.min().item()}"
                         f"..{chosen.max().item()}")
    if capacity is not None:
        validate.integer("capacity", capacity, low=0)


def _check_soft(x, phi, experts) -> None:
    _check_tokens(x)
    _check_experts(experts)
    validate.tensor("phi", phi, ndim=2)
    if phi.shape[0] != x.shape[1] or phi.shape[1] == 0 or phi.shape[1] % len(experts):
        raise ValueError(f"phi must have shape (d, E s) with d={x.shape[1]} and E s a multiple of E={len(experts)}, "
                         f"got {tuple(phi.shape)}")
