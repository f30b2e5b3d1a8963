"""Chapter 14's dense-versus-MoE runs: the tiny Transformer and its mixture-of-experts twin, on CPU.

The dense model is chapter 9's tiny model (3 blocks of width 128, a SwiGLU FFN of width 344). Its twin replaces
every FFN by 8 SwiGLU experts of width 172 with top-2 routing: a token runs through 2 x 172 = 344 hidden units,
as in the dense model, so the active FLOPs per token are equal (up to the router's 128 x 8 products per layer),
while the model holds four times the FFN parameters. Both train with the recipe of ``lmbook.training.train``
(the same batches, schedule and clipping for a given seed), in :func:`train_moe`, which adds the balancing loss
of every MoE layer and records the expert load. Arms: dense; MoE with the balancing loss (weight 0.01, Switch's
value); MoE without it; and, with a large router initialisation (std 1), MoE with and without it, where a
strong early preference can lock in; and top-1 with renormalised weights (g = 1). Three seeds for all but the
single-seed arms. ``python -m lmbook.experiments.moe_runs`` (about 15 minutes on one core) writes
``lmbook/data/moe_runs.json.gz``. ``--project`` runs the chapter's project instead (the same active width split
into 4 experts with top-1 and 16 with top-4) and prints its results without storing them: they are the
exercise's answer.

Left out: capacity limits (every run is dropless), the z-loss and longer runs; the chapter says what they change.
"""

from __future__ import annotations

import gzip
import json
import os
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from ..model import Transformer
from ..moe import MoEConfig, moe_layers, moe_transformer, parameter_counts
from ..pretrained import tiny_config, word_corpus
from ..training import TrainConfig, adamw, evaluate, random_windows, set_learning_rate

PATH = Path(__file__).resolve().parents[1] / "data" / "moe_runs.json.gz"
RECIPE = TrainConfig(steps=400, batch_size=8, seq_len=64, lr=2e-3, warmup_steps=30, eval_every=100)
EXPERTS = MoEConfig(d_model=128, d_expert=172, n_experts=8, top_k=2)
SEEDS = (0, 1, 2)
with warnings.catch_warnings():  # top-1 renormalised is the chapter's pitfall, built on purpose
    warnings.simplefilter("ignore")
    _PITFALL = MoEConfig(d_expert=344, n_experts=4, top_k=1)
# (name, MoE config or None for dense, balancing-loss weight, seeds)
ARMS = [("dense", None, 0.0, SEEDS), ("moe, balanced", EXPERTS, 0.01, SEEDS),
        ("moe, no balancing", EXPERTS, 0.0, SEEDS),
        ("moe, router std 1, no balancing", MoEConfig(router_std=1.0), 0.0, (0,)),
        ("moe, router std 1, balanced", MoEConfig(router_std=1.0), 0.01, (0,)),
        # top-1 renormalised: g = 1, so the router learns from the balancing loss alone (the chapter's pitfall)
        ("moe, 4 experts top-1, renormalised", _PITFALL, 0.01, (0,))]
# the project exercise: the main arm's active width split into 4 experts of 344 with top-1 (Switch's g = p, not
# renormalised) and 16 of 86 with top-4, to set beside the 8 of 172 with top-2
PROJECT_ARMS = [("moe, 4 experts top-1", MoEConfig(d_expert=344, n_experts=4, top_k=1, renormalize=False), 0.01, SEEDS),
                ("moe, 16 experts top-4", MoEConfig(d_expert=86, n_experts=16, top_k=4), 0.01, SEEDS)]


def build(vocab_size: int, moe_config: MoEConfig | None, seed: int) -> torch.nn.Module:
    """The tiny model of chapter 9 (moe_config None) or its MoE twin, from the same seed."""
    torch.manual_seed(seed)
    config = tiny_config(vocab_size)
    return Transformer(config) if moe_config is None else moe_transformer(config, moe_config)


def train_moe(model, train_ids, val_ids, config: TrainConfig, aux_weight: float = 0.01, z_weight: float = 0.0,
              record_every: int = 10) -> dict:
    """``lmbook.training.train``'s loop with loss = cross-entropy + aux_weight * (mean balancing loss of the MoE
    layers) + z_weight * (mean z-loss). Records the LM loss every step, each layer's expert load (the fraction
    of assignments per expert) every record_every steps, the validation loss every eval_every steps, and the
    seconds per training step (evaluation excluded)."""
    optimizer, generator = adamw(model, config), torch.Generator().manual_seed(config.seed)
    layers = moe_layers(model)
    history = {"train_loss": [], "aux_loss": [], "load_step": [], "load": [], "val_step": [], "val_loss": []}
    seconds = 0.0
    model.train()
    for step in range(config.steps):
        start = time.perf_counter()
        set_learning_rate(optimizer, step, config)
        batch = random_windows(train_ids, config, generator)  # (B, L + 1)
        lm_loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
        aux = torch.stack([m.aux_loss for m in layers]).mean() if layers else torch.zeros(())
        z = torch.stack([m.z_loss for m in layers]).mean() if layers else torch.zeros(())
        optimizer.zero_grad(set_to_none=True)
        (lm_loss + aux_weight * aux + z_weight * z).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        seconds += time.perf_counter() - start
        history["train_loss"].append(lm_loss.item())
        history["aux_loss"].append(aux.item())
        if layers and step % record_every == 0:
            history["load_step"].append(step)
            history["load"].append([m.load.tolist() for m in layers])  # (layers, E)
        if val_ids is not None and ((step + 1) % config.eval_every == 0 or step + 1 == config.steps):
            history["val_step"].append(step + 1)
            history["val_loss"].append(evaluate(model, val_ids, config.seq_len))
    model.eval()
    return history | {"seconds_per_step": seconds / config.steps}


