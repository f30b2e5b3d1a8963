"""Chapter 16's experiment: teach SmolLM2 to answer in one sentence, with DPO and a LoRA adapter.

The prompts ask about the sections of the Python manual (``lmbook.data``): "In one sentence, what is the
`assert` statement in Python?", in three phrasings (:data:`TEMPLATES`). The preference rule is written
down and checked by a program, :func:`satisfies_rule`. A reply is good when it

1. is finished within :data:`MAX_NEW_TOKENS` tokens (the model closes its turn with <|im_end|>),
2. is one sentence: no line break, and no sentence end (. ! ?) followed by a new sentence,
3. names the topic: it contains one of the topic's words (:func:`topic_words`) as a whole word.

SmolLM2 itself writes the candidates (4 samples per prompt at temperature 1); the rule labels them; a
prompt with a good and a bad reply gives preference pairs (:func:`lmbook.dpo.rule_pairs`). The
manual's training sections make the training prompts; its 8 validation sections, in all three phrasings,
are held out. ``python -m lmbook.experiments.preference_task`` (``make dpo``) then

- extracts reward-model features: SmolLM2's final hidden state at the last token of each candidate;
- trains DPO with LoRA for each beta of :data:`BETAS` (the same pairs, steps and seed), tracking the
  held-out pairs' implicit-reward margin and accuracy and the KL to the reference every few steps;
- samples held-out replies before and after, and measures the rule rate and KL(pi || pi_ref).

It writes ``data/dpo_runs.json.gz`` (texts, labels, histories, evaluations) and ``data/dpo_features.npz``
(the features, float16), about an hour on a busy 2-core CPU; finished stages are reused when re-run.
Left out: reward-model-based RL (PPO), hyperparameter searches, more than one seed.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from pathlib import Path

import torch

from .. import data, lora, validate
from .. import dpo as D
from .. import preference as P
from .dpo_measures import completion_features, completion_kl, sample_replies

__all__ = ["TEMPLATES", "SYSTEM", "MAX_NEW_TOKENS", "EOS_ID", "BETAS", "RUNS_PATH", "FEATURES_PATH", "topics",
           "topic_words", "chat_text", "satisfies_rule", "load_runs"]

TEMPLATES = ("In one sentence, what is {topic} in Python?", "Answer in one sentence: what is {topic} in Python?",
             "Describe {topic} in Python in one sentence.")
SYSTEM = "You are a helpful assistant."
MAX_NEW_TOKENS = 32      # longer replies are cut, and count as unfinished
EOS_ID = 2               # <|im_end|>, the end-of-turn token of SmolLM2's chat format
N_SAMPLES = 4            # candidates per prompt, at temperature 1
BETAS = (0.1, 0.01, 1.0, 0.3, 0.03)  # the first is the chapter's main run
RECIPE = {"targets": ["q_proj", "k_proj", "v_proj", "o_proj"], "r": 8, "alpha": 16, "lr": 1e-3, "batch_size": 4,
          "epochs": 2, "eval_every": 4, "max_pairs_per_prompt": 2}
RUNS_PATH = Path(__file__).resolve().parents[1] / "data" / "dpo_runs.json.gz"
FEATURES_PATH = Path(__file__).resolve().parents[1] / "data" / "dpo_features.npz"
_GENERIC = {"python", "the", "and", "with", "statement", "object", "objects"}


def topics() -> dict[str, str]:
    """Section name -> topic phrase: the section's title, first letter lowercased, its quoted keyword in
    backticks, e.g. ``assert`` -> 'the `assert` statement', ``lambda`` -> 'lambdas'."""
    out = {}
    for name, text in data.documents().items():
        title = text.strip().splitlines()[0].replace('"', "`")
        out[name] = title if title[1:2].isupper() else title[0].lower() + title[1:]  # keep acronyms
    return out


def topic_words(topic: str) -> list[str]:
    """Words of a topic phrase that a reply must mention (one of them): the keyword in backticks if there
    is one, else the title's words of 4+ letters that are not generic ('python', 'statement', ...)."""
    validate.string("topic", topic)
    keyword = re.findall(r"`([^`]+)`", topic)
    if keyword:
        return [keyword[0].lower()]
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", topic)]
    return [w for w in words if len(w) >= 4 and w not in _GENERIC] or words


