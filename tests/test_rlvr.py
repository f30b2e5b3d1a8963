"""lmbook.rlvr: the supervised loss counts only the target, completions are masked up to their first EOS, token
log-probabilities match a direct computation, and one GRPO step changes the policy and never the reference."""

import copy

import pytest
import torch
import torch.nn.functional as F
from lmbook import reasoning as R
from lmbook import rlvr
from lmbook.model import Transformer
from lmbook.pretrained import tiny_config


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(tiny_config(len(R.VOCAB))).eval()


def test_supervised_loss_counts_only_the_target_characters(model):
    problems = [(12, 34), (5, 678)]
    loss = rlvr.supervised_loss(model, problems, "scratchpad")
    terms = []
    for a, b in problems:  # one problem at a time, no padding, positions read by hand
        p, t = R.prompt(a, b, "scratchpad"), R.target(a, b, "scratchpad")
        ids = torch.tensor([R.encode(p + t)])
        logp = model(ids[:, :-1])[0].log_softmax(-1)
        terms += [-logp[len(p) - 1 + j, ids[0, len(p) + j]] for j in range(len(t))]
    assert loss.item() == pytest.approx(torch.stack(terms).mean().item(), rel=1e-5)


def test_complete_masks_generated_tokens_up_to_the_first_eos(model):
    problems = [(123, 456), (789, 101)]
    ids, mask, texts = rlvr.complete(model, problems, "answer", n_samples=3, temperature=1.0,
                                     generator=torch.Generator().manual_seed(0))
    plen = len(R.prompt(*problems[0]))
    assert ids.shape[0] == 6 and mask.shape == (6, ids.shape[1] - 1) and len(texts) == 6
    for row, m in zip(ids.tolist(), mask.tolist(), strict=True):
        new = row[plen:]
        end = new.index(rlvr.EOS_ID) + 1 if rlvr.EOS_ID in new else len(new)
        assert [t for t, keep in enumerate(m) if keep] == list(range(plen - 1, plen - 1 + end))


def test_token_logps_equal_a_direct_gather(model):
    ids = torch.tensor([R.encode("12+34=46."), R.encode("99+1=100.")[:9]])
    logits = model(ids[:, :-1])
    direct = torch.stack([F.log_softmax(logits[n, t], -1)[ids[n, t + 1]] for n in range(2) for t in range(8)])
    assert torch.allclose(rlvr.token_logps(model, ids).flatten(), direct, atol=1e-5)


def test_greedy_accuracy_scores_with_the_verifier(model):
    problems = R.make_problems(6, 2, seed=3)
    _, _, texts = rlvr.complete(model, problems, "answer")
    expected = sum(R.reward(t, a, b) for t, (a, b) in zip(texts, problems, strict=True)) / 6
    assert rlvr.accuracy(model, problems, "answer") == expected


def test_grpo_step_moves_the_policy_and_never_the_reference(model):
    policy = copy.deepcopy(model).train()
    reference = copy.deepcopy(model).requires_grad_(False)
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    out = rlvr.grpo_step(policy, reference, opt, R.make_problems(2, 1, seed=0), "answer",
                         rlvr.GRPOConfig(group_size=4, temperature=2.0), torch.Generator().manual_seed(1))
    assert set(out) == {"reward", "kl", "clipped"} and 0 <= out["reward"] <= 1 and out["kl"] >= 0
    assert all(torch.equal(v, reference.state_dict()[k]) for k, v in before.items())
    assert any(not torch.equal(p, q) for p, q in zip(policy.parameters(), reference.parameters(), strict=True))


def test_bad_arguments_are_named(model):
    with pytest.raises(ValueError, match="one length"):
        rlvr.complete(model, [(1, 2), (10, 20)])
    with pytest.raises(ValueError, match="fmt"):
        rlvr.complete(model, [(1, 2)], "binary")
    with pytest.raises(ValueError, match="reference"):
        rlvr.grpo_step(model, model, torch.optim.SGD(model.parameters(), lr=0.1), [(1, 2)], "answer",
                       rlvr.GRPOConfig())
    with pytest.raises(TypeError, match="config"):
        rlvr.grpo_step(model, copy.deepcopy(model), torch.optim.SGD(model.parameters(), lr=0.1), [(1, 2)],
                       "answer", {"group_size": 8})


# Against computations written differently: one sequence at a time, no cache, whole-sequence log-probs.

