"""lmbook.lora: oracle tests against peft (LoraConfig + get_peft_model on a tiny random-init transformers
Llama whose weights are copied into lmbook's Transformer): forward, merge, trainable counts, gradients,
rsLoRA; plus the layer's own properties (identical start, merge/unmerge, dropout, disabling, saving and
swapping adapters) and bad input."""

import copy
import math

import pytest
import torch
from lmbook import finetuning_cost as cost
from lmbook import lora
from lmbook import model as M
from test_model import llama_pair
from torch import nn

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

ATTN, MLP = ["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_proj", "up_proj", "down_proj"]


def ours_name(peft_name):
    """peft's names -> lmbook's: base_model.model.model.layers.1.self_attn.q_proj (on transformers' Llama) or
    base_model.model.blocks.1.attn.q_proj (on lmbook's own Transformer) -> blocks.1.attn.q_proj."""
    if "model.layers." in peft_name:
        rest = peft_name.split("model.layers.", 1)[1]
        return "blocks." + rest.replace("self_attn.", "attn.").replace("mlp.", "ffn.")
    return peft_name.removeprefix("base_model.model.")


def adapted_pair(targets, r=4, alpha=8, rslora=False, tie=False, seed=0, on="llama"):
    """peft and lmbook with LoRA on ``targets``; peft's A and B set to random non-zero values and copied.

    on="llama": peft wraps transformers' LlamaForCausalLM (the weights copied into lmbook's Transformer).
    on="lmbook": peft wraps a deep copy of lmbook's own Transformer, so both sides share the same base
    computation bit for bit and any difference is LoRA's alone.
    """
    hf, ours = llama_pair(tie=tie, seed=seed)
    if on == "lmbook":
        hf = copy.deepcopy(ours)
    config = peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, use_rslora=rslora)
    hf = peft.get_peft_model(hf, config)
    lora.add_lora(ours, targets, r=r, alpha=alpha, rslora=rslora)
    g = torch.Generator().manual_seed(seed + 1)
    layers = dict(lora.lora_layers(ours))
    n_copied = 0
    with torch.no_grad():
        for name, module in hf.named_modules():
            if isinstance(module, peft.tuners.lora.LoraLayer):
                module.lora_B["default"].weight.copy_(torch.randn(module.lora_B["default"].weight.shape,
                                                                  generator=g, dtype=torch.float64) * 0.1)
                layer = layers[ours_name(name)]
                layer.lora_A.copy_(module.lora_A["default"].weight)
                layer.lora_B.copy_(module.lora_B["default"].weight)
                assert module.scaling["default"] == pytest.approx(layer.scaling, rel=1e-15)
                n_copied += 1
    assert n_copied == len(layers) > 0
    return hf, ours


def logits(model, x):
    return model(x) if isinstance(model, M.Transformer) else model(input_ids=x).logits


def peft_logits(hf, x):
    return hf(input_ids=x).logits if isinstance(hf.get_base_model(), transformers.PreTrainedModel) else hf(x)


# Tolerances. On lmbook's own Transformer (on="lmbook") both sides run the same base code, so they agree to
# float64 rounding (1e-12). Against transformers' Llama (on="llama") the *base* models already differ by
# about 4e-7 in float64, because the two libraries compute the RoPE angles in float32 in different ways;
# the 1e-6 covers that, and LoRA adds nothing measurable to it.
TOL = {"lmbook": 1e-12, "llama": 1e-6}


def ids(batch=2, length=12, vocab=40, seed=3):
    return torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("on", ["lmbook", "llama"])
@pytest.mark.parametrize("targets,rslora", [(["q_proj", "v_proj"], False), (ATTN + MLP, False),
                                            (["q_proj", "down_proj"], True)])
def test_forward_matches_peft_with_nonzero_B(targets, rslora, on):
    hf, ours = adapted_pair(targets, r=4, alpha=8, rslora=rslora, on=on)
    x = ids()
    with torch.no_grad():
        expected, got = peft_logits(hf, x), ours(x)
        with hf.disable_adapter():
            base = peft_logits(hf, x)
        assert (expected - base).abs().max() > 1e-2  # the adapter really changes the output
        assert (got - expected).abs().max() < TOL[on]
        with hf.disable_adapter(), lora.disabled(ours):  # both give the base model back
            assert (ours(x) - peft_logits(hf, x)).abs().max() < TOL[on]
        assert torch.equal(ours(x), got)  # and the adapter is back on afterwards