def run_arm(name: str, moe_config: MoEConfig | None, aux_weight: float, seed: int) -> dict:
    vocab, train_ids, valid_ids = word_corpus(min_count=2)
    model = build(len(vocab), moe_config, seed)
    recipe = TrainConfig(**{**RECIPE.__dict__, "seed": seed})
    history = train_moe(model, train_ids, valid_ids, recipe, aux_weight)
    total, active = parameter_counts(model)
    return {"arm": name, "seed": seed, "aux_weight": aux_weight, "total": total, "active": active,
            "moe": None if moe_config is None else moe_config.__dict__, **history}


def step_times(arm_list: list | None = None, repeats: int = 30) -> dict:
    """Median seconds per training step (forward, backward, AdamW) of the dense model and of each MoE arm's
    model (default: ARMS), measured in turns within one process, so that a busy machine slows all alike."""
    vocab, train_ids, _ = word_corpus(min_count=2)
    arms = {name: moe_config for name, moe_config, _, _ in arm_list or ARMS if "std 1" not in name}
    models = {name: build(len(vocab), moe_config, 0) for name, moe_config in arms.items()}
    optimizers = {name: adamw(model, RECIPE) for name, model in models.items()}
    batch = random_windows(train_ids, RECIPE, torch.Generator().manual_seed(0))  # (B, L + 1)
    times = {name: [] for name in models}
    for repeat in range(repeats + 3):  # 3 warm-up rounds: the first steps allocate AdamW's state
        for name, model in models.items():
            start = time.perf_counter()
            loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
            optimizers[name].zero_grad(set_to_none=True)
            loss.backward()
            optimizers[name].step()
            if repeat >= 3:
                times[name].append(time.perf_counter() - start)
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def main(project: bool = False) -> None:
    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    if project:  # printed, not stored in the package: these are the answer to the chapter's project
        runs = [run_arm(name, cfg, aux, seed) for name, cfg, aux, seeds in PROJECT_ARMS for seed in seeds]
        times = step_times(ARMS[:3] + PROJECT_ARMS)
        for name, *_ in PROJECT_ARMS:
            mine = [r for r in runs if r["arm"] == name]
            print(json.dumps({name: {"val_loss": [round(r["val_loss"][-1], 4) for r in mine], "total": mine[0]["total"],
                                     "active": mine[0]["active"], "seconds_per_step": round(times[name], 4)}}))
        return
    runs = load()["runs"] if PATH.exists() else []  # keep the runs already stored; do the missing ones
    for name, moe_config, aux_weight, seeds in ARMS:
        for seed in seeds:
            if any(r["arm"] == name and r["seed"] == seed for r in runs):
                continue
            runs.append(run_arm(name, moe_config, aux_weight, seed))
            print(f"{name:<34} seed {seed}: val {runs[-1]['val_loss'][-1]:.3f}, "
                  f"{runs[-1]['seconds_per_step'] * 1e3:.0f} ms/step", flush=True)
            _save(runs)
    _save(runs, step_times())


def load() -> dict:
    """The stored runs: {"info": the recipe, "runs": one dict per (arm, seed)}."""
    with gzip.open(PATH, "rt", encoding="utf-8") as f:
        return json.load(f)


def _save(runs: list, seconds_per_step: dict | None = None) -> None:
    for run in runs:  # rounded: the stored file stays small, and 4 digits are all the chapter reads
        for key in ("train_loss", "aux_loss", "val_loss"):
            run[key] = [round(v, 4) for v in run[key]]
        run["load"] = [[[round(v, 4) for v in layer] for layer in row] for row in run["load"]]
    info = {"recipe": RECIPE.__dict__, "experts": EXPERTS.__dict__, "threads": torch.get_num_threads(),
            "seconds_per_step": seconds_per_step}
    with gzip.open(PATH, "wt", encoding="utf-8") as f:
        json.dump({"info": info, "runs": runs}, f)


if __name__ == "__main__":
    import sys

    main(project="--project" in sys.argv[1:])
