"""Chapter 15's self-checks accept the right answer and reject plausible wrong ones with a message."""

import torch
from check_helpers import verdict
from lmbook import checks


def test_mlp_lora_count(capsys):
    ok, out = verdict(capsys, checks.check_mlp_lora_count, 23_199_744, "mlp_lora_count")
    assert ok and "✓" in out
    ok, out = verdict(capsys, checks.check_mlp_lora_count, 32 * 3 * 16 * 4096, "mlp_lora_count")  # only A's side
    assert not ok and "A (r x in) and B (out x r)" in out
    assert not verdict(capsys, checks.check_mlp_lora_count, 32 * 3 * 4096 * 11008, "mlp_lora_count")[0]  # full
    assert not verdict(capsys, checks.check_mlp_lora_count, 3 * 16 * (4096 + 11008), "mlp_lora_count")[0]  # 1 block
    assert not verdict(capsys, checks.check_mlp_lora_count, 30 * 3 * 4 * (576 + 1536), "mlp_lora_count")[0]  # SmolLM2


def test_captured_energy(capsys):
    def good(delta, r):
        s = torch.linalg.svdvals(delta)
        return (s[:r] ** 2).sum().item() / (s ** 2).sum().item()

    assert verdict(capsys, checks.check_captured_energy, good, "captured_energy")[0]

    def unsquared(delta, r):
        s = torch.linalg.svdvals(delta)
        return (s[:r].sum() / s.sum()).item()

    ok, out = verdict(capsys, checks.check_captured_energy, unsquared, "captured_energy")
    assert not ok and "square" in out

    def off_by_one(delta, r):
        s = torch.linalg.svdvals(delta)
        return ((s[:r + 1] ** 2).sum() / (s ** 2).sum()).item()

    assert not verdict(capsys, checks.check_captured_energy, off_by_one, "captured_energy")[0]

    def unsorted(delta, r):  # the diagonal in its own order
        s = torch.diagonal(delta) if delta.shape[0] == delta.shape[1] else torch.linalg.svdvals(delta)
        s = s.abs()
        return ((s[:r] ** 2).sum() / (torch.linalg.svdvals(delta) ** 2).sum()).item()

    ok, out = verdict(capsys, checks.check_captured_energy, unsorted, "captured_energy")
    assert not ok and "LARGEST" in out


def test_lora_from_delta(capsys):
    def good(delta, r):
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        return u[:, :r] * s[:r].sqrt(), s[:r].sqrt()[:, None] * vh[:r]

    assert verdict(capsys, checks.check_lora_from_delta, good, "lora_from_delta")[0]

    def all_on_B(delta, r):  # also right: the product is what matters
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        return u[:, :r] * s[:r], vh[:r]

    assert verdict(capsys, checks.check_lora_from_delta, all_on_B, "lora_from_delta")[0]

    def forgets_s(delta, r):
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        return u[:, :r], vh[:r]

    ok, out = verdict(capsys, checks.check_lora_from_delta, forgets_s, "lora_from_delta")
    assert not ok and "hint" in out

    def transposed(delta, r):  # factors of delta^T
        u, s, vh = torch.linalg.svd(delta.T, full_matrices=False)
        return u[:, :r] * s[:r], vh[:r]

    assert not verdict(capsys, checks.check_lora_from_delta, transposed, "lora_from_delta")[0]

    def not_a_function(delta, r):
        raise NotImplementedError

    ok, out = verdict(capsys, checks.check_lora_from_delta, not_a_function, "lora_from_delta")
    assert not ok and "not attempted" in out


def test_multi_adapter_forward(capsys):
    def good(x, weight, As, Bs, scalings, adapter_ids):
        A = torch.stack(As)[adapter_ids]  # (N, r, in)
        B = torch.stack(Bs)[adapter_ids]  # (N, out, r)
        s = torch.tensor(scalings, dtype=x.dtype)[adapter_ids]  # (N,)
        return x @ weight.T + s[:, None, None] * (x @ A.transpose(1, 2)) @ B.transpose(1, 2)

    assert verdict(capsys, checks.check_multi_adapter_forward, good, "multi_adapter_forward")[0]

    def first_adapter_for_all(x, weight, As, Bs, scalings, adapter_ids):
        return x @ weight.T + scalings[0] * (x @ As[0].T) @ Bs[0].T

    ok, out = verdict(capsys, checks.check_multi_adapter_forward, first_adapter_for_all, "multi_adapter_forward")
    assert not ok and "own adapter" in out

    def no_scaling(x, weight, As, Bs, scalings, adapter_ids):
        A, B = torch.stack(As)[adapter_ids], torch.stack(Bs)[adapter_ids]
        return x @ weight.T + (x @ A.transpose(1, 2)) @ B.transpose(1, 2)

    ok, out = verdict(capsys, checks.check_multi_adapter_forward, no_scaling, "multi_adapter_forward")
    assert not ok and "scale" in out