def test_rslora_scaling_is_alpha_over_sqrt_r():
    base = nn.Linear(16, 12)
    assert lora.LoRALinear(base, r=4, alpha=8).scaling == 2.0
    assert lora.LoRALinear(nn.Linear(16, 12), r=4, alpha=8, rslora=True).scaling == 4.0
    _, ours = adapted_pair(["v_proj"], r=9, alpha=6, rslora=True)  # peft's scaling compared inside
    assert all(layer.scaling == 2.0 for _, layer in lora.lora_layers(ours))


@pytest.mark.parametrize("on", ["lmbook", "llama"])
@pytest.mark.parametrize("rslora", [False, True])
def test_merge_matches_peft_merge_and_unload(rslora, on):
    targets = ["q_proj", "v_proj", "up_proj"]
    hf, ours = adapted_pair(targets, r=2, alpha=5, rslora=rslora, on=on)
    x = ids()
    with torch.no_grad():
        before = ours(x)
        deltas = {n: layer.delta_weight().clone() for n, layer in lora.lora_layers(ours)}
        originals = {n: layer.base.weight.clone() for n, layer in lora.lora_layers(ours)}
        merged_hf = hf.merge_and_unload()
        lora.merge_lora(ours)
        assert not lora.lora_layers(ours)  # a plain model again
        hf_sd = merged_hf.state_dict()
        for name, delta in deltas.items():
            w = ours.get_submodule(name).weight
            assert type(ours.get_submodule(name)) is nn.Linear
            i, kind, proj = name.split(".")[1:4]
            hf_name = (name + ".weight" if on == "lmbook" else
                       f"model.layers.{i}.{'self_attn' if kind == 'attn' else 'mlp'}.{proj}.weight")
            assert torch.allclose(w, hf_sd[hf_name], rtol=0, atol=1e-12)  # the same merged weight
            assert torch.allclose(w, originals[name] + delta, rtol=0, atol=1e-15)  # W + s B A
        assert (ours(x) - before).abs().max() < 1e-12  # merged == unmerged output
        assert (ours(x) - logits(merged_hf, x)).abs().max() < TOL[on]


@pytest.mark.parametrize("targets,tie", [(["q_proj", "v_proj"], False), (ATTN + MLP, True), (["o_proj"], True)])
def test_trainable_counts_match_peft(targets, tie):
    hf, ours = adapted_pair(targets, r=4, alpha=8, tie=tie)
    trainable, total = hf.get_nb_trainable_parameters()
    assert cost.count_parameters(ours, trainable_only=True) == trainable
    assert cost.count_parameters(ours) == total
    assert {n for n, p in ours.named_parameters() if p.requires_grad} == {
        f"{n}.{p}" for n, _ in lora.lora_layers(ours) for p in ("lora_A", "lora_B")}


@pytest.mark.parametrize("on", ["lmbook", "llama"])
@pytest.mark.parametrize("rslora", [False, True])
def test_gradients_and_one_step_match_peft(rslora, on):
    targets = ["q_proj", "v_proj", "down_proj"]
    hf, ours = adapted_pair(targets, r=4, alpha=16, rslora=rslora, on=on)
    x, y = ids(seed=5), ids(seed=6)
    hf.train(), ours.train()
    opt_hf = torch.optim.SGD([p for p in hf.parameters() if p.requires_grad], lr=0.1)
    opt_ours = torch.optim.SGD([p for p in ours.parameters() if p.requires_grad], lr=0.1)
    for model, out in ((hf, peft_logits), (ours, logits)):
        loss = nn.functional.cross_entropy(out(model, x).flatten(0, 1), y.flatten())
        loss.backward()
    layers = dict(lora.lora_layers(ours))
    n = 0
    for name, module in hf.named_modules():
        if isinstance(module, peft.tuners.lora.LoraLayer):
            layer = layers[ours_name(name)]
            for part in ("lora_A", "lora_B"):
                g_hf = getattr(module, part)["default"].weight.grad
                g = getattr(layer, part).grad
                assert g_hf.abs().max() > 1e-4
                assert (g - g_hf).abs().max() < TOL[on] * max(1.0, g_hf.abs().max().item())
            n += 1
    assert n == len(layers)
    assert all(p.grad is None for p in ours.parameters() if not p.requires_grad)  # the base gets no gradient
    opt_hf.step(), opt_ours.step()
    hf.eval(), ours.eval()
    with torch.no_grad():
        assert (ours(x) - peft_logits(hf, x)).abs().max() < TOL[on]


