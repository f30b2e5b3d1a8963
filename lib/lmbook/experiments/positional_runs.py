"""Length-extrapolation experiments for chapter 12; the chapter loads their stored results.

Experiment 1 (:func:`run_tiny`): one tiny Llama-style model (``TINY_POSITIONAL``), trained on the
chapter-1 word tokens of the Python manual at context 128, once per positional scheme (none, learned,
sinusoidal, RoPE, ALiBi); validation loss at evaluation lengths 128 to 1024 and per position. Then the
RoPE model stretched at evaluation time with PI, NTK, NTK-by-parts and YaRN (``rope_scaling.rescale_rope``), and after
a short fine-tune at length 512 (plain RoPE and each method, from the same weights on the same batches; repeated
with two more data orders). Also RoPE and ALiBi from two more seeds, and the sinusoidal model with its table scaled
down to the size of the initial token vectors (the matched-scale control).

Experiment 2 (``positional_smollm2.run_smollm2``): SmolLM2-135M-Instruct (Q4_1) has an 8,192-position window, too
long to exceed on a CPU in budget. So the probe keeps the real window and cuts the tokens: a 128-token passage of
the manual is read after the 128 tokens that precede it in the manual, but with a jump in the position ids: the
first context token sits at position 0 and the last scored token at position D, up to 8 x 8,192. Only relative
positions enter RoPE, so the model meets distances it never saw in training, at the cost of a forward pass over 256
tokens. Each method stretches RoPE by s = D / 8192. Losses are kept per passage; controls: the passage alone under
each stretch, and the distant context without its first token or reduced to it.

:func:`run_live_seeds` stores :func:`live_extrapolation` with its default settings for five seeds.

Run ``make positional`` (``python -m lmbook.experiments.positional_runs [tiny] [smollm2] [live]``); results go
to ``data/positional_tiny.json.gz``, ``data/positional_smollm2_passages.json.gz`` and
``data/positional_live.json.gz`` (read them with :func:`load_results`). The stored file got its extra runs
(the key ``reproduced_rope`` onwards) after the first run, from a retrained RoPE model that reproduced the stored one
exactly; :func:`run_tiny` computes everything in one go. Left out: longer fine-tunes, other seeds of the other
schemes, and SmolLM2 on genuinely long inputs.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import validate
from ..model import Transformer, TransformerConfig
from ..pretrained import word_corpus
from ..rope_scaling import rescale_rope
from ..training import TrainConfig, evaluate, train

DATA = Path(__file__).resolve().parents[1] / "data"
TINY_PATH, LIVE_PATH = DATA / "positional_tiny.json.gz", DATA / "positional_live.json.gz"
SMOLLM2_PATH = DATA / "positional_smollm2_passages.json.gz"

# the tiny model: 2 blocks of width 64, 4 heads of size 16 (8 RoPE planes); trained on 128-token windows
TINY_POSITIONAL = dict(context_length=128, d_model=64, n_layers=2, n_heads=4, dropout=0.0)
SCHEMES = ("none", "learned", "sinusoidal", "rope", "alibi")
TRAIN = TrainConfig(steps=400, batch_size=16, seq_len=128, lr=3e-3, warmup_steps=30, eval_every=10**9)
FINETUNE = TrainConfig(steps=60, batch_size=4, seq_len=512, lr=1e-3, warmup_steps=5, eval_every=10**9, seed=1)
EVAL_LENGTHS = (128, 256, 512, 1024)
METHODS = ("PI", "NTK", "NTK-by-parts", "YaRN")  # NTK-by-parts: YaRN without its temperature


def load_results(path: str | Path) -> dict:
    """The stored results of :func:`run_tiny` (``TINY_PATH``) or of ``positional_smollm2`` (``SMOLLM2_PATH``)."""
    _check_run(path)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _save(path, results):
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime=0: the same results give the same bytes
        f.write((json.dumps(results, indent=1) + "\n").encode("utf-8"))


@torch.no_grad()
def position_losses(model: Transformer, ids: torch.Tensor, length: int, batch_size: int = 8) -> torch.Tensor:
    """Mean next-token loss (nats) at each position 0 .. length - 1 of side-by-side windows of ``ids``: (length,)."""
    _check_position_losses(model, ids, length, batch_size)
    model.eval()
    n = (len(ids) - 1) // length
    windows = ids[: n * length + 1]
    total = torch.zeros(length)
    for start in range(0, n, batch_size):
        rows = range(start, min(start + batch_size, n))
        batch = torch.stack([windows[r * length: (r + 1) * length + 1] for r in rows])  # (b, length + 1)
        logits = model(batch[:, :-1]).float()  # (b, length, V)
        nll = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")  # (b, length)
        total += nll.sum(0)
    return total / n


def _length_table(model, val_ids, lengths, method=None, original_length=None):
    """Validation loss at each length; with a ``method``, RoPE is stretched by s = length / original_length."""
    table = {}
    for length in lengths:
        m = model if method is None else rescale_rope(model, method, length / original_length, original_length)
        table[str(length)] = round(evaluate(m, val_ids, length), 5)
    return table


def _bins(losses: torch.Tensor, width: int = 32) -> list[float]:
    return [round(x, 4) for x in losses.view(-1, width).mean(1).tolist()]  # mean loss per bin of positions


def run_tiny(path: str | Path = TINY_PATH, steps: int | None = None) -> dict:
    """Experiment 1 (see the module docstring); writes ``path`` and returns the results."""
    _check_run(path, steps)

    vocab, train_ids, val_ids = word_corpus()
    train_cfg = TRAIN if steps is None else TrainConfig(**{**TRAIN.__dict__, "steps": steps})
    L, longest = train_cfg.seq_len, max(EVAL_LENGTHS)
    out = {"model": TINY_POSITIONAL, "train": train_cfg.__dict__, "finetune": FINETUNE.__dict__,
           "eval_lengths": list(EVAL_LENGTHS), "val_tokens": len(val_ids) - 1, "vocab_size": len(vocab),
           "schemes": {}, "seconds": {}}
    models = {}
    for scheme in SCHEMES:
        model, history = _train_scheme(scheme, len(vocab), train_ids, train_cfg)
        lengths = [n for n in EVAL_LENGTHS if scheme != "learned" or n <= model.config.context_length]
        out["schemes"][scheme] = {"val_loss": _length_table(model, val_ids, lengths),
                                  "final_train_loss": round(sum(history["train_loss"][-20:]) / 20, 4)}
        if scheme != "learned":
            out["schemes"][scheme]["position_loss"] = _bins(position_losses(model, val_ids, longest))
        out["seconds"][scheme] = round(history["seconds"], 1)
        models[scheme] = model
        print(f"{scheme:>10}: {out['schemes'][scheme]['val_loss']}", flush=True)
    rope = models["rope"]
    out["stretched"] = {}  # RoPE stretched at evaluation time by s = length / L, no training
    for method in METHODS:
        stretched = rescale_rope(rope, method, longest / L, L)
        out["stretched"][method] = {"val_loss": _length_table(rope, val_ids, EVAL_LENGTHS, method, L),
                                    "position_loss": _bins(position_losses(stretched, val_ids, longest))}
        print(f"{method:>10}: {out['stretched'][method]['val_loss']}", flush=True)
    out["finetuned"] = {}  # a short fine-tune at length 512 with s = 4, then evaluated with s = 4 everywhere
    _add_finetunes(out, rope, train_ids, val_ids, FINETUNE.seed, out["finetuned"])
    _add_extras(out, rope, train_ids, val_ids, train_cfg)
    _save(path, out)
    return out


FINETUNED = ("RoPE",) + METHODS  # fine-tuned at length 512: plain RoPE and the four stretches with s = 4
SEEDS, FINETUNE_SEEDS = (1, 2), (2, 3)  # the extra runs: other seeds of RoPE and ALiBi; other fine-tune data orders


def _train_scheme(scheme, vocab_size, train_ids, cfg, seed=0, sinusoid_scale=1.0):
    """A tiny model of ``scheme`` trained with ``cfg``; ``seed`` seeds both the initialisation and the batches."""
    from ..utils import seed_everything

    seed_everything(seed)
    model = Transformer(TransformerConfig(vocab_size=vocab_size,
                                          positional=scheme, **TINY_POSITIONAL))
    with _sinusoids_scaled(sinusoid_scale):
        history = train(model, train_ids, None, TrainConfig(**{**cfg.__dict__, "seed": seed}))
    return model, history


class _sinusoids_scaled:
    """Within the block, the model adds ``scale`` times the sinusoid table (the matched-scale control)."""
    def __init__(self, scale):
        self.scale = scale

    def __enter__(self):
        from .. import model as module
        self.module, self.original = module, module.sinusoidal_encoding
        if self.scale != 1.0:
            module.sinusoidal_encoding = lambda n, d: self.scale * self.original(n, d)

    def __exit__(self, *exc):
        self.module.sinusoidal_encoding = self.original


def _add_finetunes(out, rope, train_ids, val_ids, seed, into, methods=FINETUNED):
    """Fine-tune copies of the trained RoPE model at length 512 (batches seeded by ``seed``); s = 4 everywhere."""
    from ..utils import seed_everything

    L, s_ft = rope.config.context_length, FINETUNE.seq_len / rope.config.context_length
    suffix = "" if seed == FINETUNE.seed else f", data order {seed}"
    for method in methods:
        seed_everything(0)
        model = rescale_rope(rope, method, s_ft, L)
        history = train(model, train_ids, None, TrainConfig(**{**FINETUNE.__dict__, "seed": seed}))
        into[method] = {"val_loss": _length_table(model, val_ids, EVAL_LENGTHS)}
        out["seconds"][f"finetune {method}{suffix}"] = round(history["seconds"], 1)
        print(f"{method:>12} fine-tuned (order {seed}): {into[method]['val_loss']}", flush=True)


def _add_finetune_orders(out, rope, train_ids, val_ids):
    out.setdefault("finetune_orders", {})  # the same fine-tunes with other batches: {seed: {method: ...}}
    for seed in FINETUNE_SEEDS:
        _add_finetunes(out, rope, train_ids, val_ids, seed, out["finetune_orders"].setdefault(str(seed), {}))


def _add_seeds(out, train_ids, val_ids, cfg, schemes=("rope", "alibi"), seeds=SEEDS):
    out.setdefault("seeds", {})  # RoPE and ALiBi retrained with other seeds (initialisation and batches)
    for scheme in schemes:
        for seed in seeds:
            model, history = _train_scheme(scheme, len(word_corpus()[0]), train_ids, cfg, seed)
            out["seeds"].setdefault(scheme, {})[str(seed)] = {"val_loss": _length_table(model, val_ids, EVAL_LENGTHS)}
            out["seconds"][f"{scheme}, seed {seed}"] = round(history["seconds"], 1)
            print(f"{scheme:>10} seed {seed}: {out['seeds'][scheme][str(seed)]['val_loss']}", flush=True)


def _sinusoid_ratio(model):
    """Length of a sinusoid row, sqrt(d / 2), over the mean length of a token vector sqrt(d) E[i]."""
    d = model.config.d_model
    return math.sqrt(d / 2) / (math.sqrt(d) * model.tok_emb.weight.norm(dim=1).mean().item())


def _add_matched_sinusoid(out, train_ids, val_ids, cfg):
    """The sinusoidal model again, its table scaled so a row is as long as an initial token vector."""
    d = TINY_POSITIONAL["d_model"]
    scale = round(0.02 * math.sqrt(2 * d), 4)  # sqrt(d) * 0.02 * sqrt(d) / sqrt(d / 2)
    model, history = _train_scheme("sinusoidal", len(word_corpus()[0]), train_ids, cfg, 0, scale)
    with _sinusoids_scaled(scale):
        table = _length_table(model, val_ids, EVAL_LENGTHS)
    out["sinusoidal_matched"] = {"scale": scale, "val_loss": table,
                                 "final_train_loss": round(sum(history["train_loss"][-20:]) / 20, 4),
                                 "trained_ratio": round(_sinusoid_ratio(model) * scale, 3)}
    out["seconds"]["sinusoidal, matched scale"] = round(history["seconds"], 1)
    print(f"sinusoidal, matched scale {scale}: {table}", flush=True)


def _add_extras(out, rope, train_ids, val_ids, cfg):
    _add_finetune_orders(out, rope, train_ids, val_ids)
    _add_seeds(out, train_ids, val_ids, cfg)
    _add_matched_sinusoid(out, train_ids, val_ids, cfg)


# ---------------------------------------------------------------------------------------------------------
# Experiment 1, live: a smaller version that runs in seconds, with its settings exposed
# ---------------------------------------------------------------------------------------------------------

def live_extrapolation(schemes=("rope", "alibi"), train_length: int = 32, eval_lengths=(32, 64, 128, 256),
                       steps: int = 150, stretch: str | None = None, d_model: int = 32, seed: int = 0,
                       val_tokens: int = 4096, lr: float = 5e-3) -> dict:
    """Experiment 1 in miniature: {scheme: {length: validation perplexity}}, trained here in seconds.

    One 2-block model of width ``d_model`` (2 heads) per scheme is trained for ``steps`` steps on windows of
    ``train_length`` words of the manual, in float64 with a learning rate ``lr`` decayed to 0 (with the default,
    the printed digits hold across CPU code paths; a larger ``lr`` amplifies rounding differences), then
    evaluated on the first ``val_tokens`` validation words cut into windows of each length.
    ``stretch`` (one of ``METHODS``) also evaluates the RoPE model stretched by s = length / train_length, as
    the row "rope+<method>". Chapter 12.
    """
    _check_live(schemes, train_length, eval_lengths, steps, stretch, val_tokens, lr)
    vocab, train_ids, val_ids = word_corpus()
    val_ids, out = val_ids[: val_tokens + 1], {}
    for scheme in schemes:
        torch.manual_seed(seed)
        model = Transformer(TransformerConfig(vocab_size=len(vocab), context_length=train_length, d_model=d_model,
                                              n_layers=2, n_heads=2, dropout=0.0, positional=scheme)).double()
        _train_live(model, train_ids, train_length, steps, seed, lr)
        out[scheme] = _perplexities(model, val_ids, eval_lengths, train_length)
        if stretch is not None and scheme == "rope":
            out[f"rope+{stretch}"] = _perplexities(model, val_ids, eval_lengths, train_length, stretch)
    return out


def run_live_seeds(path: str | Path = LIVE_PATH, seeds=(0, 1, 2, 3, 4)) -> dict:
    """:func:`live_extrapolation` with its defaults and ``stretch="YaRN"``, once per seed; writes ``path``."""
    _check_run(path)
    validate.sequence("seeds", seeds)
    runs = {str(seed): live_extrapolation(stretch="YaRN", seed=seed) for seed in seeds}
    out = {"settings": "live_extrapolation defaults, stretch='YaRN'", "seeds": list(seeds),
           "runs": {seed: {name: {str(n): round(v, 4) for n, v in t.items()} for name, t in r.items()}
                    for seed, r in runs.items()}}
    _save(path, out)
    return out


def _train_live(model, ids, length, steps, seed, lr, batch_size=16):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)  # decays to 0
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(len(ids) - length - 1, (batch_size,), generator=g)
        batch = torch.stack([ids[s:s + length + 1] for s in starts.tolist()])  # (B, length + 1)
        loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()


def _perplexities(model, val_ids, lengths, train_length, method=None):
    """{length: perplexity}; a learned table has no rows past train_length, so those lengths are left out."""
    table = {}
    for n in lengths:
        if model.config.positional == "learned" and n > train_length:
            continue
        m = model if method is None or n <= train_length else rescale_rope(model, method, n / train_length,
                                                                             train_length)
        table[n] = math.exp(evaluate(m, val_ids, n))
    return table


# ---- argument checks ----------------------------------------------------------------------------------------------

def _check_run(path, steps=None):
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f"path must be a file path (a str or a pathlib.Path), got {validate.describe(path)}")
    if steps is not None:
        validate.integer("steps", steps)


def _check_live(schemes, train_length, eval_lengths, steps, stretch, val_tokens, lr):
    validate.strings("schemes", schemes)
    for scheme in schemes:
        validate.choice("schemes", scheme, SCHEMES)
    validate.integer("train_length", train_length, low=2)
    validate.sequence("eval_lengths", eval_lengths)
    for n in eval_lengths:
        validate.integer("eval_lengths", n, low=2)
    validate.integer("steps", steps)
    if stretch is not None:
        validate.choice("stretch", stretch, METHODS)
    validate.integer("val_tokens", val_tokens, low=max(eval_lengths))
    validate.number("lr", lr, low=0, low_open=True)


def _check_position_losses(model, ids, length, batch_size):
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be an lmbook.model.Transformer, got {validate.describe(model)}")
    validate.tensor("ids", ids, ndim=1, kind="int")
    validate.integer("length", length)
    validate.integer("batch_size", batch_size)
    if len(ids) < length + 1:
        raise ValueError(f"ids must hold at least length + 1 = {length + 1} tokens (one window), got {len(ids)}")


if __name__ == "__main__":  # make positional
    import sys

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "2")))
    which = sys.argv[1:] or ["tiny", "smollm2", "live"]
    if "tiny" in which:
        run_tiny()
    if "smollm2" in which:
        from .positional_smollm2 import run_smollm2

        run_smollm2()
    if "live" in which:
        run_live_seeds()
