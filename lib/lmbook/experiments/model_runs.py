"""``make model``: train the tiny model, score SmolLM2 on the validation split, and run the decoding
comparison; each writes its results to ``lmbook/data/`` for chapters 9 and 10 (decoding) to load (the tiny
model is used again in chapters 11 and 15).

``python -m lmbook.experiments.model_runs [tiny] [smollm2] [decoding]`` (all three by default);
``... model_runs tiny-seeds`` retrains the tiny model from seeds 1 and 2 (about two minutes each),
``... model_runs tiny-context`` scores it with a limited context (about two minutes).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from ..model import Transformer
from ..pretrained import TINY_PATH, TINY_TRAIN, load_smollm2, smollm2_chat, tiny_config, word_corpus
from ..training import evaluate, train

__all__ = ["make_tiny", "make_tiny_seeds", "make_decoding_sweep", "make_smollm2_score", "smollm2_validation_ids",
           "DECODING_SWEEP_PATH", "DECODING_PROMPT", "TINY_SEEDS_PATH",
           "TINY_CONTEXT_PATH", "make_tiny_context", "SMOLLM2_SCORE_PATH", "SMOLLM2_WINDOW"]

DATA = Path(__file__).resolve().parent.parent / "data"

DECODING_SWEEP_PATH = DATA / "smollm2_decoding.json.gz"
TINY_SEEDS_PATH = DATA / "tiny_seeds.json"
TINY_CONTEXT_PATH = DATA / "tiny_context.json"
DECODING_PROMPT = "Write one sentence about the sea."


def make_tiny(path: str | Path = TINY_PATH) -> dict:
    """Train the tiny model with ``TINY_TRAIN``, compare it with chapter 1's best n-gram model (4-gram
    Kneser-Ney, discount D = 0.9 as tuned in chapter 1; perplexity 20.48) on the same validation tokens, and save
    weights, vocabulary, history and both scores to ``path``."""
    from .. import data
    from ..ngram import NGramLM
    from ..utils import seed_everything

    seed_everything(0)
    min_count = 2
    vocab, train_ids, val_ids = word_corpus(min_count)
    model = Transformer(tiny_config(len(vocab)))
    history = train(model, train_ids, val_ids, TINY_TRAIN)
    stride = TINY_TRAIN.seq_len // 2  # every validation token after the first window sees >= 64 earlier words
    val_loss = evaluate(model, val_ids, TINY_TRAIN.seq_len, stride=stride)
    splits = {part: data.sentences("\n\n".join(data.split(part).values())) for part in ("train", "validation")}
    ngram = NGramLM(4, smoothing="kneser-ney", min_count=min_count, discount=0.9).fit(splits["train"])
    ngram_nats, n_tokens = ngram.log_likelihood(splits["validation"])
    assert n_tokens == len(val_ids) - 1, "the n-gram model and the transformer must score the same tokens"
    blob = {"config": asdict(model.config), "state_dict": model.state_dict(), "vocab": vocab, "min_count": min_count,
            "train_config": asdict(TINY_TRAIN), "history": history, "threads": torch.get_num_threads(),
            "val_loss": val_loss, "eval_stride": stride,
            "val_tokens": n_tokens, "val_chars": len("\n\n".join(data.split("validation").values())),
            "baseline": {"name": "4-gram Kneser-Ney, D = 0.9", "perplexity": math.exp(-ngram_nats / n_tokens),
                         "val_loss": -ngram_nats / n_tokens}}
    torch.save(blob, path)
    return blob


def make_tiny_seeds(seeds: tuple[int, ...] = (1, 2), path: str | Path = TINY_SEEDS_PATH) -> dict:
    """Retrain the tiny model with ``TINY_TRAIN`` from other seeds (initial weights and batches) and score
    each as ``make_tiny`` scores seed 0, to show how much one training run's figure depends on its seed."""
    import json

    from ..utils import seed_everything

    vocab, train_ids, val_ids = word_corpus(2)
    losses = {}
    for seed in seeds:
        seed_everything(seed)
        model = Transformer(tiny_config(len(vocab)))
        train(model, train_ids, None, replace(TINY_TRAIN, seed=seed))
        losses[str(seed)] = evaluate(model, val_ids, TINY_TRAIN.seq_len, stride=TINY_TRAIN.seq_len // 2)
    blob = {"val_loss": losses, "train_config": asdict(TINY_TRAIN)}
    Path(path).write_text(json.dumps(blob, indent=1) + "\n", encoding="utf-8")
    return blob


def make_tiny_context(exact: tuple[int, ...] = (1, 2, 3, 4, 8), at_least: tuple[int, ...] = (16, 32, 64),
                      path: str | Path = TINY_CONTEXT_PATH) -> dict:
    """Score the stored tiny model on the test stream with a limited context: with exactly k earlier words for
    each k in ``exact`` (every word from the ninth on), and with at least m (windows of 2m words, stride m) for
    each m in ``at_least``. The 4-gram baseline reads up to three earlier words of the same sentence (fewer near a
    sentence's start), so the k = 3 row is a comparison with it, not an exact match."""
    import json

    from ..pretrained import load_tiny

    model, _ = load_tiny()
    _, _, ids = word_corpus(2)
    exact_losses = {}
    for k in exact:
        windows, total = ids.unfold(0, k + 1, 1)[max(exact) - k:], 0.0  # (n, k + 1): k words, then the target
        with torch.no_grad():
            for batch in windows.split(1024):
                logp = model(batch[:, :-1], last_only=True)[:, -1].double().log_softmax(-1)  # (b, V)
                total -= logp.gather(-1, batch[:, -1:]).sum().item()
        exact_losses[str(k)] = total / len(windows)
    least_losses = {str(m): evaluate(model, ids, 2 * m, stride=m) for m in at_least}
    blob = {"exact": exact_losses, "at_least": least_losses, "exact_tokens": len(ids) - max(exact)}
    Path(path).write_text(json.dumps(blob, indent=1) + "\n", encoding="utf-8")
    return blob


def make_decoding_sweep(path: str | Path = DECODING_SWEEP_PATH, max_new_tokens: int = 40, n_samples: int = 4) -> list:
    """Decode ``DECODING_PROMPT`` with SmolLM2 and every strategy of ``decoding.STRATEGIES``; save the rows."""
    import gzip
    import json

    from ..decoding import STRATEGIES, compare_strategies
    from ..tokenization import BPETokenizer

    model, tokenizer = load_smollm2(), BPETokenizer.from_gguf()
    prompt = tokenizer.encode(smollm2_chat(DECODING_PROMPT))
    rows = compare_strategies(model, prompt, STRATEGIES, max_new_tokens, n_samples=n_samples,
                              eos_id=tokenizer.special_tokens["<|im_end|>"], seed=0)
    for row in rows:
        row["texts"] = [tokenizer.decode(c) for c in row["continuations"]]
    blob = {"prompt": DECODING_PROMPT, "max_new_tokens": max_new_tokens, "n_samples": n_samples, "rows": rows}
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(blob, indent=1).encode("utf-8"))
    return rows


