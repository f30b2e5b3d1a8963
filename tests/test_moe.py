"""lmbook.moe against independent implementations: a per-token loop, brute-force counting, and transformers'
Mixtral layer and load-balancing loss (test-only oracle)."""

import math
import warnings

import pytest
import torch
from lmbook.model import FeedForward, TransformerConfig
from lmbook.moe import (
    MoE,
    MoEConfig,
    dispatch,
    expert_capacity,
    expert_ffn,
    load_balancing_loss,
    moe_layers,
    moe_per_token,
    moe_transformer,
    parameter_counts,
    route,
    router_z_loss,
    soft_moe,
)
from torch import nn


def _layer(d=12, d_expert=10, n_experts=5, top_k=2, seed=0, **kw):
    torch.manual_seed(seed)
    layer = MoE(MoEConfig(d_model=d, d_expert=d_expert, n_experts=n_experts, top_k=top_k, router_std=0.5, **kw))
    return layer.double()


def test_route_is_softmax_then_top_k_and_renormalised_equals_softmax_over_the_top_k_logits():
    logits = torch.randn(20, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    weights, chosen = route(logits, 3, renormalize=False)
    probs = logits.softmax(-1)
    for t in range(20):  # brute force: sort each row
        order = sorted(range(6), key=lambda i: -probs[t, i].item())[:3]
        assert chosen[t].tolist() == order
        assert torch.allclose(weights[t], probs[t, order])
    renormed, _ = route(logits, 3, renormalize=True)
    assert torch.allclose(renormed, logits.gather(1, chosen).softmax(-1))  # the identity the chapter proves
    assert torch.allclose(renormed.sum(-1), torch.ones(20, dtype=torch.float64))
    assert not torch.allclose(weights.sum(-1), torch.ones(20, dtype=torch.float64))


@pytest.mark.parametrize("top_k,renormalize", [(1, False), (1, True), (2, True), (2, False), (5, True)])
def test_dispatch_equals_the_per_token_loop_forward_and_gradients(top_k, renormalize):
    layer = _layer(top_k=top_k, renormalize=renormalize)
    x = torch.randn(17, 12, dtype=torch.float64, requires_grad=True)
    loop = moe_per_token(x, layer.router, layer.experts, top_k, renormalize)
    weights, chosen = route(layer.router(x), top_k, renormalize)
    batched, kept = dispatch(x, weights, chosen, layer.experts)
    assert kept.all()
    assert torch.allclose(batched, loop, atol=1e-12)
    params = [x, *layer.parameters()]
    g_loop = torch.autograd.grad((loop * torch.cos(loop)).sum(), params, allow_unused=True)
    g_batch = torch.autograd.grad((batched * torch.cos(batched)).sum(), params, allow_unused=True)
    for a, b in zip(g_loop, g_batch, strict=True):
        assert (a is None and b is None) or torch.allclose(a, b, atol=1e-12)
    assert layer(x).shape == x.shape and torch.allclose(layer(x), loop, atol=1e-12)


def test_capacity_keeps_first_choices_first_and_drops_the_rest():
    gen = torch.Generator().manual_seed(3)
    N, E, k, C = 30, 4, 2, 9
    chosen = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(N)])  # (N, k), distinct per token
    weights = torch.rand(N, k, generator=gen, dtype=torch.float64)
    experts = nn.ModuleList(nn.Identity() for _ in range(E))  # y_t = sum of the kept weights times x_t
    x = torch.ones(N, 1, dtype=torch.float64)
    y, kept = dispatch(x, weights, chosen, experts, capacity=C)
    want = torch.zeros(N, k, dtype=torch.bool)  # brute force: walk the first choices, then the second choices
    used = [0] * E
    for j in range(k):
        for t in range(N):
            e = int(chosen[t, j])
            if used[e] < C:
                used[e], want[t, j] = used[e] + 1, True
    assert torch.equal(kept, want) and (~kept).any()
    assert torch.allclose(y[:, 0], (weights * want).sum(-1))
    assert torch.bincount(chosen[kept], minlength=E).max() <= C


