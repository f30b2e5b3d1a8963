"""lmbook.policy_gradient: the bandit gradient against autograd and its closed form, REINFORCE's estimate
converging to it, k3 unbiased and non-negative, group advantages and the GRPO loss against trl 1.16's own
GRPOTrainer._compute_loss (called on fixed log-probs with a stand-in trainer) and against a naive float64
implementation of the DeepSeekMath formulas."""

import math
import statistics
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from lmbook import policy_gradient as PG


def _bandit(k=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(k, generator=g, dtype=torch.float64), torch.rand(k, generator=g, dtype=torch.float64)


# ----- the bandit: closed form, autograd, Monte Carlo ----------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bandit_gradient_is_autograd_of_the_expected_reward(seed):
    logits, rewards = _bandit(seed=seed)
    z = logits.clone().requires_grad_(True)
    (torch.softmax(z, -1) * rewards).sum().backward()
    torch.testing.assert_close(PG.bandit_gradient(logits, rewards), z.grad, rtol=1e-12, atol=1e-12)
    # and the closed form written out arm by arm
    p = [math.exp(v) / sum(math.exp(u) for u in logits.tolist()) for v in logits.tolist()]
    mean = sum(pi * ri for pi, ri in zip(p, rewards.tolist(), strict=True))
    want = [pi * (ri - mean) for pi, ri in zip(p, rewards.tolist(), strict=True)]
    torch.testing.assert_close(PG.bandit_gradient(logits, rewards), torch.tensor(want, dtype=torch.float64))


def test_reinforce_loss_gradient_is_the_reinforce_estimate():
    """-grad of reinforce_loss on sampled arms equals the estimator's formula on the same arms."""
    logits, rewards = _bandit()
    g = torch.Generator().manual_seed(3)
    arms = torch.multinomial(torch.softmax(logits, -1), 50, replacement=True, generator=g)
    z = logits.clone().requires_grad_(True)
    PG.reinforce_loss(torch.log_softmax(z, -1)[arms], rewards[arms], baseline=0.3).backward()
    g = torch.Generator().manual_seed(3)
    estimate = PG.reinforce_bandit_estimate(logits, rewards, 50, baseline=0.3, generator=g)
    torch.testing.assert_close(-z.grad, estimate)


@pytest.mark.parametrize("baseline", [0.0, 0.5, 10.0])
def test_reinforce_estimate_converges_to_the_closed_form(baseline):
    """Each sample's term (r_a - b)(1[a = i] - p_i) lies in [-m, m] with m = max|r - b|, so the mean of S samples
    has a standard deviation <= m / sqrt(S): a 6-sigma band fails by chance with probability < 1e-8."""
    logits, rewards = _bandit()
    n = 200_000
    g = torch.Generator().manual_seed(0)
    estimate = PG.reinforce_bandit_estimate(logits, rewards, n, baseline=baseline, generator=g)
    bound = 6 * (rewards - baseline).abs().max().item() / math.sqrt(n)
    assert (estimate - PG.bandit_gradient(logits, rewards)).abs().max().item() < bound


def test_a_baseline_lowers_the_variance():
    logits, rewards = _bandit()
    rewards = rewards + 10.0  # every reward far from 0: b = 0 is a poor baseline
    mean_reward = (torch.softmax(logits, -1) * rewards).sum().item()
    spread = {}
    for b in (0.0, mean_reward):
        g = torch.Generator().manual_seed(1)
        draws = torch.stack([PG.reinforce_bandit_estimate(logits, rewards, 1, b, g) for _ in range(2000)])
        spread[b] = draws.var(dim=0).sum().item()
    assert spread[mean_reward] < spread[0.0] / 20


# ----- k3 -----------------------------------------------------------------------------------------------------
def test_k3_is_unbiased_for_kl():
    """Sample tokens y ~ pi over K = 6 symbols: the mean of k3(y) estimates KL(pi || ref). Its standard error is
    sd(k3) / sqrt(n), with sd(k3) computed exactly from the two distributions; 6 standard errors fail by chance
    with probability < 1e-8."""
    g = torch.Generator().manual_seed(0)
    logp = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64), -1)
    logref = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64), -1)
    p = logp.exp()
    kl = (p * (logp - logref)).sum().item()
    k3_all = PG.kl_k3(logp, logref)  # (K,): k3 at each symbol
    sd = math.sqrt((p * k3_all**2).sum().item() - kl**2)
    n = 200_000
    y = torch.multinomial(p, n, replacement=True, generator=g)
    estimate = PG.kl_k3(logp[y], logref[y]).mean().item()
    assert abs(estimate - kl) < 6 * sd / math.sqrt(n)
    assert abs((p * k3_all).sum().item() - kl) < 1e-12  # and exactly: E_pi[k3] = KL