def small_model(seed=0):
    torch.manual_seed(seed)
    return Transformer(tiny_config(len(R.VOCAB)))


def greedy_by_hand(model, a, b, fmt, max_new):
    ids, out = R.encode(R.prompt(a, b, fmt)), ""
    for _ in range(max_new):  # no cache, one sequence, argmax over the full recomputation
        nxt = model(torch.tensor([ids]))[0, -1].argmax().item()
        ids.append(nxt)
        out += R.VOCAB[nxt]
        if R.VOCAB[nxt] == R.EOS:
            break
    return out


def test_greedy_completion_matches_a_step_by_step_argmax_and_its_mask():
    model = small_model(1)
    with torch.no_grad():
        model.lm_head.weight.mul_(3.0)  # sharper logits, so that EOS appears at different steps
    problems = R.make_problems(6, 3, seed=7)
    ids, mask, texts = rlvr.complete(model, problems, "scratchpad")
    plen = len(R.prompt(*problems[0], "scratchpad"))
    max_new = max(len(R.target(x, y, "scratchpad")) for x, y in problems) + 4
    for n, (a, b) in enumerate(problems):
        assert texts[n].split(R.EOS)[0] == greedy_by_hand(model, a, b, "scratchpad", max_new).split(R.EOS)[0]
        generated = ids[n, plen:].tolist()
        upto = generated.index(rlvr.EOS_ID) + 1 if rlvr.EOS_ID in generated else len(generated)
        assert mask[n].tolist() == [False] * (plen - 1) + [True] * upto + [False] * (len(generated) - upto)


def test_samples_are_reproducible_and_grouped_by_problem():
    model, problems = small_model(2), R.make_problems(3, 2, seed=1)
    first = rlvr.complete(model, problems, "answer", 4, 1.0, torch.Generator().manual_seed(5))
    again = rlvr.complete(model, problems, "answer", 4, 1.0, torch.Generator().manual_seed(5))
    assert torch.equal(first[0], again[0])
    prompts = [R.decode(row[:6].tolist()) for row in first[0]]
    assert prompts == [R.prompt(a, b) for a, b in problems for _ in range(4)]


def test_token_logps_sum_to_the_sequence_logprob():
    from lmbook.decoding import sequence_logprob
    model, problems = small_model(3), R.make_problems(4, 2, seed=2)
    ids, _, _ = rlvr.complete(model, problems, "answer", 2, 1.0, torch.Generator().manual_seed(0))
    plen = len(R.prompt(*problems[0]))
    per_token = rlvr.token_logps(model, ids).double()
    assert torch.allclose(per_token[:, plen - 1:].sum(1), sequence_logprob(model, ids, plen), atol=1e-4)


def test_a_batch_whose_groups_all_score_alike_leaves_the_policy_unchanged():
    policy = small_model(4)
    reference = copy.deepcopy(policy).requires_grad_(False)
    before = copy.deepcopy(policy.state_dict())
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2, weight_decay=0.0)
    out = rlvr.grpo_step(policy, reference, opt, R.make_problems(4, 3, seed=1), "answer",
                         rlvr.GRPOConfig(beta=0.0, updates=2), torch.Generator().manual_seed(0))
    assert out["reward"] == 0.0  # an untrained model solves nothing: every advantage is 0
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())


def test_a_rewarded_sample_becomes_more_likely():
    from lmbook.decoding import sequence_logprob
    policy = small_model(5)
    reference = copy.deepcopy(policy).requires_grad_(False)
    config = rlvr.GRPOConfig(group_size=1024, updates=1, beta=0.0)  # p("0.") ~ 1/256: some samples hit it
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    target = torch.tensor([R.encode(R.prompt(0, 0) + R.target(0, 0))])
    before = sequence_logprob(policy, target, 4).item()
    out = rlvr.grpo_step(policy, reference, opt, [(0, 0)], "answer", config, torch.Generator().manual_seed(1))
    assert 0 < out["reward"] < 1, "the test needs both rewarded and unrewarded samples"
    assert sequence_logprob(policy, target, 4).item() > before


def test_token_logps_use_the_sampling_temperature():
    model, ids = small_model(6), torch.tensor([R.encode("12+34=46.")])
    by_hand = (model(ids[:, :-1]).double() / 2.0).log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    assert torch.allclose(rlvr.token_logps(model, ids, 2.0).double(), by_hand, atol=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        rlvr.token_logps(model, ids, 0.0)