def test_kaiming_A_zero_B_and_identical_start():
    torch.manual_seed(0)
    base = nn.Linear(64, 32)
    layer = lora.LoRALinear(base, r=4, alpha=8)
    assert layer.lora_A.shape == (4, 64) and layer.lora_B.shape == (32, 4)
    assert torch.count_nonzero(layer.lora_B) == 0
    bound = 1 / math.sqrt(64)  # kaiming_uniform_(a=sqrt(5)) on fan_in = 64
    assert layer.lora_A.abs().max() <= bound and layer.lora_A.abs().max() > 0.9 * bound
    x = torch.randn(5, 64)
    assert torch.equal(layer(x), base(x))  # bit for bit, not just close
    assert cost.count_parameters(layer, trainable_only=True) == 4 * (64 + 32) == 384
    assert not base.weight.requires_grad and not base.bias.requires_grad


def test_seeded_A_is_reproducible_and_in_the_kaiming_range():
    def make(seed):
        m = nn.Sequential(nn.Linear(20, 10), nn.ReLU(), nn.Linear(10, 10))
        return lora.add_lora(m, ["0", "2"], r=2, alpha=2, seed=seed)

    a, b, c = make(1), make(1), make(2)
    assert torch.equal(a[0].lora_A, b[0].lora_A) and not torch.equal(a[0].lora_A, c[0].lora_A)
    assert a[0].lora_A.abs().max() <= 1 / math.sqrt(20) and a[2].lora_A.abs().max() <= 1 / math.sqrt(10)


def test_merge_unmerge_roundtrip_and_merging_twice_is_refused():
    torch.manual_seed(0)
    layer = lora.LoRALinear(nn.Linear(16, 8).double(), r=2, alpha=4)
    nn.init.normal_(layer.lora_B)
    w0, x = layer.base.weight.clone(), torch.randn(3, 16, dtype=torch.float64)
    y = layer(x)
    layer.merge()
    assert layer.merged and torch.allclose(layer(x), y, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="already merged"):
        layer.merge()
    layer.unmerge()
    assert torch.allclose(layer.base.weight, w0, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="not merged"):
        layer.unmerge()
    model = nn.Sequential(nn.Linear(8, 8))
    lora.add_lora(model, ["0"], r=2, alpha=2)
    lora.merge_lora(model, unload=False)
    with pytest.raises(ValueError, match="already merged"):
        lora.merge_lora(model, unload=False)
    with pytest.raises(ValueError, match="merged"):
        with lora.disabled(model):
            pass


def test_dropout_acts_on_the_lora_path_only_in_training():
    torch.manual_seed(0)
    layer = lora.LoRALinear(nn.Linear(32, 16), r=4, alpha=4, dropout=0.5)
    nn.init.normal_(layer.lora_B)
    x = torch.randn(8, 32)
    layer.eval()
    clean = layer(x)
    layer.train()
    torch.manual_seed(1)
    noisy = layer(x)
    torch.manual_seed(1)
    mask = nn.functional.dropout(torch.ones_like(x), 0.5, training=True)  # the same draw: kept inputs are x2
    expected = layer.base(x) + layer.scaling * (x * mask) @ layer.lora_A.T @ layer.lora_B.T
    assert not torch.allclose(noisy, clean)
    assert torch.allclose(noisy, expected, atol=1e-6)
    with lora.disabled(nn.Sequential(layer)):  # disabled: the base layer exactly, even in training mode
        assert torch.equal(layer(x), layer.base(x))


