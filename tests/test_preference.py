"""lmbook.preference against trl (DPOTrainer, RewardTrainer), brute force and the closed forms."""

import copy
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from lmbook import dpo as D
from lmbook import preference as P
from lmbook.model import Transformer, TransformerConfig
from lmbook.positional import rope_cos_sin

WORDS = [f"w{i}" for i in range(20)]


# ---------------------------------------------------------------------------------------------------------
# trl oracles: tiny random-init Llama models and a word-level tokenizer built in memory
# ---------------------------------------------------------------------------------------------------------

def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")


def _llama_config(**kwargs):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=len(WORDS) + 2, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
                       eos_token_id=1, bos_token_id=None, **kwargs)


def _text(g, n):
    return " ".join(WORDS[i] for i in torch.randint(len(WORDS), (n,), generator=g).tolist())


def _preference_rows(n_pairs=6, seed=0):
    """Prompts and completions of different lengths (so rows need right padding); chosen != rejected."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for k in range(n_pairs):
        rows.append({"prompt": _text(g, 2 + k % 3) + " ", "chosen": _text(g, 1 + k % 4),
                     "rejected": _text(g, 2 + (k + 1) % 3)})
    return rows


def _dpo_batch_and_loss(loss_type, beta=0.1, label_smoothing=0.0, n_pairs=6):
    """trl 1.16's DPO loss on one batch, and copies of the policy and reference models it used."""
    from datasets import Dataset
    from transformers import LlamaForCausalLM
    from trl import DPOConfig, DPOTrainer

    torch.manual_seed(0)
    policy = LlamaForCausalLM(_llama_config()).float()
    torch.manual_seed(1)
    ref = LlamaForCausalLM(_llama_config()).float()  # a different model, so that the log-ratios are not 0
    ours_policy, ours_ref = copy.deepcopy(policy), copy.deepcopy(ref)  # the trainer patches forward in place
    args = DPOConfig(output_dir="/tmp/lmbook-trl-dpo", use_cpu=True, bf16=False, report_to=[], beta=beta,
                     loss_type=[loss_type], label_smoothing=label_smoothing, per_device_train_batch_size=n_pairs,
                     seed=0)
    trainer = DPOTrainer(model=policy, ref_model=ref, args=args, processing_class=_tokenizer(),
                         train_dataset=Dataset.from_list(_preference_rows(n_pairs)))
    batch = next(iter(trainer.get_train_dataloader()))
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, batch)
    return batch, loss.item(), ours_policy, ours_ref


def _logits_of(hf_model):
    return lambda ids: hf_model(input_ids=ids).logits


def _our_logps(batch, policy, ref):
    ids, mask = batch["input_ids"], batch["completion_mask"]
    with torch.no_grad():
        pol = D.sequence_logprobs(_logits_of(policy), ids, mask)
        rf = D.sequence_logprobs(_logits_of(ref), ids, mask)
    n = ids.shape[0] // 2  # trl's layout: chosen rows, then rejected rows
    return pol[:n], pol[n:], rf[:n], rf[n:], mask[:, 1:].sum(1)


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_sigmoid_matches_trl(beta):
    batch, trl_loss, policy, ref = _dpo_batch_and_loss("sigmoid", beta)
    pc, pr, rc, rr, _ = _our_logps(batch, policy, ref)
    loss, r_w, r_l = P.dpo_loss(pc, pr, rc, rr, beta=beta)
    assert abs(trl_loss - math.log(2)) > 1e-3  # the models differ, so this is not the trivial ln 2
    assert loss.item() == pytest.approx(trl_loss, abs=1e-5)
    assert torch.allclose(r_w, beta * (pc - rc)) and torch.allclose(r_l, beta * (pr - rr))


def test_dpo_ipo_matches_trl_with_mean_token_logprobs():
    """trl 1.16 divides each log-ratio by its completion length (EOS included) before IPO's square."""
    beta = 0.5
    batch, trl_loss, policy, ref = _dpo_batch_and_loss("ipo", beta)
    pc, pr, rc, rr, lengths = _our_logps(batch, policy, ref)
    n = len(pc)
    n_w, n_l = lengths[:n].double(), lengths[n:].double()
    loss, _, _ = P.dpo_loss(pc / n_w, pr / n_l, rc / n_w, rr / n_l, beta=beta, loss_type="ipo")
    assert loss.item() == pytest.approx(trl_loss, abs=1e-5)
    summed, _, _ = P.dpo_loss(pc, pr, rc, rr, beta=beta, loss_type="ipo")  # the paper's form, unnormalised
    assert abs(summed.item() - trl_loss) > 1e-3


