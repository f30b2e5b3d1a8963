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

The sweeps of ``make lora`` on this task (``python -m lmbook.experiments.lora_sweeps``) write :data:`SWEEPS_PATH`.
Left out: generation-based evaluation and hyperparameter searches (one learning rate per method).
"""

from __future__ import annotations

import builtins
import math
import random
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .. import validate
from ..utils import progress

__all__ = ["LABELS", "TEMPLATES", "raised", "prompt_text", "make_examples", "task_splits", "SmolEncoder",
           "WordEncoder", "answer_scores", "evaluate_task", "train_task", "SWEEPS_PATH", "ATTENTION", "MLP"]

LABELS = ("ZeroDivisionError", "IndexError", "KeyError", "ValueError", "TypeError", "AttributeError", "NameError")
SWEEPS_PATH = Path(__file__).resolve().parents[1] / "data" / "lora_sweeps.json"
ATTENTION, MLP = ["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_proj", "up_proj", "down_proj"]  # LoRA targets

_WORDS = ("spam", "eggs", "ham", "cat", "dog", "key", "name", "value", "data", "text", "line", "word", "item",
          "list", "code", "file", "path", "user", "color", "house")
_NAMES = ("total", "counter", "result", "items", "my_list", "config", "buffer", "answer", "count", "table",
          "scores", "index_map", "payload", "cache", "widget")
_NOT_STR_METHODS = ("push", "append", "add", "sort", "keys", "items", "pop", "remove")
_NOT_LIST_METHODS = ("upper", "split", "keys", "add", "items", "strip", "lower")


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
        lambda r: (lambda w, v: f"{{'{w}': {r.randint(0, 9)}}}['{v}']")(*r.sample(_WORDS, 2)),
        lambda r: f"{{}}['{r.choice(_WORDS)}']",
        lambda r: (lambda a, b: f"{{{a}: '{r.choice(_WORDS)}'}}[{b}]")(*r.sample(range(10), 2)),
        lambda r: "set().pop()",
        lambda r: (lambda w, v: f"{{'{w}': {r.randint(0, 9)}}}.pop('{v}')")(*r.sample(_WORDS, 2)),
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
    validate.string("expr", expr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "'int' object is not callable; perhaps you missed a comma?"
        try:
            eval(compile(expr, "<task>", "eval"), {"__builtins__": builtins})
        except Exception as err:  # noqa: BLE001 - any exception is an answer
            return type(err).__name__
    return ""


def prompt_text(expr: str) -> str:
    """``[1, 2][5]`` -> ``[1, 2][5]  # raises``: the model's next words should name the exception."""
    validate.string("expr", expr)
    return f"{expr}  # raises"


def make_examples(n_per_class: int, seed: int, held_out: bool = False, exclude=()) -> list[tuple[str, str]]:
    """n_per_class distinct (expression, label) pairs per class, from the trained templates (the first four
    of each class) or only the held-out fifth one; labels checked by running each expression."""
    _check_examples_args(n_per_class, seed, held_out, exclude)
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
    _check_sizes(seed, n_train=n_train, n_test=n_test)
    train = make_examples(n_train, seed)
    test = make_examples(n_test, seed + 100, exclude=[e for e, _ in train])
    unseen = make_examples(n_test, seed + 200, held_out=True)
    return {"train": train, "test": test, "test_unseen": unseen}


class SmolEncoder:
    """Token ids for SmolLM2: the prompt with its BPE tokenizer, the answer as " " + label."""

    def __init__(self, tokenizer):
        _check_tokenizer(tokenizer)
        self.tokenizer = tokenizer

    def __call__(self, expr: str, label: str) -> tuple[list[int], list[int]]:
        _check_example(expr, label)
        return self.tokenizer.encode(prompt_text(expr)), self.tokenizer.encode(" " + label)


