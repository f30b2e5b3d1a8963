"""Chapter 1's neural window model: learning curves over learning rates, seeds and training-set sizes.

The chapter trains one model live. One run from one seed cannot say whether the development curve has turned
up, nor whether the learning rate or the data limits the model, so this script trains the same model
(4-word window, width 32, hidden 128, AdamW with weight decay 0.1, batches of 2,048 windows) for 8 epochs at
three learning rates from three seeds, and at the best rate once more on half the training sentences. For each
run it stores the training and development perplexity after every epoch, and the per-sentence test negative
log-likelihood (nats) at the epoch that was best on the development set, for paired bootstrap intervals.
``LMBOOK_THREADS=1 python -m lmbook.experiments.ch01_neural`` (half an hour on a busy shared core) writes
``lmbook/data/ch01_neural.json.gz``.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import torch

from .. import data, metrics
from ..ngram import NeuralNGramLM, NGramLM

PATH = Path(__file__).resolve().parents[1] / "data" / "ch01_neural.json.gz"
SEEDS = (0, 1, 2)
LRS = (1e-3, 3e-3, 1e-2)
EPOCHS = 8
BATCH = 2048


def parts() -> tuple[list, list, list]:
    """Chapter 1's train / development / test sentences: dev is every 9th training document from the 6th."""
    documents = data.split("train")
    dev_names = set(list(documents)[5::9])
    train_text = "\n\n".join(body for name, body in documents.items() if name not in dev_names)
    dev_text = "\n\n".join(body for name, body in documents.items() if name in dev_names)
    test_text = "\n\n".join(data.split("validation").values())
    return data.sentences(train_text), data.sentences(dev_text), data.sentences(test_text)


def sentence_nll(model: NeuralNGramLM, X: torch.Tensor, Y: torch.Tensor, lengths: list[int]) -> list[float]:
    """Sum of -ln P over each sentence's tokens (</s> included); windows are in sentence order."""
    with torch.no_grad():
        nll = -torch.log_softmax(model(X), -1).gather(-1, Y[:, None])[:, 0].double()
    return [chunk.sum().item() for chunk in torch.split(nll, lengths)]


def run(lr: float, seed: int, fraction: float = 1.0, epochs: int = EPOCHS) -> dict:
    """Train one model; return its per-epoch perplexities and its test NLL per sentence at the best dev epoch."""
    train, dev, test = parts()
    vocab_model = NGramLM(1, smoothing="kneser-ney", min_count=2).fit(train)  # the chapter's vocabulary
    sub = train[: int(len(train) * fraction)]
    X_train, Y_train = NeuralNGramLM.windows(vocab_model, sub, 4)
    X_dev, Y_dev = NeuralNGramLM.windows(vocab_model, dev, 4)
    X_test, Y_test = NeuralNGramLM.windows(vocab_model, test, 4)
    torch.manual_seed(seed)
    model = NeuralNGramLM(len(vocab_model.vocab), n=4, dim=32, hidden=128)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    out = {"lr": lr, "seed": seed, "fraction": fraction, "train_ppl": [], "dev_ppl": []}
    best = math.inf
    for _ in range(epochs):
        order = torch.randperm(len(X_train))
        for start in range(0, len(X_train), BATCH):
            batch = order[start : start + BATCH]
            loss = metrics.cross_entropy(model(X_train[batch]), Y_train[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            out["train_ppl"].append(metrics.perplexity(model(X_train), Y_train).item())
            out["dev_ppl"].append(metrics.perplexity(model(X_dev), Y_dev).item())
        if out["dev_ppl"][-1] < best:
            best = out["dev_ppl"][-1]
            out["best_epoch"] = len(out["dev_ppl"])
            out["test_sentence_nll"] = sentence_nll(model, X_test, Y_test, [len(s) + 1 for s in test])
    return out


def load() -> dict:
    """The stored runs: {"epochs", "seeds", "lrs", "runs": [one dict per run, as returned by :func:`run`]}."""
    with gzip.open(PATH, "rt") as f:
        return json.load(f)


def main() -> None:
    torch.set_num_threads(1)
    runs = [run(lr, seed) for lr in LRS for seed in SEEDS]
    best_lr = min(LRS, key=lambda lr: sum(min(r["dev_ppl"]) for r in runs if r["lr"] == lr))
    runs += [run(best_lr, seed, fraction=0.5) for seed in SEEDS]
    with gzip.open(PATH, "wt") as f:
        json.dump({"epochs": EPOCHS, "seeds": list(SEEDS), "lrs": list(LRS), "runs": runs}, f)
    print(f"wrote {PATH} ({len(runs)} runs; best learning rate on dev {best_lr})")


if __name__ == "__main__":
    main()