def test_trl_batch_layout_equals_completion_batch():
    """The same pairs, tokenized by trl's collator and by completion_batch: identical ids and masks."""
    batch, _, _, _ = _dpo_batch_and_loss("sigmoid")
    ids, mask = batch["input_ids"], batch["completion_mask"]
    n = ids.shape[0] // 2
    pairs = []
    for k in range(n):
        rows = []
        for r in (k, k + n):
            real = batch["attention_mask"][r].bool()
            rows.append((ids[r][real & (mask[r] == 0)].tolist(), ids[r][real & (mask[r] == 1)].tolist()))
        assert rows[0][0] == rows[1][0]  # one prompt per pair
        pairs.append((rows[0][0], rows[0][1], rows[1][1]))
    ours = D.completion_batch(pairs, pad_id=0)
    width = ours["input_ids"].shape[1]
    assert torch.equal(ours["input_ids"], ids[:, :width]) and torch.equal(ours["completion_mask"], mask[:, :width])
    assert not mask[:, width:].any()
    assert all(row[1][-1] == 1 for row in pairs)  # trl appended <eos> to every completion


def test_cdpo_is_its_formula_and_reduces_to_sigmoid():
    g = torch.Generator().manual_seed(3)
    pc, pr, rc, rr = (torch.randn(7, generator=g, dtype=torch.float64) * 5 for _ in range(4))
    beta, eps = 0.3, 0.2
    h = (pc - rc) - (pr - rr)
    expected = (-(1 - eps) * F.logsigmoid(beta * h) - eps * F.logsigmoid(-beta * h)).mean()
    loss, _, _ = P.dpo_loss(pc, pr, rc, rr, beta=beta, loss_type="cdpo", label_smoothing=eps)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-12)
    plain, _, _ = P.dpo_loss(pc, pr, rc, rr, beta=beta)
    zero_eps, _, _ = P.dpo_loss(pc, pr, rc, rr, beta=beta, loss_type="cdpo")
    assert zero_eps.item() == pytest.approx(plain.item(), abs=1e-12)
    # cDPO is the cross-entropy against the soft label (1 - eps, eps): its minimum is at sigma(beta h) = 1 - eps
    h_star = torch.tensor([math.log((1 - eps) / eps) / beta], dtype=torch.float64, requires_grad=True)
    zero = torch.zeros(1, dtype=torch.float64)
    loss, _, _ = P.dpo_loss(h_star, zero, zero, zero, beta=beta, loss_type="cdpo", label_smoothing=eps)
    loss.backward()
    assert abs(h_star.grad.item()) < 1e-12