def test_state_dict_roundtrip_swaps_adapters_without_touching_the_base():
    _, ours = adapted_pair(["q_proj", "v_proj"], r=3, alpha=6)
    base_before = {n: p.clone() for n, p in ours.named_parameters() if not p.requires_grad}
    x = ids()
    adapter_1, out_1 = lora.lora_state_dict(ours), ours(x)
    assert set(adapter_1) == {f"blocks.{i}.attn.{p}.lora_{ab}" for i in range(2) for p in ("q_proj", "v_proj")
                              for ab in "AB"}
    with torch.no_grad():
        for _, layer in lora.lora_layers(ours):
            layer.lora_B.mul_(-2)
    out_2, adapter_2 = ours(x), lora.lora_state_dict(ours)
    assert not torch.allclose(out_1, out_2)
    lora.load_lora(ours, adapter_1)
    assert torch.equal(ours(x), out_1)
    lora.load_lora(ours, adapter_2)
    assert torch.equal(ours(x), out_2)
    assert all(torch.equal(p, base_before[n]) for n, p in ours.named_parameters() if not p.requires_grad)
    with pytest.raises(ValueError, match="missing"):
        lora.load_lora(ours, {k: v for k, v in adapter_1.items() if "q_proj" not in k})
    with pytest.raises(ValueError, match="different rank"):
        lora.load_lora(ours, {k: torch.cat([v, v], dim=0 if k.endswith("A") else 1) for k, v in adapter_1.items()})


def test_training_memory_counts_weights_grads_and_adam_state():
    model = nn.Sequential(nn.Linear(10, 10, bias=False), nn.Linear(10, 4, bias=False))
    full = cost.training_memory(model)
    assert full == {"weights": 140 * 4, "gradients": 140 * 4, "optimizer": 280 * 4, "total": 560 * 4}
    lora.add_lora(model, ["0"], r=2, alpha=2)
    small = cost.training_memory(model)
    assert small["weights"] == (140 + 40) * 4 and small["gradients"] == 40 * 4 and small["optimizer"] == 80 * 4


@pytest.mark.parametrize("kwargs,error,match", [
    ({"r": 0}, ValueError, "r must be > 0"),
    ({"r": -2}, ValueError, "r must be > 0"),
    ({"r": 9}, ValueError, r"r must be <= min\(in_features, out_features\) = 8"),
    ({"r": 2.0}, TypeError, "r must be"),
    ({"alpha": 0}, ValueError, "alpha must be > 0"),
    ({"alpha": -1.0}, ValueError, "alpha must be > 0"),
    ({"dropout": 1.0}, ValueError, "dropout"),
])
def test_bad_layer_arguments(kwargs, error, match):
    args = {"r": 2, "alpha": 4, **kwargs}
    with pytest.raises(error, match=match):
        lora.LoRALinear(nn.Linear(16, 8), **args)


def test_bad_targets_name_the_unmatched_names():
    _, ours = llama_pair()
    with pytest.raises(ValueError, match=r"\['qproj', 'mlp'\] match no nn.Linear"):
        lora.add_lora(ours, ["q_proj", "qproj", "mlp"], r=2, alpha=4)
    assert all(p.requires_grad for p in ours.parameters())  # nothing was changed by the failed call
    with pytest.raises(ValueError, match="regular expression"):
        lora.add_lora(ours, "q_proj", r=2, alpha=4)
    with pytest.raises(ValueError, match="non-empty list"):
        lora.add_lora(ours, [], r=2, alpha=4)
    with pytest.raises(ValueError, match=r"blocks.0.attn.k_proj: r must be <= min\(in_features, out_features\) = 16"):
        lora.add_lora(ours, ["q_proj", "k_proj"], r=20, alpha=4)  # k_proj is 32 -> 16 (two KV heads of 8)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        lora.add_lora(ours, ["q_proj"], r=2, alpha=0)
    assert not lora.lora_layers(ours) and all(p.requires_grad for p in ours.parameters())  # left as it was
    with pytest.raises(TypeError, match="nn.Linear"):
        lora.LoRALinear(nn.Conv1d(3, 3, 1), r=1, alpha=1)
    lora.add_lora(ours, r".*\.attn\.(q|v)_proj", r=2, alpha=4)  # a regex matching whole names works
    assert len(lora.lora_layers(ours)) == 4
    with pytest.raises(ValueError, match="already has a LoRA adapter"):
        lora.add_lora(ours, ["base"], r=2, alpha=4)
    with pytest.raises(ValueError, match=r"blocks.0.attn.q_proj already has a LoRA adapter; call remove_lora"):
        lora.add_lora(ours, ["q_proj", "k_proj"], r=2, alpha=4)  # adding the same targets again
    assert len(lora.lora_layers(ours)) == 4
    with pytest.raises(ValueError, match="no LoRA layers"):
        lora.merge_lora(nn.Sequential(nn.Linear(2, 2)))