class WordEncoder:
    """Token ids for the tiny word-level model of chapter 9: words of the prompt (unknown ones -> <unk>),
    and the label as one lowercased word, which must be in the vocabulary."""

    def __init__(self, vocab: list[str], unk: str = "<unk>"):
        _check_vocab(vocab, unk)
        self.index = {w: i for i, w in enumerate(vocab)}
        self.unk = self.index[unk]

    def __call__(self, expr: str, label: str) -> tuple[list[int], list[int]]:
        from ..data import words

        _check_example(expr, label)
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
    from ..model import Transformer

    _check_scoring(model, encoded, device)
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
    """accuracy (closed set of the labels' first tokens), top1 (the label's first token beats the whole vocabulary),
    in_format (the top token is some label's first token), answer_ppl = exp(mean NLL per answer token), the
    confusion counts, and ``correct``: 0/1 per example in the order of ``encoded`` (for paired comparisons)."""
    _check_evaluate(model, encoded, label_first_ids, batch_size, device)
    was_training = model.training
    model.eval()
    label_first_ids = torch.tensor(label_first_ids, device=device)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]) + len(encoded[i][1]))  # less padding
    top1 = in_format = 0
    nll, n_tokens, correct = 0.0, 0, [0] * len(encoded)
    confusion = torch.zeros(len(label_first_ids), len(label_first_ids), dtype=torch.long)
    for start in range(0, len(order), batch_size):
        chunk = [encoded[i] for i in order[start:start + batch_size]]
        logits, targets, first = answer_scores(model, chunk, device)
        nll += F.cross_entropy(logits, targets, reduction="sum").item()
        n_tokens += len(targets)
        head = logits[first]  # (b, V): the answer's first position
        truth = (targets[first][:, None] == label_first_ids).float().argmax(1)  # (b,) class index
        guess = head[:, label_first_ids].argmax(1)
        for i, ok in zip(order[start:start + batch_size], (guess == truth).tolist(), strict=True):
            correct[i] = int(ok)
        top1 += (head.argmax(1) == targets[first]).sum().item()
        in_format += torch.isin(head.argmax(1), label_first_ids).sum().item()
        for t, g in zip(truth.tolist(), guess.tolist(), strict=True):
            confusion[t, g] += 1
    model.train(was_training)
    n = len(encoded)
    return {"accuracy": sum(correct) / n, "top1": top1 / n, "in_format": in_format / n,
            "answer_ppl": math.exp(nll / n_tokens), "n": n, "confusion": confusion.tolist(), "correct": correct}


def train_task(model, encoded, steps: int, batch_size: int = 8, lr: float = 1e-3, seed: int = 0,
               weight_decay: float = 0.0, device="cpu", log_every: int = 0, on_step=None) -> list[float]:
    """AdamW on the parameters with requires_grad, cross-entropy of the answer tokens only; batches from
    a seeded shuffle, epoch after epoch. ``on_step(step, loss)``, if given, runs after each update (e.g. to
    save a snapshot). Returns the training loss of every step."""
    _check_train(model, encoded, steps, batch_size, lr, seed, weight_decay, device, log_every, on_step)
    params = [p for p in model.parameters() if p.requires_grad]
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


# Checks: each raises a TypeError or ValueError that names the argument ---------------------------------------

def _check_sizes(seed, **sizes):
    validate.integer("seed", seed, low=0)
    for name, value in sizes.items():
        validate.integer(name, value)


def _check_examples_args(n_per_class, seed, held_out, exclude):
    _check_sizes(seed, n_per_class=n_per_class)
    validate.boolean("held_out", held_out)
    validate.strings("exclude", exclude, empty=True)


def _check_tokenizer(tokenizer):
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenizer must have an encode(text) method, got {validate.describe(tokenizer)}")


def _check_example(expr, label):
    validate.string("expr", expr)
    validate.choice("label", label, LABELS)


def _check_vocab(vocab, unk):
    validate.strings("vocab", vocab)
    validate.string("unk", unk)
    if missing := [w for w in (unk, *(label.lower() for label in LABELS)) if w not in vocab]:
        raise ValueError(f"{missing} are not in the word vocabulary (vocab needs unk and the labels, lowercased)")


def _check_encoded(encoded):
    validate.sequence("encoded", encoded, what="(prompt ids, answer ids) pairs")
    for i, pair in enumerate(encoded):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(ids, list) and ids and all(
                isinstance(t, int) and t >= 0 for t in ids) for ids in pair)):
            raise TypeError(f"encoded[{i}] must be (prompt ids, answer ids), two lists of token ids, got {pair!r}")


def _check_scoring(model, encoded, device):
    if not callable(model) or isinstance(model, type):
        raise TypeError(f"model must be a model or a function of ids returning logits, got {validate.describe(model)}")
    _check_encoded(encoded)
    try:
        torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}") from None


def _check_evaluate(model, encoded, label_first_ids, batch_size, device):
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {validate.describe(model)}")
    _check_scoring(model, encoded, device)
    if not (isinstance(label_first_ids, (list, tuple)) and all(isinstance(t, int) and t >= 0 for t in label_first_ids)):
        raise TypeError(f"label_first_ids must be a list of token ids (ints >= 0), got {label_first_ids!r}")
    validate.integer("batch_size", batch_size)


def _check_train(model, encoded, steps, batch_size, lr, seed, weight_decay, device, log_every, on_step):
    _check_evaluate(model, encoded, [0], batch_size, device)
    _check_sizes(seed, steps=steps)
    validate.number("lr", lr, low=0, low_open=True)
    validate.number("weight_decay", weight_decay, low=0)
    validate.integer("log_every", log_every, low=0)
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be a function on_step(step, loss) or None, got {validate.describe(on_step)}")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("the model has no trainable parameters")