def test_bradley_terry_matches_trl_reward_trainer():
    from datasets import Dataset
    from transformers import LlamaForSequenceClassification
    from trl import RewardConfig, RewardTrainer

    torch.manual_seed(0)
    model = LlamaForSequenceClassification(_llama_config(num_labels=1)).float()
    ours = copy.deepcopy(model)
    rows = [{"chosen": r["prompt"] + r["chosen"], "rejected": r["prompt"] + r["rejected"],
             "margin": 0.25 * k} for k, r in enumerate(_preference_rows(5))]
    for with_margin in (False, True):
        data = [r if with_margin else {k: v for k, v in r.items() if k != "margin"} for r in rows]
        trainer = RewardTrainer(model=copy.deepcopy(model), args=RewardConfig(
            output_dir="/tmp/lmbook-trl-rm", use_cpu=True, bf16=False, report_to=[], per_device_train_batch_size=5),
            processing_class=_tokenizer(), train_dataset=Dataset.from_list(data))
        batch = next(iter(trainer.get_train_dataloader()))
        with torch.no_grad():
            trl_loss = trainer.compute_loss(trainer.model, dict(batch)).item()
            rewards = ours(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.squeeze(-1)
        r_c, r_r = rewards.chunk(2)
        loss = P.bradley_terry_loss(r_c, r_r, margin=batch["margin"] if with_margin else 0.0)
        assert loss.item() == pytest.approx(trl_loss, abs=1e-6)


def test_bradley_terry_by_hand_and_shift_invariance():
    r1, r2 = torch.tensor([1.3]), torch.tensor([0.4])
    p = math.exp(1.3) / (math.exp(1.3) + math.exp(0.4))  # p_i / (p_i + p_j) with p = e^r
    assert p == pytest.approx(0.71095, abs=5e-6)
    assert P.bradley_terry_loss(r1, r2).item() == pytest.approx(-math.log(p), abs=1e-6)
    assert P.bradley_terry_loss(r1 + 7, r2 + 7).item() == pytest.approx(-math.log(p), abs=1e-6)
    assert P.bradley_terry_loss(r2, r1).item() == pytest.approx(-math.log(1 - p), abs=1e-6)


# ---------------------------------------------------------------------------------------------------------
# Sequence log-probabilities: brute force, one prefix at a time
# ---------------------------------------------------------------------------------------------------------

def _tiny_lm(seed=0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=30, context_length=32, d_model=16, n_layers=2, n_heads=2)
    return Transformer(cfg).double().eval()


def _ragged_batch():
    pairs = [([3, 4, 5], [6, 7], [8]), ([9, 10], [11, 12, 13, 14], [15, 16]), ([17], [18], [19, 20, 21])]
    return pairs, D.completion_batch(pairs, pad_id=0)


def test_sequence_logprobs_equals_brute_force_prefix_by_prefix():
    model = _tiny_lm()
    pairs, batch = _ragged_batch()
    got = D.sequence_logprobs(model, batch["input_ids"], batch["completion_mask"])
    sequences = [(p, c) for p, c, _ in pairs] + [(p, r) for p, _, r in pairs]
    with torch.no_grad():
        for row, (prompt, completion) in enumerate(sequences):
            ids = prompt + completion
            total = 0.0
            for t in range(len(prompt), len(ids)):  # each completion token, given exactly what precedes it
                logits = model(torch.tensor([ids[:t]]))[0, -1]
                total += torch.log_softmax(logits, -1)[ids[t]].item()
            assert got[row].item() == pytest.approx(total, abs=1e-10)


def test_sequence_logprobs_ignores_padding_and_prompt_but_not_the_shift():
    model = _tiny_lm()
    _, batch = _ragged_batch()
    ids, mask = batch["input_ids"], batch["completion_mask"]
    base = D.sequence_logprobs(model, ids, mask)
    pairs, _ = _ragged_batch()
    lengths = torch.tensor([len(p) + len(c) for p, c, _ in pairs] + [len(p) + len(r) for p, _, r in pairs])
    is_pad = torch.arange(ids.shape[1]) >= lengths[:, None]  # (2N, T)
    repadded = ids.masked_fill(is_pad, 29)
    assert not torch.equal(repadded, ids)
    assert torch.allclose(D.sequence_logprobs(model, repadded, mask), base, atol=1e-12)  # pads change nothing
    # the classic bugs give different numbers: no shift, or the prompt counted too
    with torch.no_grad():
        logp = torch.log_softmax(model(ids), -1)
    unshifted = (logp.gather(-1, ids[..., None]).squeeze(-1) * mask).sum(1)
    assert (unshifted - base).abs().min() > 1e-3
    everything = D.sequence_logprobs(model, ids, (torch.arange(ids.shape[1]) >= 1).long().expand_as(ids).clone()
                                     * (ids != 0).long())
    long_prompt = torch.tensor([len(p) > 1 for p, _, _ in pairs] * 2)  # a 1-token prompt has nothing to score
    assert (everything - base)[long_prompt].abs().min() > 1e-3
    assert torch.allclose(everything[~long_prompt], base[~long_prompt], atol=1e-12)


def test_sequence_logprobs_bad_input():
    model = _tiny_lm()
    _, batch = _ragged_batch()
    ids, mask = batch["input_ids"], batch["completion_mask"]
    empty = mask.clone()
    empty[2] = 0
    with pytest.raises(ValueError, match="empty"):
        D.sequence_logprobs(model, ids, empty)
    first = mask.clone()
    first[0, 0] = 1
    with pytest.raises(ValueError, match=r"completion_mask\[:, 0\]"):
        D.sequence_logprobs(model, ids, first)
    with pytest.raises(ValueError, match="shape"):
        D.sequence_logprobs(model, ids, mask[:, :-1])
    with pytest.raises(TypeError, match="integer"):  # a wrong dtype is a TypeError
        D.sequence_logprobs(model, ids.float(), mask)
    with pytest.raises(ValueError, match="0 and 1"):
        D.sequence_logprobs(model, ids, mask * 2)


# ---------------------------------------------------------------------------------------------------------
# The DPO loss: gradient, bad input, identical pairs
# ---------------------------------------------------------------------------------------------------------

def test_dpo_gradient_is_weighted_by_sigma_of_the_reward_error():
    g = torch.Generator().manual_seed(1)
    pc, pr = (torch.randn(5, generator=g, dtype=torch.float64).requires_grad_() for _ in range(2))
    rc, rr = (torch.randn(5, generator=g, dtype=torch.float64) for _ in range(2))
    beta = 0.7
    loss, r_w, r_l = P.dpo_loss(pc, pr, rc, rr, beta=beta)
    loss.backward()
    weight = torch.sigmoid(r_l - r_w)  # large when the implicit reward orders the pair wrongly
    assert torch.allclose(pc.grad, -beta * weight / 5, atol=1e-12)
    assert torch.allclose(pr.grad, beta * weight / 5, atol=1e-12)


def test_dpo_loss_starts_at_ln2_when_policy_is_reference():
    logps = torch.randn(4, dtype=torch.float64)
    loss, r_w, r_l = P.dpo_loss(logps, logps - 1, logps, logps - 1, beta=0.1)
    assert loss.item() == pytest.approx(math.log(2), abs=1e-12) and not r_w.any() and not r_l.any()


@pytest.mark.parametrize("kwargs, match", [
    ({"beta": 0.0}, "beta"), ({"beta": -1.0}, "beta"), ({"beta": float("nan")}, "beta"),
    ({"loss_type": "hinge"}, "loss_type"), ({"loss_type": "cdpo", "label_smoothing": 0.5}, "label_smoothing"),
    ({"loss_type": "cdpo", "label_smoothing": -0.1}, "label_smoothing"),
    ({"label_smoothing": 0.1}, "only by loss_type='cdpo'"),
])
def test_dpo_loss_bad_settings(kwargs, match):
    x = torch.zeros(3)
    with pytest.raises(ValueError, match=match):
        P.dpo_loss(x, x, x, x, **kwargs)


def test_dpo_loss_mismatched_batch_sizes():
    with pytest.raises(ValueError, match="batch sizes must match"):
        P.dpo_loss(torch.zeros(3), torch.zeros(3), torch.zeros(2), torch.zeros(3))
    with pytest.raises(ValueError, match="batch sizes must match"):
        P.bradley_terry_loss(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="1-d"):
        P.dpo_loss(torch.zeros(3, 1), torch.zeros(3), torch.zeros(3), torch.zeros(3))


def test_identical_pairs_are_reported_and_left_out():
    pairs = [([1, 2], [3, 4], [5]), ([1, 2], [6], [6]), ([7], [8, 9], [8, 9, 10])]
    with pytest.warns(UserWarning, match="1 of 3 pairs have chosen == rejected"):
        batch = D.completion_batch(pairs)
    assert batch["kept"] == [0, 2] and batch["input_ids"].shape[0] == 4
    with pytest.raises(ValueError, match="no usable pair"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        D.completion_batch([([1], [2], [2])])
    with pytest.raises(ValueError, match="non-empty"):
        D.completion_batch([([1], [], [2])])


def test_identical_pair_has_zero_dpo_gradient():
    model = _tiny_lm()
    batch = {"input_ids": torch.tensor([[3, 4, 5], [3, 4, 5]]), "completion_mask": torch.tensor([[0, 1, 1]] * 2)}
    logps = D.sequence_logprobs(model, batch["input_ids"], batch["completion_mask"])
    loss, _, _ = P.dpo_loss(logps[:1], logps[1:], logps[:1].detach() + 0.3, logps[1:].detach() + 0.3)
    loss.backward()
    # exactly 0 in exact arithmetic; float64 rounding in the batched backward leaves ~1e-17
    assert max(p.grad.abs().max().item() for p in model.parameters() if p.grad is not None) < 1e-12


def test_rule_pairs():
    labels = [[False, True, True, False], [True, True], [False, False], [False, True]]
    assert D.rule_pairs(labels) == [(0, 1, 0), (3, 1, 0)]
    assert D.rule_pairs(labels, max_per_prompt=2) == [(0, 1, 0), (0, 2, 3), (3, 1, 0)]
    with pytest.raises(ValueError, match="max_per_prompt"):
        D.rule_pairs(labels, max_per_prompt=0)


# ---------------------------------------------------------------------------------------------------------
# The KL-regularised optimum
# ---------------------------------------------------------------------------------------------------------

def test_kl_optimal_policy_worked_example():
    ref, r = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    expected = {0.1: ([0.0, 0.0, 1.0], 1.609), 1.0: ([0.179, 0.292, 0.529], 0.323),
                10.0: ([0.465, 0.308, 0.227], 0.003)}
    for beta, (pi, kl) in expected.items():
        opt = P.kl_optimal_policy(ref, r, beta)
        assert torch.allclose(opt, torch.tensor(pi, dtype=torch.float64), atol=5e-4)
        assert P.kl_divergence(opt, ref).item() == pytest.approx(kl, abs=5e-4)


def test_kl_optimal_policy_maximises_the_objective():
    g = torch.Generator().manual_seed(0)
    ref = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64), -1)
    r = torch.randn(6, generator=g, dtype=torch.float64)
    for beta in (0.2, 1.0, 3.0):
        opt = P.kl_optimal_policy(ref, r, beta)
        best = P.regularised_objective(opt, ref, r, beta)
        log_z = torch.logsumexp(torch.log(ref) + r / beta, -1)
        assert best.item() == pytest.approx(beta * log_z.item(), abs=1e-12)  # J(pi*) = beta log Z
        others = torch.softmax(torch.log(opt) + 0.5 * torch.randn(200, 6, generator=g, dtype=torch.float64), -1)
        assert (P.regularised_objective(others, ref, r, beta) < best).all()
        # gradient ascent on the logits of a free policy lands on the closed form
        logits = torch.zeros(6, dtype=torch.float64, requires_grad=True)
        optimizer = torch.optim.LBFGS([logits], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14)

        def closure(optimizer=optimizer, logits=logits, beta=beta):
            optimizer.zero_grad()
            loss = -P.regularised_objective(torch.softmax(logits, -1), ref, r, beta)
            loss.backward()
            return loss

        optimizer.step(closure)
        assert torch.allclose(torch.softmax(logits, -1), opt, atol=1e-6)


