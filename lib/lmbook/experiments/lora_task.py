"""Chapter 15's experiment: teach a language model which exception a Python expression raises.

The task. The prompt is one line of Python with a comment, ``[1, 2][5]  # raises``, and the answer is the
name of the exception, `` IndexError``. Seven classes: ZeroDivisionError, IndexError, KeyError,
ValueError, TypeError, AttributeError, NameError. Every expression is made from a template with random
values, and its label is not typed by hand: :func:`raised` runs the expression and records what Python
actually raises. Each class has five templates; the last one of each is never trained on, so the held-out
sets measure two things: new values of familiar forms (``test``) and forms never seen (``test_unseen``).

Scoring reads the logits at the answer's first position: accuracy is the share of examples whose label
scores highest among the seven labels' first tokens; ``top1`` also asks that it beat every other token of
the vocabulary (the model answers in the format); ``answer_ppl`` is exp(mean NLL of the answer tokens).

``python -m lmbook.experiments.lora_task`` (``make lora``) runs the sweeps of the chapter on the CPU and writes
``data/lora_sweeps.json``: the memory and time of one training step (full vs LoRA), SmolLM2 with LoRA at
ranks 1..16 and on several target sets and fully fine-tuned, the tiny model of chapter 9 fully fine-tuned
and LoRA-adapted on the same task, the singular values of its full fine-tuning update, what their rank-r
truncations keep, an intrinsic-dimension curve (training in a random d-dimensional subspace), and the
storage types of the GGUF file.
Left out: generation-based evaluation and hyperparameter searches (one learning rate per method).
"""

from __future__ import annotations

import builtins
import math
import random
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import lora
from ..utils import progress

__all__ = ["LABELS", "TEMPLATES", "raised", "prompt_text", "make_examples", "task_splits", "SmolEncoder",
           "WordEncoder", "answer_scores", "evaluate_task", "train_task", "SWEEPS_PATH"]

LABELS = ("ZeroDivisionError", "IndexError", "KeyError", "ValueError", "TypeError", "AttributeError", "NameError")
SWEEPS_PATH = Path(__file__).resolve().parents[1] / "data" / "lora_sweeps.json"

_WORDS = ("spam", "eggs", "ham", "cat", "dog", "key", "name", "value", "data", "text", "line", "word", "item",
          "list", "code", "file", "path", "user", "color", "house")
_NAMES = ("total", "counter", "result", "items", "my_list", "config", "buffer", "answer", "count", "table",
          "scores", "index_map", "payload", "cache", "widget")
_NOT_STR_METHODS = ("push", "append", "add", "sort", "keys", "items", "pop", "remove")
_NOT_LIST_METHODS = ("upper", "split", "keys", "add", "items", "strip", "lower")


def _two_distinct(r, pool):
    a, b = r.sample(pool, 2)
    return a, b