def chat_text(messages, add_generation_prompt: bool = True) -> str:
    """Render conversational messages [{"role": ..., "content": ...}, ...] in SmolLM2's chat format (ChatML):
    each turn is <|im_start|>role\\ncontent<|im_end|>\\n; the open assistant turn is added at the end."""
    _check_messages(messages, add_generation_prompt)
    text = ""
    for m in messages:
        text += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def satisfies_rule(reply: str, finished: bool, words) -> bool:
    """The preference rule: the reply is finished, is one sentence, and names the topic (one of ``words``).

    One sentence: no line break, and no '.', '!' or '?' (optionally closed by a quote or bracket) followed
    by a space and a capital letter, where a new sentence would start. Names the topic: one of ``words`` as a
    whole word, singular or plural ('class' or 'classes', never the 'class' inside 'subclass').
    """
    _check_rule_args(reply, finished, words)
    text = reply.strip()
    one_sentence = bool(text) and "\n" not in text and re.search(r"[.!?][\"')\]`]*\s+[A-Z]", text) is None
    named = any(re.search(_word_pattern(w), text.lower()) for w in words)
    return bool(finished and one_sentence and named)


def _word_pattern(word: str) -> str:  # 'lambdas' -> r'\blambdas?\b', 'class' -> r'\bclass(es)?\b'
    word = word.lower()
    if word.endswith("ss"):
        return rf"\b{re.escape(word)}(es)?\b"
    return rf"\b{re.escape(word[:-1] if word.endswith('s') else word)}s?\b"


def prompt_messages(topic: str, template: int) -> list[dict]:
    """The system turn and the user's question about ``topic`` in phrasing ``template`` (0, 1 or 2)."""
    _check_prompt_args(topic, template)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TEMPLATES[template].format(topic=topic)}]


# ---------------------------------------------------------------------------------------------------------
# make dpo
# ---------------------------------------------------------------------------------------------------------

def _save(runs, path=RUNS_PATH):
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(runs, indent=0).encode("utf-8"))


def load_runs(path=RUNS_PATH) -> dict:
    """The stored results of ``make dpo`` (see the module docstring), with every stored reply labelled again by
    :func:`satisfies_rule` as written now. ``runs["relabelled"]`` counts the labels that changed per part
    ("train", "heldout", "before", and each beta); the training pairs are kept as they were trained."""
    _check_path(path)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        runs = json.load(f)
    changed = {}
    for part, cands in runs["candidates"].items():
        old = [c["labels"] for c in cands]
        for c in cands:
            c["labels"] = [satisfies_rule(x, r[-1] == EOS_ID, c["words"]) for x, r in zip(c["texts"], c["replies"],
                                                                                           strict=True)]
        changed[part] = sum(a != b for o, c in zip(old, cands, strict=True) for a, b in zip(o, c["labels"],
                                                                                            strict=True))
    words = [c["words"] for c in runs["candidates"]["heldout"]]
    for name, ev in [("before", runs["before"])] + [(b, s["after"]) for b, s in runs["sweep"].items()]:
        # a stored True implies a finished reply; the rule as written only ever turns True into False
        new = [[ok and satisfies_rule(x, True, w) for x, ok in zip(xs, oks, strict=True)]
               for xs, oks, w in zip(ev["texts"], ev["labels"], words, strict=True)]
        changed[name] = sum(a != b for o, n in zip(ev["labels"], new, strict=True) for a, b in zip(o, n, strict=True))
        ev["labels"] = new
        ev["rule_rate"] = sum(map(sum, new)) / sum(map(len, new))
    runs["relabelled"] = changed
    return runs


def _prompt_sets(tokenizer):
    names = topics()
    sets = {"train": [(n, k % len(TEMPLATES)) for k, n in enumerate(data.split("train"))],
            "heldout": [(n, t) for n in data.split("validation") for t in range(len(TEMPLATES))]}
    return {part: [{"section": n, "template": t, "topic": names[n], "words": topic_words(names[n]),
                    "messages": prompt_messages(names[n], t),
                    "ids": tokenizer.encode(chat_text(prompt_messages(names[n], t)))} for n, t in rows]
            for part, rows in sets.items()}