def test_kl_optimal_policy_limits_and_zero_reference_mass():
    ref, r = torch.tensor([0.0, 0.6, 0.4], dtype=torch.float64), torch.tensor([5.0, 0.0, 1.0], dtype=torch.float64)
    assert P.kl_optimal_policy(ref, r, 1e4)[0] == 0 and torch.allclose(P.kl_optimal_policy(ref, r, 1e4), ref,
                                                                         atol=1e-4)
    assert P.kl_optimal_policy(ref, r, 1e-3)[2].item() == pytest.approx(1.0)  # the best response pi_ref allows


def test_kl_bad_input():
    with pytest.raises(ValueError, match="beta"):
        P.kl_optimal_policy([0.5, 0.5], [0.0, 1.0], 0)
    with pytest.raises(ValueError, match="sum to 1"):
        P.kl_optimal_policy([0.5, 0.6], [0.0, 1.0], 1.0)
    with pytest.raises(ValueError, match="shape"):
        P.kl_optimal_policy([0.5, 0.5], [0.0, 1.0, 2.0], 1.0)


# ---------------------------------------------------------------------------------------------------------
# The training loop, with a LoRA adapter whose reference is the adapter switched off
# ---------------------------------------------------------------------------------------------------------

def test_train_dpo_with_lora_learns_the_pairs():
    from lmbook import lora

    model = _tiny_lm().float()
    model.tok_emb.weight.data.mul_(25)  # (tied) output layer large enough for the logits to move far
    lora.add_lora(model, ["q_proj", "v_proj", "up_proj"], r=4, alpha=8, seed=0)
    pairs, batch = _ragged_batch()
    with lora.disabled(model):
        ref_c, ref_r = D.pair_logprobs(model, batch)
    pol_c, pol_r = D.pair_logprobs(model, batch)
    assert torch.equal(pol_c, ref_c)  # B = 0: the adapted model starts as the reference
    history = D.train_dpo(model, batch, ref_c, ref_r, beta=1.0, steps=20, batch_size=2, lr=3e-2)
    assert history["loss"][0] == pytest.approx(math.log(2), abs=1e-6)
    assert history["accuracy"][0] == 0.0 and history["margin"][0] == 0.0
    after_c, after_r = D.pair_logprobs(model, batch)
    loss, r_w, r_l = P.dpo_loss(after_c, after_r, ref_c, ref_r, beta=1.0)
    assert loss.item() < 0.05 and (r_w > r_l).all()
    with lora.disabled(model):  # the reference is untouched by training
        assert torch.equal(D.pair_logprobs(model, batch)[0], ref_c)
    with pytest.raises(ValueError, match="batch sizes must match"):
        D.train_dpo(model, batch, ref_c[:2], ref_r, steps=1)


