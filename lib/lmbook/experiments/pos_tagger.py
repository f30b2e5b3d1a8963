"""Chapter 4's neural tagger: a BiLSTM trained on the EWT training split, its weights stored in the package.

Training takes about 40 seconds an epoch on one core, too slow to redo while the chapter runs, and a long run
differs in its last digits between CPUs. So ``python -m lmbook.experiments.pos_tagger`` trains it once for
``EPOCHS`` epochs, keeps the weights of the epoch with the best dev accuracy (early stopping: test is never
looked at), and writes them with the vocabulary and the per-epoch curve to ``lmbook/data/pos_bilstm.pt``.
The chapter loads the model with :func:`load_pos_tagger` and evaluates it in float64.

Left out: hyperparameter search; the configuration is :class:`lmbook.neural_tagger.TaggerConfig`'s default.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path

import torch

from ..neural_tagger import BiLSTMTagger, TaggerConfig, TaggerVocab, predict_tags, train_tagger
from ..treebank import load_ewt

PATH = Path(__file__).resolve().parents[1] / "data" / "pos_bilstm.pt"
EPOCHS = 8
SEED = 0


def _accuracy(model, sentences) -> float:
    predicted = predict_tags(model, [s.words for s in sentences])
    pairs = [(g, p) for s, ps in zip(sentences, predicted, strict=True) for g, p in zip(s.tags, ps, strict=True)]
    return sum(g == p for g, p in pairs) / len(pairs)


def run(path: Path = PATH, epochs: int = EPOCHS) -> Path:
    torch.manual_seed(SEED)
    train, dev = load_ewt("train"), load_ewt("dev")
    vocab = TaggerVocab.build(train)
    model = BiLSTMTagger(vocab, TaggerConfig())
    curve, best, best_acc = [], None, -1.0
    for epoch in range(epochs):
        start = time.time()
        losses = train_tagger(model, train, epochs=1, seed=SEED + epoch, log_every=len(train) // 32)
        acc = _accuracy(model, dev)
        curve.append({"epoch": epoch + 1, "train_loss": losses[-1], "dev_accuracy": acc})
        print(f"epoch {epoch + 1}: loss {losses[-1]:.4f}, dev accuracy {acc:.4f} ({time.time() - start:.0f} s)")
        if acc > best_acc:
            best, best_acc = copy.deepcopy(model.state_dict()), acc
    blob = {"config": dataclasses.asdict(model.config), "words": vocab.words, "chars": vocab.chars,
            "tags": vocab.tags, "curve": curve, "seed": SEED,
            "state_dict": {k: v.to(torch.float16) for k, v in best.items()}}  # halves the file; fp16 is the model
    torch.save(blob, path)
    return path


def load_pos_tagger(path: Path = PATH, dtype: torch.dtype = torch.float64) -> tuple[BiLSTMTagger, list[dict]]:
    """The stored tagger (in ``dtype``) and its training curve."""
    blob = torch.load(path, weights_only=True)
    model = BiLSTMTagger(TaggerVocab(blob["words"], blob["chars"], blob["tags"]), TaggerConfig(**blob["config"]))
    model.load_state_dict({k: v.to(torch.float32) for k, v in blob["state_dict"].items()})
    return model.to(dtype).eval(), blob["curve"]


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(run())
