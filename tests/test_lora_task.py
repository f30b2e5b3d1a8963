"""lmbook.experiments.lora_task: the task's labels are what Python raises, the splits are disjoint, the answer
positions are the right ones, and training and scoring agree with direct computations."""

import math

import pytest
import torch
import torch.nn.functional as F
from lmbook import lora
from lmbook import model as M
from lmbook.experiments import lora_task as X


def test_every_template_raises_its_label():
    import random

    rng = random.Random(0)
    for label, templates in X.TEMPLATES.items():
        assert len(templates) == 5
        for template in templates:
            for _ in range(20):
                expr = template(rng)
                assert X.raised(expr) == label, expr
    assert X.raised("1 + 1") == ""
    assert X.raised("3(4)") == "TypeError"  # a SyntaxWarning is not an answer


def test_splits_are_balanced_disjoint_and_reproducible():
    splits = X.task_splits(n_train=10, n_test=4)
    assert [len(v) for v in splits.values()] == [70, 28, 28]
    exprs = [set(e for e, _ in v) for v in splits.values()]
    assert not (exprs[0] & exprs[1]) and not (exprs[0] & exprs[2]) and len(exprs[0]) == 70
    for part in splits.values():
        counts = {label: sum(1 for _, y in part if y == label) for label in X.LABELS}
        assert len(set(counts.values())) == 1
    assert X.task_splits(n_train=10, n_test=4) == splits
    with pytest.raises(ValueError, match="distinct"):
        X.make_examples(1000, 0, held_out=True)  # the held-out template of some classes has few values


def tiny_task_model(vocab=30, seed=0):
    torch.manual_seed(seed)
    return M.Transformer(M.TransformerConfig(vocab_size=vocab, d_model=32, n_layers=1, n_heads=4, context_length=16))


def test_answer_scores_reads_the_positions_before_each_answer_token():
    model = tiny_task_model().eval()
    encoded = [([1, 2, 3], [7, 8]), ([4, 5], [9]), ([6, 1, 2, 3, 4], [10, 11, 12])]
    with torch.no_grad():
        logits, targets, first = X.answer_scores(model, encoded)
        assert targets.tolist() == [7, 8, 9, 10, 11, 12] and first.tolist() == [0, 2, 3]
        i = 0
        for prompt, answer in encoded:  # one example at a time, no padding
            full = model(torch.tensor([prompt + answer]))[0]
            for j in range(len(answer)):
                assert torch.allclose(logits[i], full[len(prompt) - 1 + j], atol=1e-5)
                i += 1


def test_evaluate_task_against_a_direct_computation():
    model = tiny_task_model().eval()
    label_ids = [20, 21, 22]
    g = torch.Generator().manual_seed(1)
    encoded = [(torch.randint(1, 19, (int(n),), generator=g).tolist(), [label_ids[k]] + ([5] if k == 2 else []))
               for n, k in zip(torch.randint(2, 6, (12,), generator=g), [0, 1, 2] * 4, strict=True)]
    m = X.evaluate_task(model, encoded, label_ids, batch_size=5)
    correct, top1, in_format = [], 0, 0
    nll = n_tok = 0.0
    with torch.no_grad():
        for prompt, answer in encoded:
            logits = model(torch.tensor([prompt + answer]))[0]
            head = logits[len(prompt) - 1]
            correct.append(int(label_ids[head[label_ids].argmax()] == answer[0]))
            top1 += head.argmax().item() == answer[0]
            in_format += head.argmax().item() in label_ids
            for j, t in enumerate(answer):
                nll -= F.log_softmax(logits[len(prompt) - 1 + j], -1)[t].item()
                n_tok += 1
    assert m["correct"] == correct and m["accuracy"] == pytest.approx(sum(correct) / 12)
    assert m["top1"] == pytest.approx(top1 / 12) and m["in_format"] == pytest.approx(in_format / 12)
    assert 0 < sum(correct) < 12 and m["top1"] <= m["in_format"]  # a case where the order matters
    assert m["answer_ppl"] == pytest.approx(math.exp(nll / n_tok), rel=1e-5)
    assert sum(map(sum, m["confusion"])) == 12


def test_training_an_adapter_learns_a_mapping_and_leaves_the_base_alone():
    model = tiny_task_model()
    base = {n: p.clone() for n, p in model.named_parameters()}
    label_ids = [20, 21]
    encoded = [([1 + k, 3, 4], [label_ids[k]]) for k in (0, 1)] * 4
    lora.add_lora(model, ["q_proj", "v_proj", "up_proj", "down_proj"], r=2, alpha=16, seed=0)
    assert X.evaluate_task(model, encoded, label_ids)["accuracy"] == 0.5  # the same answer for both
    losses = X.train_task(model, encoded, steps=60, batch_size=4, lr=3e-2)
    # the loss cannot fall far: a random model's tied embeddings (std 0.02) keep every logit near 0
    assert losses[-1] < losses[0] - 0.4
    assert X.evaluate_task(model, encoded, label_ids)["accuracy"] == 1.0
    with lora.disabled(model):
        assert all(torch.equal(p, base[n]) for n, p in model.named_parameters() if n in base)


def test_word_encoder_maps_unknown_words_and_requires_the_labels():
    vocab = ["<unk>", "len", "(", ")", "#", "raises", *(label.lower() for label in X.LABELS)]
    encode = X.WordEncoder(vocab)
    prompt, answer = encode("len(spam)", "TypeError")
    assert [vocab[i] for i in prompt] == ["len", "(", "<unk>", ")", "#", "raises"]
    assert [vocab[i] for i in answer] == ["typeerror"]
    with pytest.raises(ValueError, match="not in the word vocabulary"):
        X.WordEncoder(vocab[:8])