# ---------------------------------------------------------------------------------------------------------
# The chapter's experiment: the rule, the chat format, features and KL along completions
# ---------------------------------------------------------------------------------------------------------

def test_rule_and_topic_words():
    from lmbook.experiments import preference_task as E

    assert E.topic_words("the `assert` statement") == ["assert"]
    assert E.topic_words("customizing attribute access") == ["customizing", "attribute", "access"]
    assert E.topic_words("objects, values and types") == ["values", "types"]
    words = ["lambdas"]
    assert E.satisfies_rule(" Lambdas are small anonymous functions (e.g. `lambda x: x`).", True, words)
    assert not E.satisfies_rule("Lambdas are small anonymous functions", False, words)  # cut off
    assert not E.satisfies_rule("Lambdas are small. They are anonymous.", True, words)  # two sentences
    assert not E.satisfies_rule("Lambdas are small\nanonymous functions.", True, words)  # a line break
    assert not E.satisfies_rule("They are small anonymous functions.", True, words)  # topic not named
    assert not E.satisfies_rule("", True, words)
    assert E.topics()["assert"] == "the `assert` statement"
    # the topic word must appear as a whole word, singular or plural, never inside another word
    assert E.satisfies_rule("A lambda is an anonymous function.", True, words)
    assert E.satisfies_rule("It defines classes.", True, ["class"]) and E.satisfies_rule("A class.", True, ["class"])
    assert not E.satisfies_rule("It is a subclass.", True, ["class"])
    assert not E.satisfies_rule("It is a passage.", True, ["pass"]) and E.satisfies_rule("Use pass.", True, ["pass"])
    assert not E.satisfies_rule("A specific format.", True, ["if"]) and not E.satisfies_rule("A model.", True, ["del"])