# Each template draws an expression from a random.Random; the LAST template of each class is held out.
TEMPLATES = {
    "ZeroDivisionError": [
        lambda r: f"{r.randint(1, 99)} / 0",
        lambda r: f"{r.randint(1, 99)} // 0",
        lambda r: f"{r.randint(1, 99)} % 0",
        lambda r: f"divmod({r.randint(1, 99)}, 0)",
        lambda r: (lambda b: f"{r.randint(1, 99)} / ({b} - {b})")(r.randint(1, 9)),
    ],
    "IndexError": [
        lambda r: f"[{r.randint(0, 9)}, {r.randint(0, 9)}][{r.randint(2, 9)}]",
        lambda r: (lambda w: f"'{w}'[{r.randint(len(w), 9)}]")(r.choice(_WORDS)),
        lambda r: f"[{', '.join(str(r.randint(0, 9)) for _ in range(r.randint(0, 2)))}][{r.randint(3, 9)}]",
        lambda r: f"({r.randint(0, 9)}, {r.randint(0, 9)}, {r.randint(0, 9)})[{r.randint(3, 9)}]",
        lambda r: (lambda n: f"list(range({n}))[{r.randint(n, n + 5)}]")(r.randint(1, 6)),
    ],
    "KeyError": [
        lambda r: (lambda w, v: f"{{'{w}': {r.randint(0, 9)}}}['{v}']")(*_two_distinct(r, _WORDS)),
        lambda r: f"{{}}['{r.choice(_WORDS)}']",
        lambda r: (lambda a, b: f"{{{a}: '{r.choice(_WORDS)}'}}[{b}]")(*_two_distinct(r, range(10))),
        lambda r: "set().pop()",
        lambda r: (lambda w, v: f"{{'{w}': {r.randint(0, 9)}}}.pop('{v}')")(*_two_distinct(r, _WORDS)),
    ],
    "ValueError": [
        lambda r: f"int('{r.choice(_WORDS)}')",
        lambda r: f"float('{r.choice(_WORDS)}')",
        lambda r: (lambda a, b, c: f"[{a}, {b}].index({c})")(*r.sample(range(10), 3)),
        lambda r: (lambda w: f"'{w}'.index('{r.choice([c for c in 'xyzq' if c not in w])}')")(r.choice(_WORDS)),
        lambda r: (lambda a, b, c: f"[{a}, {b}].remove({c})")(*r.sample(range(10), 3)),
    ],
    "TypeError": [
        lambda r: f"{r.randint(0, 99)} + '{r.choice(_WORDS)}'",
        lambda r: f"len({r.randint(0, 99)})",
        lambda r: f"'{r.choice(_WORDS)}' * {r.randint(1, 9)}.5",
        lambda r: f"None + {r.randint(0, 99)}",
        lambda r: f"{r.randint(2, 99)}({r.randint(0, 99)})",
    ],
    "AttributeError": [
        lambda r: f"({r.randint(0, 99)}).append({r.randint(0, 9)})",
        lambda r: f"'{r.choice(_WORDS)}'.{r.choice(_NOT_STR_METHODS)}()",
        lambda r: f"[{r.randint(0, 9)}].{r.choice(_NOT_LIST_METHODS)}()",
        lambda r: f"None.{r.choice(_NOT_STR_METHODS + _NOT_LIST_METHODS)}",
        lambda r: f"{{}}.{r.choice(('append', 'push', 'sort', 'upper'))}({r.randint(0, 9)})",
    ],
    "NameError": [
        lambda r: f"{r.choice(_NAMES)} + {r.randint(0, 99)}",
        lambda r: f"print({r.choice(_NAMES)})",
        lambda r: f"{r.choice(_NAMES)}({r.randint(0, 99)})",
        lambda r: f"len({r.choice(_NAMES)})",
        lambda r: f"[{r.choice(_NAMES)}, {r.randint(0, 99)}]",
    ],
}


def raised(expr: str) -> str:
    """The name of the exception that evaluating ``expr`` raises ("" if none): the task's ground truth."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "'int' object is not callable; perhaps you missed a comma?"
        try:
            eval(compile(expr, "<task>", "eval"), {"__builtins__": builtins})
        except Exception as err:  # noqa: BLE001 - any exception is an answer
            return type(err).__name__
    return ""


def prompt_text(expr: str) -> str:
    """``[1, 2][5]`` -> ``[1, 2][5]  # raises``: the model's next words should name the exception."""
    return f"{expr}  # raises"


def make_examples(n_per_class: int, seed: int, held_out: bool = False, exclude=()) -> list[tuple[str, str]]:
    """n_per_class distinct (expression, label) pairs per class, from the trained templates (the first four
    of each class) or only the held-out fifth one; labels checked by running each expression."""
    rng, out, seen = random.Random(seed), [], set(exclude)
    for label in LABELS:
        templates = TEMPLATES[label][-1:] if held_out else TEMPLATES[label][:-1]
        count, tries = 0, 0
        while count < n_per_class:
            tries += 1
            if tries > 10_000:
                raise ValueError(f"cannot draw {n_per_class} distinct {label} examples")
            expr = rng.choice(templates)(rng).strip()
            if expr in seen:
                continue
            if raised(expr) != label:
                raise AssertionError(f"template bug: {expr!r} raises {raised(expr)!r}, not {label}")
            seen.add(expr)
            out.append((expr, label))
            count += 1
    random.Random(seed + 1).shuffle(out)
    return out