def test_k3_is_never_negative():
    g = torch.Generator().manual_seed(0)
    logps = -10 * torch.rand(1000, generator=g, dtype=torch.float64)
    ref = -10 * torch.rand(1000, generator=g, dtype=torch.float64)
    assert (PG.kl_k3(logps, ref) >= 0).all()
    assert PG.kl_k3(logps, logps).abs().max().item() == 0.0


# ----- group advantages ---------------------------------------------------------------------------------------
def test_group_advantages_against_a_loop():
    g = torch.Generator().manual_seed(0)
    rewards = (torch.rand(4, 8, generator=g) > 0.5).to(torch.float64)
    rewards[0] = 1.0  # a group whose rewards are all equal
    for scale in (True, False):
        got = PG.group_advantages(rewards, scale=scale, eps=1e-4)
        for p, row in enumerate(rewards.tolist()):
            mean, sd = statistics.mean(row), statistics.stdev(row)  # stdev: Bessel's correction
            for i, r in enumerate(row):
                want = (r - mean) / (sd + 1e-4) if scale else r - mean
                assert abs(got[p, i].item() - want) < 1e-12
    assert (PG.group_advantages(rewards)[0] == 0).all()


def test_group_advantages_use_trls_std():
    from trl.trainer.utils import nanstd
    rewards = torch.rand(3, 5, generator=torch.Generator().manual_seed(1))
    want = (rewards - rewards.mean(1, keepdim=True)) / (nanstd(rewards, dim=1, keepdim=True) + 1e-4)
    torch.testing.assert_close(PG.group_advantages(rewards), want)


# ----- the GRPO loss ------------------------------------------------------------------------------------------
def _grpo_inputs(b=6, t=7, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logps = -3 * torch.rand(b, t, generator=g, dtype=dtype)
    old = logps + 0.3 * torch.randn(b, t, generator=g, dtype=dtype)  # ratios well outside [0.8, 1.2] too
    ref = logps + 0.5 * torch.randn(b, t, generator=g, dtype=dtype)
    adv = torch.randn(b, generator=g, dtype=dtype)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    lengths[0] = t
    mask = torch.arange(t)[None, :] < lengths[:, None]
    return logps, old, ref, adv, mask


def _naive_grpo(logps, old, ref, adv, mask, eps, beta, aggregation):
    """DeepSeekMath's GRPO objective written token by token in Python floats."""
    rows, total, count = [], 0.0, 0
    for i in range(logps.shape[0]):
        terms = []
        for t in range(logps.shape[1]):
            if not mask[i, t]:
                continue
            lp, lo, lr, a = logps[i, t].item(), old[i, t].item(), ref[i, t].item(), adv[i].item()
            ratio = math.exp(lp - lo)
            clipped = min(max(ratio, 1 - eps), 1 + eps)
            kl = math.exp(lr - lp) - (lr - lp) - 1
            terms.append(-min(ratio * a, clipped * a) + beta * kl)
        rows.append(sum(terms) / len(terms))
        total, count = total + sum(terms), count + len(terms)
    if aggregation == "sequence":
        return sum(rows) / len(rows)
    if aggregation == "token":
        return total / count
    return total / mask.numel()


@pytest.mark.parametrize("aggregation", PG.AGGREGATIONS)
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_grpo_loss_against_naive_deepseekmath(aggregation, beta):
    logps, old, ref, adv, mask = _grpo_inputs()
    got = PG.grpo_loss(logps, old, ref, adv, mask, clip_eps=0.2, beta=beta, aggregation=aggregation).item()
    assert abs(got - _naive_grpo(logps, old, ref, adv, mask, 0.2, beta, aggregation)) < 1e-12


class _Accelerator:
    sync_gradients = True

    def reduce(self, x, reduction="sum"):
        return x

    def gather(self, x):
        return x


def _trl_loss(loss_type, logps, old, ref, adv, mask, eps, beta, max_completion_length=None):
    """trl 1.16's GRPOTrainer._compute_loss on fixed log-probs: a stand-in trainer supplies the attributes the
    method reads, and its log-prob method returns ``logps`` instead of running a model."""
    from trl.trainer.grpo_trainer import GRPOTrainer
    b, t = logps.shape
    fake = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logps, torch.zeros_like(logps), None),
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token",
        beta=beta, loss_type=loss_type, epsilon_low=eps, epsilon_high=eps,
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None), use_vllm=False,
        vllm_importance_sampling_correction=False, model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, max_completion_length=max_completion_length or t,
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False, accelerator=_Accelerator(), _metrics={"train": defaultdict(list)})
    inputs = {"prompt_ids": torch.zeros(b, 2, dtype=torch.long), "prompt_mask": torch.ones(b, 2, dtype=torch.long),
              "completion_ids": torch.zeros(b, t, dtype=torch.long), "completion_mask": mask.long(),
              "advantages": adv, "old_per_token_logps": old, "ref_per_token_logps": ref}
    return GRPOTrainer._compute_loss(fake, None, inputs)