SMOLLM2_SCORE_PATH = DATA / "smollm2_validation.json.gz"
SMOLLM2_WINDOW = 512  # tokens per scoring window; windows start every SMOLLM2_WINDOW // 2 tokens


def smollm2_validation_ids(tokenizer) -> torch.Tensor:
    """The validation split as chapter 9 scores it with SmolLM2: <|endoftext|>, then the split's text."""
    from .. import data

    text = "\n\n".join(data.split("validation").values())
    return torch.tensor([tokenizer.special_tokens["<|endoftext|>"]] + tokenizer.encode(text))


def make_smollm2_score(path: str | Path = SMOLLM2_SCORE_PATH) -> dict:
    """Time SmolLM2's loading (from the GGUF file, then from the cache) and score the whole validation split
    (``evaluate`` in windows of SMOLLM2_WINDOW tokens, half-overlapping); save both to ``path``."""
    import gzip
    import json

    from ..tokenization import BPETokenizer

    start = time.perf_counter()
    load_smollm2(use_cache=False)  # parse and dequantize the GGUF file
    first = time.perf_counter() - start
    load_smollm2()  # make sure the cache exists
    start = time.perf_counter()
    model = load_smollm2()
    cached = time.perf_counter() - start
    start = time.perf_counter()
    tokenizer = BPETokenizer.from_gguf()
    tokenizer_seconds = time.perf_counter() - start
    ids = smollm2_validation_ids(tokenizer)
    start = time.perf_counter()
    nats = evaluate(model, ids, SMOLLM2_WINDOW, stride=SMOLLM2_WINDOW // 2, batch_size=4)
    first_window = evaluate(model, ids[:SMOLLM2_WINDOW + 1], SMOLLM2_WINDOW)  # chapter 9 recomputes this one
    blob = {"window": SMOLLM2_WINDOW, "stride": SMOLLM2_WINDOW // 2, "tokens": len(ids) - 1,
            "nats_per_token": nats, "first_window_nats_per_token": first_window,
            "score_seconds": round(time.perf_counter() - start, 1), "threads": torch.get_num_threads(),
            "load_seconds": {"gguf": round(first, 2), "cache": round(cached, 2),
                             "tokenizer": round(tokenizer_seconds, 2)}}
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(blob, indent=1).encode("utf-8"))
    return blob


if __name__ == "__main__":  # make model
    import sys

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "2")))
    if "tiny" in sys.argv[1:] or len(sys.argv) == 1:
        result = make_tiny()
        print(f"tiny model: {result['history']['seconds']:.0f} s of training, validation perplexity "
              f"{math.exp(result['val_loss']):.2f} vs {result['baseline']['name']} "
              f"{result['baseline']['perplexity']:.2f} (per word, the same tokens) -> {TINY_PATH}")
    if "tiny-seeds" in sys.argv[1:]:
        print("tiny model, other seeds:", make_tiny_seeds()["val_loss"], "->", TINY_SEEDS_PATH)
    if "tiny-context" in sys.argv[1:]:
        print("tiny model, limited context:", make_tiny_context(), "->", TINY_CONTEXT_PATH)
    if "smollm2" in sys.argv[1:] or len(sys.argv) == 1:
        score = make_smollm2_score()
        print(f"SmolLM2: {score['nats_per_token']:.4f} nats per token on {score['tokens']:,} validation tokens; "
              f"load {score['load_seconds']} s -> {SMOLLM2_SCORE_PATH}")
    if "decoding" in sys.argv[1:] or len(sys.argv) == 1:
        for row in make_decoding_sweep():
            print(f"{row['name']:>22}: distinct-2 {row['distinct_2']:.2f}, log p/token {row['mean_logprob']:.2f}")