def task_splits(n_train: int = 48, n_test: int = 10, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """train (n_train per class), test (n_test per class: new values, trained templates) and test_unseen
    (n_test per class: the held-out templates). No expression appears in two splits."""
    train = make_examples(n_train, seed)
    test = make_examples(n_test, seed + 100, exclude=[e for e, _ in train])
    unseen = make_examples(n_test, seed + 200, held_out=True)
    return {"train": train, "test": test, "test_unseen": unseen}


class SmolEncoder:
    """Token ids for SmolLM2: the prompt with its BPE tokenizer, the answer as " " + label."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, expr: str, label: str) -> tuple[list[int], list[int]]:
        return self.tokenizer.encode(prompt_text(expr)), self.tokenizer.encode(" " + label)


class WordEncoder:
    """Token ids for the tiny word-level model of chapter 9: words of the prompt (unknown ones -> <unk>),
    and the label as one lowercased word, which must be in the vocabulary."""

    def __init__(self, vocab: list[str], unk: str = "<unk>"):
        self.index = {w: i for i, w in enumerate(vocab)}
        self.unk = self.index[unk]
        missing = [label for label in LABELS if label.lower() not in self.index]
        if missing:
            raise ValueError(f"labels {missing} are not in the word vocabulary")

    def __call__(self, expr: str, label: str) -> tuple[list[int], list[int]]:
        from ..data import words

        return [self.index.get(w, self.unk) for w in words(prompt_text(expr))], [self.index[label.lower()]]


def _batch(encoded, pad_id=0):
    """Right-padded ids (B, T) and, per example, its answer's positions and ids (causal: padding is harmless)."""
    seqs = [p + a for p, a in encoded]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
    rows = torch.cat([torch.full((len(a),), i) for i, (_, a) in enumerate(encoded)])
    cols = torch.cat([torch.arange(len(p) - 1, len(p) + len(a) - 1) for p, a in encoded])  # predict a from here
    targets = torch.cat([torch.tensor(a) for _, a in encoded])
    first = torch.tensor([0] + [len(a) for _, a in encoded[:-1]]).cumsum(0)  # index of each answer's 1st token
    return ids, rows, cols, targets, first


def answer_scores(model, encoded, device="cpu"):
    """Logits at every answer position (N_answer_tokens, V), the targets, and where each answer starts.

    For a ``Transformer`` the output layer (d x V per position, a fifth of SmolLM2's work per token) is
    applied only where an answer token is predicted: the model runs with ``lm_head`` replaced by the
    identity, which returns the final norm's output, and the real ``lm_head`` reads the answer positions."""
    from torch import nn

    from ..model import Transformer

    ids, rows, cols, targets, first = _batch(encoded)
    ids, rows, cols = ids.to(device), rows.to(device), cols.to(device)
    if isinstance(model, Transformer):
        head, model.lm_head = model.lm_head, nn.Identity()
        try:
            hidden = model(ids)  # (B, T, d)
        finally:
            model.lm_head = head
        logits = head(hidden[rows, cols])  # (N_answer_tokens, V)
    else:  # any function of ids, e.g. a functional_call
        logits = model(ids)[rows, cols]  # (N_answer_tokens, V)
    return logits.float(), targets.to(device), first.to(device)


@torch.no_grad()
def evaluate_task(model, encoded, label_first_ids, batch_size: int = 16, device="cpu") -> dict:
    """accuracy (closed set of the labels' first tokens), top1 (the label's first token beats the whole
    vocabulary), answer_ppl = exp(mean NLL per answer token), and the confusion counts."""
    was_training = model.training
    model.eval()
    label_first_ids = torch.tensor(label_first_ids, device=device)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]) + len(encoded[i][1]))  # less padding
    correct = top1 = 0
    nll, n_tokens = 0.0, 0
    confusion = torch.zeros(len(label_first_ids), len(label_first_ids), dtype=torch.long)
    for start in range(0, len(order), batch_size):
        chunk = [encoded[i] for i in order[start:start + batch_size]]
        logits, targets, first = answer_scores(model, chunk, device)
        nll += F.cross_entropy(logits, targets, reduction="sum").item()
        n_tokens += len(targets)
        head = logits[first]  # (b, V): the answer's first position
        truth = (targets[first][:, None] == label_first_ids).float().argmax(1)  # (b,) class index
        guess = head[:, label_first_ids].argmax(1)
        correct += (guess == truth).sum().item()
        top1 += (head.argmax(1) == targets[first]).sum().item()
        for t, g in zip(truth.tolist(), guess.tolist(), strict=True):
            confusion[t, g] += 1
    model.train(was_training)
    n = len(encoded)
    return {"accuracy": correct / n, "top1": top1 / n, "answer_ppl": math.exp(nll / n_tokens), "n": n,
            "confusion": confusion.tolist()}