def test_moe_layer_keeps_the_mask_of_its_capacity_dispatch():
    layer = _layer(capacity_factor=1.0)
    x = torch.randn(2, 15, 12, dtype=torch.float64)
    y = layer(x)
    tokens = x.reshape(-1, 12)  # brute force: route, then the per-layer capacity of section 6
    weights, chosen = route(layer.router(tokens), 2)
    want_y, want_kept = dispatch(tokens, weights, chosen, layer.experts, expert_capacity(30, 5, 2, 1.0))
    assert layer.kept.shape == (30, 2) and torch.equal(layer.kept, want_kept) and (~layer.kept).any()
    assert torch.allclose(y.view(-1, 12), want_y)
    assert math.isclose(layer.dropped, (~want_kept).sum().item() / 60, abs_tol=1e-6)  # a float32 mean


def test_expert_capacity():
    assert expert_capacity(64, 8, 1, 1.0) == 8
    assert expert_capacity(64, 8, 2, 1.25) == 20
    assert expert_capacity(10, 3, 1, 1.0) == 4  # rounded up


def test_load_balancing_loss_values_and_gradient():
    E = 4
    uniform = torch.zeros(8, E)
    uniform[torch.arange(8), torch.arange(8) % E] = 20.0  # each expert gets 2 tokens, almost surely
    assert abs(load_balancing_loss(uniform, 1).item() - 1.0) < 1e-6
    collapsed = torch.zeros(8, E)
    collapsed[:, 2] = 30.0
    assert abs(load_balancing_loss(collapsed, 1).item() - E) < 1e-6
    logits = torch.randn(50, E, dtype=torch.float64, requires_grad=True)
    probs = logits.softmax(-1)
    counts = torch.zeros(E, dtype=torch.float64)
    for row in probs.detach():  # brute force, k = 2: count each token's two largest
        for i in row.argsort(descending=True)[:2]:
            counts[i] += 1
    naive = E * (counts / counts.sum() * probs.mean(0)).sum()
    ours = load_balancing_loss(logits, 2)
    assert torch.allclose(ours, naive)
    (g_ours,), (g_naive,) = torch.autograd.grad(ours, logits), torch.autograd.grad(naive, logits)
    assert torch.allclose(g_ours, g_naive)  # f carries no gradient in either: only P does


def test_router_z_loss():
    logits = torch.randn(9, 5, dtype=torch.float64)
    naive = sum(math.log(sum(math.exp(v) for v in row)) ** 2 for row in logits.tolist()) / 9
    assert abs(router_z_loss(logits).item() - naive) < 1e-12