def _label(tokenizer, eos_id, prompts, replies):
    labels, texts = [], []
    for p, rs in zip(prompts, replies, strict=True):
        texts.append([tokenizer.decode([t for t in r if t != eos_id]) for r in rs])
        labels.append([satisfies_rule(x, r[-1] == eos_id, p["words"]) for x, r in zip(texts[-1], rs, strict=True)])
    return labels, texts


def _pairs(prompts, replies, labels, per_prompt):
    triples = D.rule_pairs(labels, per_prompt)
    return triples, [(prompts[i]["ids"], replies[i][w], replies[i][lo]) for i, w, lo in triples]


def _evaluate(model, prompts, eos_id, tokenizer, seed=1):
    replies = sample_replies(model, [p["ids"] for p in prompts], N_SAMPLES, eos_id, seed=seed,
                             max_new_tokens=MAX_NEW_TOKENS)
    labels, texts = _label(tokenizer, eos_id, prompts, replies)
    rows = [(p["ids"], r) for p, rs in zip(prompts, replies, strict=True) for r in rs]
    ids = torch.zeros(len(rows), max(len(a) + len(b) for a, b in rows), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for k, (a, b) in enumerate(rows):
        ids[k, :len(a) + len(b)] = torch.tensor(a + b)
        mask[k, len(a):len(a) + len(b)] = 1
    kl, logp, ref_logp = completion_kl(model, ids, mask)
    flat = [x for row in labels for x in row]
    finished = [r[-1] == eos_id for rs in replies for r in rs]
    return {"rule_rate": sum(flat) / len(flat), "finished_rate": sum(finished) / len(finished),
            "mean_tokens": sum(len(r) for rs in replies for r in rs) / len(flat), "kl": kl.mean().item(),
            "kl_estimate_logratio": (logp - ref_logp).mean().item(), "texts": texts, "labels": labels}


def main(betas=BETAS, log=print) -> dict:
    """``make dpo``: sample and label the candidates, extract the features, and train DPO for each of ``betas``."""
    from ..pretrained import load_smollm2
    from ..tokenization import BPETokenizer

    _check_main(betas, log)
    runs = load_runs() if RUNS_PATH.exists() else {}
    torch.manual_seed(0)
    model, tokenizer = load_smollm2(), BPETokenizer.from_gguf()
    eos_id = tokenizer.special_tokens["<|im_end|>"]
    assert eos_id == EOS_ID, f"<|im_end|> is token {eos_id}, not {EOS_ID}"
    prompts = _prompt_sets(tokenizer)
    start = time.perf_counter()
    if "candidates" not in runs:
        cands = {}
        for part, seed in (("train", 0), ("heldout", 1)):
            replies = sample_replies(model, [p["ids"] for p in prompts[part]], N_SAMPLES, eos_id, seed=seed,
                                     max_new_tokens=MAX_NEW_TOKENS)
            labels, texts = _label(tokenizer, eos_id, prompts[part], replies)
            cands[part] = [{**{k: v for k, v in p.items() if k != "ids"}, "replies": r, "texts": x, "labels": lab}
                           for p, r, x, lab in zip(prompts[part], replies, texts, labels, strict=True)]
            log(f"{part}: {len(replies)} prompts, rule rate {sum(map(sum, labels)) / (N_SAMPLES * len(labels)):.3f}"
                f" ({time.perf_counter() - start:.0f} s)")
        runs = {"rule": satisfies_rule.__doc__, "templates": TEMPLATES, "system": SYSTEM,
                "max_new_tokens": MAX_NEW_TOKENS, "n_samples": N_SAMPLES, "recipe": RECIPE, "candidates": cands}
        _save(runs)
    cands = runs["candidates"]
    batches, triples = {}, {}
    for part in ("train", "heldout"):
        replies = [c["replies"] for c in cands[part]]
        labels = [c["labels"] for c in cands[part]]
        triples[part], pairs = _pairs(prompts[part], replies, labels, RECIPE["max_pairs_per_prompt"])
        batches[part] = D.completion_batch(pairs)
    runs["pairs"] = {part: triples[part] for part in triples}
    if not FEATURES_PATH.exists():
        import numpy as np

        feats = {part: completion_features(model, batches[part]).numpy().astype(np.float16) for part in batches}
        np.savez_compressed(FEATURES_PATH, **feats)
        log(f"features ({time.perf_counter() - start:.0f} s)")
    if "before" not in runs:
        lora.add_lora(model, RECIPE["targets"], r=RECIPE["r"], alpha=RECIPE["alpha"], seed=0)  # B = 0: the base
        runs["before"] = _evaluate(model, prompts["heldout"], eos_id, tokenizer)
        lora.remove_lora(model)
        log(f"before: rule rate {runs['before']['rule_rate']:.3f} ({time.perf_counter() - start:.0f} s)")
        _save(runs)
    if "heldout_ref_logps" not in runs:  # the held-out pairs under the reference: step 0 of the tracked curves
        chosen, rejected = D.pair_logprobs(model, batches["heldout"])
        runs["heldout_ref_logps"] = {"chosen": chosen.tolist(), "rejected": rejected.tolist()}
        _save(runs)
    n_train = batches["train"]["input_ids"].shape[0] // 2
    steps = RECIPE["epochs"] * n_train // RECIPE["batch_size"]
    runs.setdefault("sweep", {})
    for beta in betas:
        if str(beta) in runs["sweep"]:
            continue
        lora.add_lora(model, RECIPE["targets"], r=RECIPE["r"], alpha=RECIPE["alpha"], seed=0)
        with lora.disabled(model):
            ref = {part: D.pair_logprobs(model, batches[part]) for part in batches}
        main_run = beta == betas[0]

        def callback(step, m, beta=beta, main_run=main_run, ref=ref):
            if not main_run or (step % RECIPE["eval_every"] and step != steps):
                return {}
            b = batches["heldout"]
            kl, logp, _ = completion_kl(m, b["input_ids"], b["completion_mask"])
            n = len(logp) // 2
            loss, r_w, r_l = P.dpo_loss(logp[:n], logp[n:], *ref["heldout"], beta=beta)
            return {"eval_step": step, "eval_loss": loss.item(), "eval_margin": (r_w - r_l).mean().item(),
                    "eval_accuracy": (r_w > r_l).float().mean().item(), "eval_logp_chosen": logp[:n].mean().item(),
                    "eval_logp_rejected": logp[n:].mean().item(), "eval_kl_ref_samples": kl.mean().item()}

        history = D.train_dpo(model, batches["train"], *ref["train"], beta=beta, steps=steps,
                              batch_size=RECIPE["batch_size"], lr=RECIPE["lr"], seed=0, callback=callback)
        after = _evaluate(model, prompts["heldout"], eos_id, tokenizer)
        runs["sweep"][str(beta)] = {"beta": beta, "steps": steps, "history": history, "after": after}
        if main_run:
            runs["main_beta"] = beta
        log(f"beta {beta}: loss {history['loss'][-1]:.3f}, rule rate {after['rule_rate']:.3f}, KL {after['kl']:.2f} "
            f"({time.perf_counter() - start:.0f} s)")
        lora.remove_lora(model)
        _save(runs)
    return runs


# ---------------------------------------------------------------------------------------------------------
# Checks: each raises a TypeError or ValueError that names the argument
# ---------------------------------------------------------------------------------------------------------

def _check_messages(messages, add_generation_prompt):
    validate.sequence("messages", messages, what="{'role': ..., 'content': ...} dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"} or m["role"] not in ("system", "user",
                                                                                          "assistant"):
            raise ValueError(f"messages[{i}] must be {{'role': 'system'|'user'|'assistant', 'content': str}}, "
                             f"got {m!r}")
        validate.string(f"messages[{i}]['content']", m["content"], empty=True)
    validate.boolean("add_generation_prompt", add_generation_prompt)


def _check_rule_args(reply, finished, words):
    validate.string("reply", reply, empty=True)
    validate.boolean("finished", finished)
    validate.strings("words", words)


def _check_prompt_args(topic, template):
    validate.string("topic", topic)
    validate.integer("template", template, low=0, high=len(TEMPLATES) - 1)


def _check_path(path):
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or a Path, got {validate.describe(path)}")


def _check_main(betas, log):
    validate.sequence("betas", betas, what="numbers")
    for beta in betas:
        validate.number("betas[...]", beta, low=0, low_open=True)
    if not callable(log):
        raise TypeError(f"log must be a function like print, got {validate.describe(log)}")


if __name__ == "__main__":  # make dpo
    import os

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "2")))
    main()