def train_task(model, encoded, steps: int, batch_size: int = 8, lr: float = 1e-3, seed: int = 0,
               weight_decay: float = 0.0, device="cpu", log_every: int = 0, on_step=None) -> list[float]:
    """AdamW on the parameters with requires_grad, cross-entropy of the answer tokens only; batches from
    a seeded shuffle, epoch after epoch. ``on_step(step, loss)``, if given, runs after each update (e.g. to
    save a snapshot). Returns the training loss of every step."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    order, losses = [], []
    model.train()
    for step in progress(range(steps), desc="training"):
        if len(order) < batch_size:
            order += torch.randperm(len(encoded), generator=generator).tolist()
        batch, order = [encoded[i] for i in order[:batch_size]], order[batch_size:]
        logits, targets, _ = answer_scores(model, batch, device)
        loss = F.cross_entropy(logits, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, losses[-1])
        if log_every and (step + 1) % log_every == 0:
            print(f"step {step + 1}: loss {sum(losses[-log_every:]) / log_every:.3f}", flush=True)
    model.eval()
    return losses


# ---------------------------------------------------------------------------------------------------------
# The sweeps of `make lora` (python -m lmbook.experiments.lora_task): results in data/lora_sweeps.json
# ---------------------------------------------------------------------------------------------------------

ATTENTION, MLP = ["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_proj", "up_proj", "down_proj"]
TARGET_SETS = {"q,v": ["q_proj", "v_proj"], "q,k,v,o": ATTENTION, "MLP": MLP, "all linear": ATTENTION + MLP}
RANKS = (1, 2, 4, 8, 16)
SMOL_RECIPE = {"steps": 40, "batch_size": 8, "lr": 2e-3, "lr_full": 3e-5}  # alpha = 2r for every rank
TINY_RECIPE = {"steps": 300, "batch_size": 16, "lr": 3e-3, "lr_full": 1e-3}


def _metrics(model, encoded, first_ids, device="cpu"):
    out = {}
    for split in ("test", "test_unseen"):
        m = evaluate_task(model, encoded[split], first_ids, device=device)
        out[split] = {k: round(m[k], 4) for k in ("accuracy", "top1", "answer_ppl")}
    return out


def _adapter_run(model, encoded, first_ids, targets, r, recipe, seed=0, device="cpu"):
    lora.add_lora(model, targets, r=r, alpha=2 * r, seed=seed)
    start = time.perf_counter()
    losses = train_task(model, encoded["train"], recipe["steps"], recipe["batch_size"], recipe["lr"], seed,
                        device=device)
    row = {"r": r, "targets": targets, "seed": seed, "trainable": lora.count_parameters(model, True),
           "train_seconds": round(time.perf_counter() - start, 1), "losses": [round(x, 4) for x in losses],
           **_metrics(model, encoded, first_ids, device)}
    lora.remove_lora(model)
    return row


def smollm2_sweeps(log=print) -> dict:
    """SmolLM2 before, with LoRA at each rank (q,v) and on each target set (r = 8), three seeds of
    r = 8 on q,v, and full fine-tuning."""
    from ..pretrained import load_smollm2
    from ..tokenization import BPETokenizer

    tokenizer = BPETokenizer.from_gguf()
    encode = SmolEncoder(tokenizer)
    encoded = {k: [encode(e, label) for e, label in v] for k, v in task_splits().items()}
    first_ids = [tokenizer.encode(" " + label)[0] for label in LABELS]
    model = load_smollm2()
    out = {"recipe": SMOL_RECIPE, "base": _metrics(model, encoded, first_ids), "ranks": [], "targets": []}
    log(f"SmolLM2 base: {out['base']}")
    for r in RANKS:
        out["ranks"].append(_adapter_run(model, encoded, first_ids, TARGET_SETS["q,v"], r, SMOL_RECIPE))
        log(f"r={r}: {out['ranks'][-1]['test']} {out['ranks'][-1]['test_unseen']}")
    out["seeds"] = [row for row in out["ranks"] if row["r"] == 8] + [
        _adapter_run(model, encoded, first_ids, TARGET_SETS["q,v"], 8, SMOL_RECIPE, seed=s) for s in (1, 2)]
    log(f"seeds: {[row['test']['accuracy'] for row in out['seeds']]}")
    for name, targets in TARGET_SETS.items():
        row = (next(row for row in out["ranks"] if row["r"] == 8) if name == "q,v" else
               _adapter_run(model, encoded, first_ids, targets, 8, SMOL_RECIPE))
        out["targets"].append({**row, "name": name})
        log(f"{name}: {row['test']} {row['test_unseen']}")
    model.requires_grad_(True)
    start = time.perf_counter()
    losses = train_task(model, encoded["train"], SMOL_RECIPE["steps"], SMOL_RECIPE["batch_size"],
                        SMOL_RECIPE["lr_full"])
    out["full"] = {"trainable": lora.count_parameters(model, True), "lr": SMOL_RECIPE["lr_full"],
                   "train_seconds": round(time.perf_counter() - start, 1), "losses": [round(x, 4) for x in losses],
                   **_metrics(model, encoded, first_ids)}
    log(f"full: {out['full']['test']} {out['full']['test_unseen']}")
    return out


def _block_matrices(model):
    """{name: weight} of every linear layer inside the blocks (the matrices LoRA can adapt)."""
    return {n: p for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2}


@torch.no_grad()
def truncated_update_metrics(base_state, tuned_state, model, encoded, first_ids, ranks) -> list[dict]:
    """Replace each block matrix's update W_ft - W_0 by its best rank-r approximation (truncated SVD), keep
    every other fine-tuned tensor, and score the model: how much of full fine-tuning rank r keeps."""
    rows = []
    for r in ranks:
        state = dict(tuned_state)
        for name in _block_matrices(model):
            u, s, vh = torch.linalg.svd(tuned_state[name] - base_state[name], full_matrices=False)
            state[name] = base_state[name] + (u[:, :r] * s[:r]) @ vh[:r]  # (out, in)
        model.load_state_dict(state)
        rows.append({"r": r, **_metrics(model, encoded, first_ids)})
    model.load_state_dict(tuned_state)
    return rows


def subspace_train(model, encoded, first_ids, d, recipe, seed=0) -> dict:
    """Intrinsic dimension (Li et al. 2018; Aghajanyan et al. 2021): train only z in R^d, with every block
    parameter theta = theta_0 + P z for a fixed random P (D x d).

    P is a sparse random projection (the hashing trick): parameter j follows coordinate h(j) of z with a
    random sign, P[j, h(j)] = +-sqrt(d / D), so P's columns are orthonormal and P z costs O(D), where a dense
    P would need D * d numbers. Adam's learning rate on z is lr_full * sqrt(D / d), so that each parameter
    moves by about as much per step as in full fine-tuning (d = D is full fine-tuning of the blocks).
    """
    names = [n for n, _ in model.named_parameters() if n.startswith("blocks.")]
    params = dict(model.named_parameters())
    theta0 = torch.cat([params[n].detach().flatten() for n in names])  # (D,)
    D = theta0.numel()
    g = torch.Generator().manual_seed(seed)
    bucket = torch.randint(d, (D,), generator=g)  # h(j)
    weight = (torch.randint(2, (D,), generator=g) * 2 - 1) * math.sqrt(d / D)  # P[j, h(j)]
    z = torch.zeros(d, requires_grad=True)
    optimizer = torch.optim.Adam([z], lr=recipe["lr_full"] * math.sqrt(D / d))
    shapes, sizes = [params[n].shape for n in names], [params[n].numel() for n in names]

    def unflatten(theta):
        return {n: t.view(shape) for n, t, shape in zip(names, theta.split(sizes), shapes, strict=True)}

    order = []
    model.train()
    for _ in range(recipe["steps"]):
        if len(order) < recipe["batch_size"]:
            order += torch.randperm(len(encoded["train"]), generator=g).tolist()
        batch, order = [encoded["train"][i] for i in order[:recipe["batch_size"]]], order[recipe["batch_size"]:]
        theta = unflatten(theta0 + weight * z[bucket])  # theta_0 + P z

        def forward(ids, theta=theta):
            return torch.func.functional_call(model, theta, (ids,))

        logits, targets, _ = answer_scores(forward, batch)
        loss = F.cross_entropy(logits, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        original = {n: params[n].detach().clone() for n in names}
        for n, t in unflatten(theta0 + weight * z[bucket]).items():
            params[n].copy_(t)
        row = {"d": d, **_metrics(model, encoded, first_ids)}
        for n in names:
            params[n].copy_(original[n])
    model.eval()
    return row


def tiny_sweeps(log=print) -> dict:
    """The tiny model of chapter 9 on the same task: before, fully fine-tuned, LoRA at ranks 1..32 on all its
    block matrices, the spectrum of the full fine-tuning update and what its rank-r truncation keeps, and
    training in random subspaces of growing dimension d."""
    from ..pretrained import load_tiny

    model, vocab = load_tiny()
    encode = WordEncoder(vocab)
    encoded = {k: [encode(e, label) for e, label in v] for k, v in task_splits().items()}
    first_ids = [encode.index[label.lower()] for label in LABELS]
    recipe = dict(TINY_RECIPE)
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    out = {"recipe": recipe, "parameters": lora.count_parameters(model),
           "base": _metrics(model, encoded, first_ids), "ranks": []}
    log(f"tiny base: {out['base']}")
    for r in (1, 2, 4, 8, 16, 32):
        out["ranks"].append(_adapter_run(model, encoded, first_ids, TARGET_SETS["all linear"], r, recipe))
        log(f"tiny r={r}: {out['ranks'][-1]['test']} {out['ranks'][-1]['test_unseen']}")
    model.requires_grad_(True)
    start = time.perf_counter()
    losses = train_task(model, encoded["train"], recipe["steps"], recipe["batch_size"], recipe["lr_full"])
    out["full"] = {"trainable": lora.count_parameters(model, True), "losses": [round(x, 4) for x in losses],
                   "train_seconds": round(time.perf_counter() - start, 1), **_metrics(model, encoded, first_ids)}
    log(f"tiny full: {out['full']['test']} {out['full']['test_unseen']}")
    tuned_state = {k: v.clone() for k, v in model.state_dict().items()}
    out["spectra"] = {name: torch.linalg.svdvals(tuned_state[name] - base_state[name]).tolist()
                      for name in _block_matrices(model)}
    out["spectra"] = {k: [round(x, 6) for x in v] for k, v in out["spectra"].items()}
    out["truncated"] = truncated_update_metrics(base_state, tuned_state, model, encoded, first_ids,
                                                (0, 1, 2, 4, 8, 16, 32, 128))
    log(f"truncated: {[(row['r'], row['test']['accuracy']) for row in out['truncated']]}")
    model.load_state_dict(base_state)
    out["subspace"] = []
    for d in (16, 64, 256, 1024, 4096, 16384, 65536):
        out["subspace"].append(subspace_train(model, encoded, first_ids, d, recipe))
        log(f"subspace d={d}: {out['subspace'][-1]['test']}")
    out["subspace_D"] = sum(p.numel() for n, p in model.named_parameters() if n.startswith("blocks."))
    return out


def step_measurements(rounds: int = 4, batch: int = 4, seq_len: int = 64, log=print) -> dict:
    """One SmolLM2 training step (AdamW, lr = 0) of full fine-tuning and of two LoRA configurations, measured
    by ``lora.measure_training_step``: the tensors it creates and its time. The configurations alternate
    within each round, so that load from other programs hits them alike; round 1 is a warm-up, and the
    seconds reported are the median of the other rounds."""
    from ..pretrained import load_smollm2

    model = load_smollm2()
    ids = torch.randint(model.config.vocab_size, (batch, seq_len + 1), generator=torch.Generator().manual_seed(0))
    configs = {"full": None, "LoRA r=8 q,v": TARGET_SETS["q,v"], "LoRA r=8 all linear": TARGET_SETS["all linear"]}
    seconds = {name: [] for name in configs}
    out = {"batch": [batch, seq_len], "rounds": rounds}
    for round_ in range(rounds):
        for name, targets in configs.items():
            if targets is None:
                model.requires_grad_(True)
            else:
                lora.add_lora(model, targets, r=8, alpha=16, seed=0)
            measured = lora.measure_training_step(model, ids)
            if targets is not None:
                lora.remove_lora(model)
            out[name] = {k: v for k, v in measured.items() if k != "seconds"}
            if round_:
                seconds[name].append(measured["seconds"])
        log(f"round {round_}: { {k: [round(x, 1) for x in v] for k, v in seconds.items()} }")
    for name in configs:
        out[name]["seconds"] = sorted(seconds[name])[len(seconds[name]) // 2]
    return out


def gguf_table() -> dict:
    """SmolLM2's GGUF file by storage type: {type: [number of weights, bytes]} (QLoRA's memory numbers)."""
    import gguf

    from ..tokenization import smollm2_gguf_path

    table = {}
    for t in gguf.GGUFReader(smollm2_gguf_path()).tensors:
        entry = table.setdefault(t.tensor_type.name, [0, 0])
        entry[0] += int(t.n_elements)
        entry[1] += int(t.n_bytes)
    return {"tensor_types": table}


def main(parts=("gguf", "steps", "smollm2", "tiny"), path=SWEEPS_PATH) -> dict:
    """Run the named parts and merge each into the JSON file at ``path`` (other parts' results are kept)."""
    import json

    from ..utils import seed_everything

    path = Path(path)
    for part in parts:
        seed_everything(0)
        result = {"gguf": gguf_table, "steps": step_measurements, "smollm2": smollm2_sweeps,
                  "tiny": tiny_sweeps}[part]()
        result["threads"] = torch.get_num_threads()
        blob = json.loads(path.read_text()) if path.exists() else {}  # read late: another part may have written
        blob[part] = result
        path.write_text(json.dumps(blob, indent=1) + "\n")
    return blob


if __name__ == "__main__":  # make lora
    import os
    import sys

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    main(sys.argv[1:] or ("gguf", "steps", "smollm2", "tiny"), os.environ.get("LMBOOK_SWEEPS_PATH", SWEEPS_PATH))