def test_load_runs_relabels_with_the_rule_as_written():
    from lmbook.experiments import preference_task as E

    runs = E.load_runs()
    for c in runs["candidates"]["train"][:10]:  # naive re-check, reply by reply
        for text, reply, label in zip(c["texts"], c["replies"], c["labels"], strict=True):
            assert label == E.satisfies_rule(text, reply[-1] == E.EOS_ID, c["words"])
    ev = runs["sweep"][str(runs["main_beta"])]["after"]
    flat = [x for row in ev["labels"] for x in row]
    assert ev["rule_rate"] == sum(flat) / len(flat)
    assert set(runs["relabelled"]) >= {"train", "heldout", "before"}
    assert all(v >= 0 for v in runs["relabelled"].values())


def test_chat_text_is_chatml():
    from lmbook.experiments import preference_task as E

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    assert E.chat_text(messages) == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n"
                                     "<|im_start|>assistant\n")
    assert E.chat_text(messages, add_generation_prompt=False).endswith("Hi?<|im_end|>\n")
    with pytest.raises(ValueError, match="role"):
        E.chat_text([{"system": "Be brief."}])  # the seed's malformed system turn


def test_completion_kl_and_features_against_brute_force():
    from lmbook import lora
    from lmbook.experiments import dpo_measures as M

    model = _tiny_lm()
    model.tok_emb.weight.data.mul_(25)
    lora.add_lora(model, ["q_proj", "v_proj"], r=2, alpha=4, seed=0)
    _, batch = _ragged_batch()
    ids, mask = batch["input_ids"], batch["completion_mask"]
    kl, logp, ref_logp = M.completion_kl(model, ids, mask)
    assert torch.equal(kl, torch.zeros_like(kl)) and torch.allclose(logp, ref_logp)  # B = 0
    for _, layer in lora.lora_layers(model):
        torch.nn.init.normal_(layer.lora_B, std=0.5)
    kl, logp, ref_logp = M.completion_kl(model, ids, mask)
    with torch.no_grad():
        pol = torch.log_softmax(model(ids), -1)
        with lora.disabled(model):
            ref = torch.log_softmax(model(ids), -1)
    for row in range(ids.shape[0]):
        positions = mask[row].nonzero().flatten().tolist()  # tokens t of the completion, scored at t - 1
        expected = sum(torch.sum(pol[row, t - 1].exp() * (pol[row, t - 1] - ref[row, t - 1])).item() for t in positions)
        assert kl[row].item() == pytest.approx(expected, rel=1e-9)
        assert kl[row].item() > 0
    assert torch.allclose(logp, D.sequence_logprobs(model, ids, mask), atol=1e-10)
    with lora.disabled(model):
        assert torch.allclose(ref_logp, D.sequence_logprobs(model, ids, mask), atol=1e-10)
        feats = M.completion_features(model, batch)
        hidden = model.tok_emb(ids)
        rope = rope_cos_sin(torch.arange(ids.shape[1]), model.inv_freq)
        for block in model.blocks:
            hidden = block(hidden, rope)
        hidden = model.final_norm(hidden)
    last = [max(mask[row].nonzero().flatten().tolist()) for row in range(ids.shape[0])]
    assert torch.allclose(feats, hidden[torch.arange(ids.shape[0]), last].detach(), atol=1e-10)