TRL_NAMES = {"sequence": "grpo", "token": "bnpo", "constant": "dr_grpo"}


@pytest.mark.parametrize("aggregation", PG.AGGREGATIONS)
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_grpo_loss_and_gradient_against_trl(aggregation, beta):
    logps, old, ref, adv, mask = _grpo_inputs(seed=1)
    ours_in = logps.clone().requires_grad_(True)
    trl_in = logps.clone().requires_grad_(True)
    ours = PG.grpo_loss(ours_in, old, ref, adv, mask, clip_eps=0.2, beta=beta, aggregation=aggregation)
    theirs = _trl_loss(TRL_NAMES[aggregation], trl_in, old, ref, adv, mask, 0.2, beta)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    ours.backward()
    theirs.backward()
    torch.testing.assert_close(ours_in.grad, trl_in.grad, rtol=1e-12, atol=1e-12)


def test_on_policy_grpo_gradient_is_reinforce_with_group_advantages():
    """With pi_old = pi (ratio 1, no clipping) and beta = 0, GRPO's gradient is REINFORCE's on each token."""
    logps, _, ref, adv, mask = _grpo_inputs(seed=2)
    x = logps.clone().requires_grad_(True)
    PG.grpo_loss(x, x.detach(), ref, adv, mask, beta=0.0).backward()
    y = logps.clone().requires_grad_(True)
    per_seq = (y * mask).sum(1) / mask.sum(1)  # (B,): the mean token log-prob of each completion
    PG.reinforce_loss(per_seq, adv).backward()
    torch.testing.assert_close(x.grad, y.grad)


def test_clipping_stops_the_gradient_outside_the_trust_region():
    logps = torch.zeros(2, 1, dtype=torch.float64, requires_grad=True)
    old = torch.log(torch.tensor([[1 / 1.5], [1.5]], dtype=torch.float64))  # ratios 1.5 and 1/1.5
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)  # raising a ratio of 1.5 further, lowering 0.67 further
    loss = PG.grpo_loss(logps, old, logps.detach(), adv, torch.ones(2, 1, dtype=torch.bool), beta=0.0)
    loss.backward()
    assert logps.grad.abs().max().item() == 0.0
    logps.grad = None
    PG.grpo_loss(logps, old, logps.detach(), -adv, torch.ones(2, 1, dtype=torch.bool), beta=0.0).backward()
    assert (logps.grad.abs() > 0).all()  # in the other direction the ratio is not clipped


def test_padding_is_ignored():
    logps, old, ref, adv, mask = _grpo_inputs(seed=3)
    noisy = [x.masked_fill(~mask, 123.0) for x in (logps, old, ref)]
    for aggregation in PG.AGGREGATIONS:
        a = PG.grpo_loss(logps, old, ref, adv, mask, aggregation=aggregation)
        b = PG.grpo_loss(*noisy, adv, mask, aggregation=aggregation)
        torch.testing.assert_close(a, b)


def test_bad_arguments_are_named():
    logps, old, ref, adv, mask = _grpo_inputs()
    with pytest.raises(ValueError, match="mask"):
        PG.grpo_loss(logps, old, ref, adv, mask[:, :3])
    with pytest.raises(ValueError, match="mask"):
        PG.grpo_loss(logps, old, ref, adv, mask & False)
    with pytest.raises(ValueError, match="aggregation"):
        PG.grpo_loss(logps, old, ref, adv, mask, aggregation="per-token")
    with pytest.raises(ValueError, match="rewards"):
        PG.group_advantages(torch.ones(3, 1))
    with pytest.raises(ValueError, match="old_logps"):
        PG.grpo_token_loss(logps, old[:, :2], ref, adv)


@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_constant_aggregation_divides_by_a_fixed_length_as_trl(beta):
    """Dr. GRPO divides by a fixed maximum completion length, not by the batch's padded length."""
    logps, old, ref, adv, mask = _grpo_inputs(seed=2)
    ours = PG.grpo_loss(logps, old, ref, adv, mask, clip_eps=0.2, beta=beta, aggregation="constant", max_length=50)
    theirs = _trl_loss("dr_grpo", logps, old, ref, adv, mask, 0.2, beta, max_completion_length=50)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="max_length"):
        PG.grpo_loss(logps, old, ref, adv, mask, aggregation="constant", max_length=mask.shape[1] - 1)

