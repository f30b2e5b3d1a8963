"""Bad-input cases for lmbook.moe (chapter 14): routing, dispatch, the MoE layer and its losses."""

import torch
from lmbook import moe as M
from lmbook.model import TransformerConfig

from ._case import Case


def _config(**more):
    return M.MoEConfig(**{"d_model": 8, "d_expert": 6, "n_experts": 4, "top_k": 2, "renormalize": True,
                          "n_shared": 0, "capacity_factor": 1.25, "router_std": 0.02, **more})


def _layer():
    torch.manual_seed(0)
    return M.MoE(_config())


def _x(n=5):
    return torch.randn(n, 8, generator=torch.Generator().manual_seed(0))  # (N, d)


def _logits():
    return torch.randn(5, 4, generator=torch.Generator().manual_seed(1))  # (N, E)


def _routed():
    layer = _layer()
    weights, chosen = M.route(layer.router(_x()).detach(), 2)
    return layer, weights, chosen


def _dispatch():
    layer, weights, chosen = _routed()
    return M.dispatch, {"x": _x(), "weights": weights, "chosen": chosen, "experts": layer.experts, "capacity": 3}


def _tiny():
    return TransformerConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, context_length=16)


# the layer acts on the last axis of (..., d), as chapter 9's FeedForward; NaN is not looked for in activations
ACTIVATIONS_OK = {"extra_dim", "missing_dim", "nan", "inf"}

CASES = [
    Case("MoEConfig", lambda: (M.MoEConfig, {"d_model": 8, "d_expert": 6, "n_experts": 4, "top_k": 2,
                                             "renormalize": True, "n_shared": 1, "capacity_factor": 1.25,
                                             "router_std": 0.02}),
         ok={"n_shared": {"zero"},  # no shared experts is the default
             "router_std": {"zero"}}),  # a zero router: every expert equally likely, a documented start
    Case("MoE", lambda: (M.MoE, {"config": _config()})),
    Case("MoE.forward", lambda: (_layer(), {"x": _x()[None]}), ok={"x": ACTIVATIONS_OK}),
    Case("route", lambda: (M.route, {"logits": _logits(), "top_k": 2, "renormalize": True})),
    Case("moe_per_token", lambda: (M.moe_per_token, {"x": _x(), "router": _layer().router,
                                                     "experts": _layer().experts, "top_k": 2, "renormalize": True}),
         kinds={"router": ()}),  # any callable that maps x (N, d) to logits (N, E): checked by route
    Case("dispatch", _dispatch, ok={"capacity": {"zero"}}),  # capacity 0 drops every assignment, as documented
    Case("expert_capacity", lambda: (M.expert_capacity, {"n_tokens": 64, "n_experts": 8, "top_k": 2,
                                                         "capacity_factor": 1.25})),
    Case("load_balancing_loss", lambda: (M.load_balancing_loss, {"logits": _logits(), "top_k": 2})),
    Case("router_z_loss", lambda: (M.router_z_loss, {"logits": _logits()})),
    Case("soft_moe", lambda: (M.soft_moe, {"x": _x(), "phi": torch.randn(8, 8), "experts": _layer().experts})),
    Case("expert_ffn", lambda: (M.expert_ffn, {"d_model": 8, "d_expert": 6})),
    Case("moe_transformer", lambda: (M.moe_transformer, {"config": _tiny(), "moe_config": _config()})),
    Case("moe_layers", lambda: (M.moe_layers, {"model": M.moe_transformer(_tiny(), _config())})),
    Case("parameter_counts", lambda: (M.parameter_counts, {"model": M.moe_transformer(_tiny(), _config())})),
]

SKIP = {}