def test_soft_moe_against_a_loop():
    torch.manual_seed(4)
    m, d, E, s = 7, 6, 3, 2
    x, phi = torch.randn(m, d, dtype=torch.float64), torch.randn(d, E * s, dtype=torch.float64)
    experts = nn.ModuleList(expert_ffn(d, 8).double() for _ in range(E))
    logits = x @ phi
    outputs = []
    for slot in range(E * s):  # slot input: a softmax-over-tokens average of the tokens
        w = [math.exp(logits[i, slot].item()) for i in range(m)]
        inp = sum(w[i] / sum(w) * x[i] for i in range(m))
        outputs.append(experts[slot // s](inp))
    want = torch.stack([sum(logits[i].softmax(0)[slot] * outputs[slot] for slot in range(E * s)) for i in range(m)])
    assert torch.allclose(soft_moe(x, phi, experts), want)


def test_shared_experts_are_added_with_weight_one():
    layer = _layer(n_shared=2)
    x = torch.randn(3, 4, 12, dtype=torch.float64)
    tokens = x.reshape(-1, 12)
    routed = moe_per_token(tokens, layer.router, layer.experts, 2)
    want = routed + layer.shared[0](tokens) + layer.shared[1](tokens)
    assert torch.allclose(layer(x), want.view(3, 4, 12))
    assert layer.dropped == 0.0 and torch.isclose(layer.load.sum(), torch.tensor(1.0))


def test_moe_transformer_and_parameter_counts():
    config = TransformerConfig(vocab_size=50, d_model=16, n_layers=2, n_heads=2, d_ff=24)
    moe_config = MoEConfig(d_model=16, d_expert=12, n_experts=4, top_k=2, n_shared=1)
    model = moe_transformer(config, moe_config)
    logits = model(torch.randint(0, 50, (2, 5)))
    assert logits.shape == (2, 5, 50)
    layers = moe_layers(model)
    assert len(layers) == 2 and all(m.aux_loss.requires_grad for m in layers)
    total, active = parameter_counts(model)
    expert = 3 * 16 * 12
    attention = 4 * 16 * 16
    per_block = attention + 2 * 16 + 4 * 16 + (4 + 1) * expert  # norms, router, 4 routed + 1 shared experts
    assert total == 50 * 16 + 2 * per_block + 16
    assert active == total - 2 * 2 * expert  # two of the four routed experts idle, in each block
    assert isinstance(expert_ffn(16, 12), FeedForward)


def test_against_transformers_mixtral_block_and_its_balancing_loss():
    mixtral = pytest.importorskip("transformers.models.mixtral.modeling_mixtral")
    from transformers import MixtralConfig

    d, ff, E, k = 16, 24, 6, 2
    hf = mixtral.MixtralSparseMoeBlock(MixtralConfig(hidden_size=d, intermediate_size=ff, num_local_experts=E,
                                                     num_experts_per_tok=k, router_jitter_noise=0.0))
    torch.manual_seed(5)
    for p in hf.parameters():
        nn.init.normal_(p, std=0.3)
    ours = MoE(MoEConfig(d_model=d, d_expert=ff, n_experts=E, top_k=k))
    with torch.no_grad():
        ours.router.weight.copy_(hf.gate.weight)  # (E, d) in both
        for e, expert in enumerate(ours.experts):  # gate_up_proj[e] = [W_gate; W_up] (2 ff, d), down_proj[e] (d, ff)
            expert.gate_proj.weight.copy_(hf.experts.gate_up_proj[e, :ff])
            expert.up_proj.weight.copy_(hf.experts.gate_up_proj[e, ff:])
            expert.down_proj.weight.copy_(hf.experts.down_proj[e])
    x = torch.randn(3, 7, d)
    hf.eval()
    with torch.no_grad():
        assert torch.allclose(ours(x), hf(x), atol=1e-5)
        logits = ours.router(x.reshape(-1, d))
        hf_loss = mixtral.load_balancing_loss_func((logits,), E, k)
        # transformers' f_i counts assignments per token, so its f sums to k: its loss is k times ours
        assert torch.allclose(hf_loss, k * load_balancing_loss(logits, k), atol=1e-6)
        # over several layers transformers pools the counts and probabilities into one f and one P: two layers,
        # each collapsed onto a different pair, are each maximally unbalanced, yet the pooled loss reads as fair
        E, k, n = 4, 2, 64
        layer_a = torch.tensor([8.0, 8.0, 0.0, 0.0]).repeat(n, 1)
        layer_b = torch.tensor([0.0, 0.0, 8.0, 8.0]).repeat(n, 1)
        ours_each = [load_balancing_loss(z, k).item() for z in (layer_a, layer_b)]
        assert ours_each == pytest.approx([2.0, 2.0], abs=1e-3)  # E/k: every layer collapsed onto 2 of 4
        pooled = mixtral.load_balancing_loss_func((layer_a, layer_b), E, k)
        assert pooled.item() == pytest.approx(k * 1.0, abs=1e-3)  # k times "uniform": the collapse is hidden


def test_config_warns_on_renormalised_top_1():
    with pytest.warns(UserWarning, match="renormalize=False"):
        MoEConfig(top_k=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MoEConfig(top_k=1, renormalize=False)  # Switch: no warning
        MoEConfig(top_k=2)