def test_remove_lora_restores_the_plain_model_even_when_merged():
    _, ours = llama_pair()
    x = ids()
    with torch.no_grad():
        plain = ours(x)
    lora.add_lora(ours, ATTN, r=2, alpha=4)
    with torch.no_grad():
        for _, layer in lora.lora_layers(ours):
            layer.lora_B.normal_()
    lora.merge_lora(ours, unload=False)
    lora.remove_lora(ours)
    assert not lora.lora_layers(ours)
    assert all(type(ours.get_submodule(f"blocks.0.attn.{p}")) is nn.Linear for p in ATTN)
    with torch.no_grad():
        assert (ours(x) - plain).abs().max() < 1e-12  # unmerged before removal: the base model again


def test_measure_training_step_counts_the_tensors_of_a_real_step():
    torch.manual_seed(0)
    model = M.Transformer(M.TransformerConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, context_length=32))
    x = torch.randint(50, (2, 17), generator=torch.Generator().manual_seed(0))
    before = {n: p.clone() for n, p in model.state_dict().items()}
    full = cost.measure_training_step(model, x)
    n_all = cost.count_parameters(model)
    assert full["weights"] == full["gradients"] == 4 * n_all and full["optimizer"] == 8 * n_all
    assert full["activations"] > 0 and full["total"] == sum(full[k] for k in ("weights", "gradients", "optimizer",
                                                                             "activations"))
    assert all(torch.equal(p, before[n]) for n, p in model.state_dict().items())  # lr = 0 changes nothing
    assert all(p.grad is None for p in model.parameters())  # gradients freed afterwards
    lora.add_lora(model, ["q_proj", "v_proj"], r=2, alpha=4)
    small = cost.measure_training_step(model, x)
    n_train = cost.count_parameters(model, trainable_only=True)
    assert small["gradients"] == 4 * n_train and small["optimizer"] == 8 * n_train
    assert 0 < small["activations"] < full["activations"]  # frozen layers keep fewer inputs, but not none
    with pytest.raises(ValueError, match="T >= 2"):
        cost.measure_training_step(model, x[:, :1])
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable"):
        cost.measure_training_step(model, x)


def test_energy_kept_matches_the_error_of_explicit_truncations():
    g = torch.Generator().manual_seed(3)
    m = torch.randn(9, 6, generator=g, dtype=torch.float64)
    u, sv, vh = torch.linalg.svd(m, full_matrices=False)
    kept = lora.energy_kept(sv[torch.randperm(6, generator=g)])  # any order of the singular values
    for r in range(1, 7):
        m_r = u[:, :r] @ torch.diag(sv[:r]) @ vh[:r]  # Eckart-Young: the best rank-r approximation
        assert kept[r - 1].item() == pytest.approx(1 - (m - m_r).norm().item() ** 2 / m.norm().item() ** 2, abs=1e-12)
    assert kept[-1].item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="singular_values must be non-negative"):
        lora.energy_kept(torch.tensor([1.0, -0.5]))
    with pytest.raises(ValueError, match="singular_values must have 1 dimensions"):
        lora.energy_kept(m)



def test_a_tied_target_is_refused():
    _, tied = llama_pair(tie=True)  # lm_head.weight is tok_emb.weight: merging s BA would change the embeddings
    with pytest.raises(ValueError, match=r"selects lm_head, whose weight is tied to \['tok_emb.weight'\]"):
        lora.add_lora(tied, ["q_proj", "lm_head"], r=2, alpha=4)
    assert not lora.lora_layers(tied) and all(p.requires_grad for p in tied.parameters())  # left as it was
    pair = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    pair[1].weight = pair[0].weight  # two linear layers sharing one matrix
    with pytest.raises(ValueError, match=r"selects 0, whose weight is tied to \['1.weight'\]"):
        lora.add_lora(pair, ["0"], r=1, alpha=1)
    _, untied = llama_pair(tie=False)
    lora.add_lora(untied, ["lm_head"], r=2, alpha=4)  # its own matrix: accepted
    assert [name for name, _ in lora.lora_layers(untied)] == ["lm_head"]
