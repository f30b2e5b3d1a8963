"""Chapter 9's pre-norm vs post-norm experiment: stored training curves over seeds and learning rates.

The same 6-block model (width 64) is trained on the manual's word stream with each placement of the norm, at
three constant learning rates without warm-up, and post-norm once more with a linear warm-up at the two
higher rates, from three seeds each: 24 runs of about 15 seconds, too slow to redo while the chapter runs.
Single runs of this size also differ in their last digits between CPUs, so the chapter loads the stored runs
instead of redoing them, and shows every seed. ``make norm-placement`` (about 6 minutes on one core) writes
``lmbook/data/norm_placement.json.gz``.

Left out: gradient clipping, which also damps the first steps, and learning-rate decay, which lowers the rate
later; either would blur the effect of the warm-up.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import torch

from ..model import Transformer, TransformerConfig
from ..pretrained import word_corpus
from ..training import TrainConfig, train

PATH = Path(__file__).resolve().parents[1] / "data" / "norm_placement.json.gz"
SEEDS = (0, 1, 2)
STEPS = 400
EVAL_EVERY = 25
VALID_TOKENS = 4000  # the first tokens of the validation stream, scored every EVAL_EVERY steps
# (placement, learning rate, warm-up steps): no warm-up is warmup_steps=1 (the full rate from the first step)
ARMS = [(placement, lr, 1) for lr in (1e-3, 3e-3, 1e-2) for placement in ("pre", "post")]
ARMS += [("post", lr, 100) for lr in (3e-3, 1e-2)]


def model_config(vocab_size: int, placement: str) -> TransformerConfig:
    """The model of the experiment: 6 blocks of width 64, 4 heads, FFN width 128."""
    return TransformerConfig(vocab_size=vocab_size, d_model=64, n_layers=6, n_heads=4, d_ff=128,
                             norm_position=placement)


def run(placement: str, lr: float, warmup_steps: int, seed: int, steps: int = STEPS) -> dict:
    """Train one model; return its training losses and its validation losses every EVAL_EVERY steps."""
    vocab, train_ids, valid_ids = word_corpus(min_count=2)
    torch.manual_seed(seed)
    model = Transformer(model_config(len(vocab), placement))
    schedule = TrainConfig(steps=steps, batch_size=8, seq_len=32, lr=lr, warmup_steps=warmup_steps,
                           min_lr_ratio=1.0, grad_clip=math.inf, eval_every=EVAL_EVERY, seed=seed)
    history = train(model, train_ids, valid_ids[:VALID_TOKENS], schedule)
    return {"train_loss": history["train_loss"], "val_step": history["val_step"], "val_loss": history["val_loss"]}


def unigram_loss() -> float:
    """Validation loss of the add-one unigram model: about what a model that ignores the context can reach."""
    vocab, train_ids, valid_ids = word_corpus(min_count=2)
    counts = torch.bincount(train_ids, minlength=len(vocab)).double() + 1
    return -(counts / counts.sum()).log()[valid_ids[1:VALID_TOKENS]].mean().item()


def make(path: Path = PATH) -> dict:
    """Run every arm for every seed and write the results to ``path``."""
    runs = []
    for placement, lr, warmup in ARMS:
        for seed in SEEDS:
            runs.append({"placement": placement, "lr": lr, "warmup_steps": warmup, "seed": seed,
                         **run(placement, lr, warmup, seed)})
            print(f"{placement:>4}-norm lr {lr:g} warm-up {warmup:3} seed {seed}: "
                  f"final validation loss {runs[-1]['val_loss'][-1]:.3f}", flush=True)
    blob = {"steps": STEPS, "eval_every": EVAL_EVERY, "valid_tokens": VALID_TOKENS, "unigram_loss": unigram_loss(),
            "threads": torch.get_num_threads(), "runs": runs}
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(blob).encode("utf-8"))
    return blob


def load(path: Path = PATH) -> dict:
    """The stored results of :func:`make`."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":  # make norm-placement
    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    make()