def test_sample_replies_cut_at_the_end_token():
    from lmbook.experiments import dpo_measures as M

    model = _tiny_lm()
    prompts = [[3, 4, 5], [6, 7, 8], [9, 10]]
    replies = M.sample_replies(model, prompts, n=3, eos_id=2, seed=0, batch_size=4, max_new_tokens=6)
    assert len(replies) == 3 and all(len(r) == 3 for r in replies)
    for reply in (r for rs in replies for r in rs):
        assert 1 <= len(reply) <= 6 and (2 not in reply[:-1])
    assert replies == M.sample_replies(model, prompts, n=3, eos_id=2, seed=0, batch_size=4, max_new_tokens=6)


# ---------------------------------------------------------------------------------------------------------
# the live toy experiment (lmbook.experiments.dpo_toy)
# ---------------------------------------------------------------------------------------------------------

def _brute_force_logp(table, tokens, finished):
    """log pi(y) token by token with plain Python indexing: a different path from reply_logprobs."""
    from lmbook.experiments import dpo_toy as T

    total, prev = 0.0, T.BOS
    for t, tok in enumerate(list(tokens) + ([T.EOT] if finished else [])):
        total += torch.log_softmax(table[t, prev], -1)[tok].item()
        prev = tok
    return total


def test_toy_reply_space_is_a_distribution_and_matches_brute_force():
    from lmbook.experiments import dpo_toy as T

    ids, mask, finished = T.all_replies()
    assert len(ids) == sum(4 ** k for k in range(T.MAX_LEN + 1)) and len(set(map(tuple, ids.tolist()))) == len(ids)
    table = T.reference_logits(seed=3)
    logp, _ = T.reply_logprobs(table, ids, mask)
    assert torch.isclose(logp.exp().sum(), torch.tensor(1.0, dtype=torch.float64), atol=1e-12)  # all replies
    lengths = (mask.sum(1) - finished.long()).tolist()
    for i in (0, 1, 5, 400, 1364, 1365, len(ids) - 1):
        tokens = ids[i, :lengths[i]].tolist()
        assert math.isclose(logp[i].item(), _brute_force_logp(table, tokens, bool(finished[i])), abs_tol=1e-10)


def test_toy_sequence_kl_is_the_sum_of_token_kls_along_own_samples():
    """Chain rule: KL(pi || pi_ref) over whole replies = E_{y~pi} sum_t KL(pi(.|y<t) || pi_ref(.|y<t))."""
    from lmbook.experiments import dpo_toy as T

    ids, mask, _ = T.all_replies()
    table, ref = T.reference_logits(seed=1), T.reference_logits(seed=2)
    logp, logdist = T.reply_logprobs(table, ids, mask)
    ref_logp, ref_logdist = T.reply_logprobs(ref, ids, mask)
    token_kl = ((logdist.exp() * (logdist - ref_logdist)).sum(-1) * mask).sum(1)
    seq_kl = (logp.exp() * (logp - ref_logp)).sum()
    assert torch.isclose(seq_kl, (logp.exp() * token_kl).sum(), rtol=1e-10)
    assert not torch.isclose(seq_kl, (ref_logp.exp() * token_kl).sum(), rtol=1e-2)  # along pi_ref's replies: not it


def test_live_dpo_starts_at_ln2_and_learns_the_rule():
    from lmbook.experiments import dpo_toy as T

    out = T.live_dpo(beta=0.3, steps=60, rule="topic", n_pairs=32)
    assert math.isclose(out["loss"][0], math.log(2), rel_tol=1e-12)  # policy == reference at the start
    assert out["before"]["seq_kl"] == 0.0 and out["after"]["seq_kl"] > 0
    assert out["after"]["rule_rate"] > out["before"]["rule_rate"] + 0.3
    assert out["loss"][-1] < 0.2
    custom = T.live_dpo(steps=5, rule=lambda text, finished: "a" in text, n_pairs=8)  # a rule of one's own
    assert custom["after"]["rule_rate"] > custom["before"]["rule_rate"]
    traced = T.live_dpo(beta=0.3, steps=60, rule="topic", n_pairs=32, record_every=20)
    assert [t["step"] for t in traced["trace"]] == [0, 20, 40, 60]
    assert traced["trace"][0]["rule_rate"] == out["before"]["rule_rate"]
    assert traced["trace"][-1]["rule_rate"] == out["after"]["rule_rate"]  # recording changes nothing
    assert traced["trace"][-1]["seq_kl"] == out["after"]["seq_kl"] and out["trace"] == []


def test_live_dpo_mass_on_pairs_and_seed_study():
    from lmbook.experiments import dpo_toy as T

    out = T.live_dpo(beta=0.3, steps=40, rule="finish", n_pairs=16, seed=3)
    ids, mask, finished = T.all_replies()
    lengths = (mask.sum(1) - finished.long()).tolist()
    # brute force: the exact distribution of the reference, summed over distinct chosen / rejected replies by hand
    ref_logp = T.reply_logprobs(T.reference_logits(3), ids, mask)[0]
    chosen = {i for i, n in enumerate(lengths) if finished[i] and n in out["chosen_lengths"]}
    assert out["before"]["rejected_mass"] > 0 and out["before"]["chosen_mass"] <= sum(ref_logp[i].exp().item()
                                                                                      for i in chosen) + 1e-12
    for ev in (out["before"], out["after"]):
        assert 0 < ev["chosen_mass"] and ev["chosen_mass"] + ev["rejected_mass"] <= 1 + 1e-12
    assert out["after"]["rejected_mass"] < out["before"]["rejected_mass"]  # DPO pushes the rejected replies down
    study = T.seed_study(seeds=[0, 1], betas=(0.3,), rules=("finish",), steps=20, record_every=10, n_pairs=16)
    assert study["steps"] == [0, 10, 20] and len(study["runs"]["finish"]["0.3"]) == 2
    again = T.live_dpo(beta=0.3, steps=20, rule="finish", n_pairs=16, seed=1)["after"]
    assert study["runs"]["finish"]["0.3"][1]["seq_kl"][-1] == again["seq_kl"]


def test_live_dpo_with_a_loss_of_ones_own():
    from lmbook.experiments import dpo_toy as T

    seen = {}

    def reference_free(chosen, rejected, chosen_lengths, rejected_lengths):
        seen.update(chosen=chosen_lengths, rejected=rejected_lengths)
        return -torch.nn.functional.logsigmoid(0.3 * (chosen - rejected)).mean()

    out = T.live_dpo(steps=30, rule="finish", n_pairs=16, loss_fn=reference_free)
    assert seen["chosen"].tolist() == [n + 1.0 for n in out["chosen_lengths"]]  # finished: tokens + end of turn
    assert seen["rejected"].tolist() == [float(T.MAX_LEN)] * 16  # cut off: MAX_LEN tokens, no end of turn
    assert out["after"]["rule_rate"] > out["before"]["rule_rate"]
    assert out["after"]["seq_kl"] != T.live_dpo(steps=30, rule="finish", n_pairs=16)["after"]["seq_kl"]


@pytest.mark.parametrize("kwargs, error", [({"beta": 0.0}, ValueError), ({"steps": 0}, ValueError),
                                           ({"rule": "brevity"}, ValueError), ({"rule": 3}, TypeError),
                                           ({"loss_type": "kto"}, ValueError), ({"record_every": -1}, ValueError),
                                           ({"loss_fn": "simpo"}, TypeError),
                                           ({"rule": lambda text, finished: False}, ValueError)])
def test_live_dpo_rejects_bad_arguments(kwargs, error):
    from lmbook.experiments import dpo_toy as T

    with pytest.raises(error, match="beta|steps|rule|loss_type|record_every|loss_fn"):
        T.live_dpo(**kwargs)
