"""The sweeps of ``make lora`` (``python -m lmbook.experiments.lora_sweeps``): chapter 15's slow runs on the
task of :mod:`lmbook.experiments.lora_task`, written to ``data/lora_sweeps.json`` (:data:`SWEEPS_PATH`).

- ``steps``: the memory and time of one SmolLM2 training step, full fine-tuning vs two LoRA configurations;
- ``smollm2``: SmolLM2 with LoRA at ranks 1..16 on q,v, on several target sets, over three seeds, and fully
  fine-tuned;
- ``tiny``: the tiny model of chapter 9 fully fine-tuned and LoRA-adapted, the singular values of its full
  fine-tuning update, what their rank-r truncations keep, an intrinsic-dimension curve (training in a
  random d-dimensional subspace), and the control for the spectra: the same full fine-tuning on shuffled
  labels;
- ``gguf``: the storage types of SmolLM2's GGUF file (QLoRA's memory numbers).

All on the CPU, about an hour on a busy 2-core machine. Left out: hyperparameter searches (one learning rate
per method) and generation-based evaluation.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import finetuning_cost as cost
from .. import lora
from .lora_task import (
    ATTENTION,
    LABELS,
    MLP,
    SWEEPS_PATH,
    SmolEncoder,
    WordEncoder,
    answer_scores,
    evaluate_task,
    task_splits,
    train_task,
)

__all__ = ["TARGET_SETS", "RANKS", "SMOL_RECIPE", "TINY_RECIPE", "smollm2_sweeps", "tiny_sweeps",
           "truncated_update_metrics", "subspace_train", "shuffle_labels", "shuffled_label_run",
           "step_measurements", "gguf_table", "main"]

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
    row = {"r": r, "targets": targets, "seed": seed, "trainable": cost.count_parameters(model, True),
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
    out["full"] = {"trainable": cost.count_parameters(model, True), "lr": SMOL_RECIPE["lr_full"],
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


def shuffle_labels(lines, seed: int = 0) -> list[tuple[str, str]]:
    """The same lines with their labels permuted among them: the class counts stay, the task is gone."""
    if not isinstance(lines, list) or not all(isinstance(x, tuple) and len(x) == 2 for x in lines):
        raise TypeError(f"lines must be a list of (expr, label) tuples, got {type(lines).__name__}")
    perm = torch.randperm(len(lines), generator=torch.Generator().manual_seed(seed)).tolist()
    return [(expr, lines[j][1]) for (expr, _), j in zip(lines, perm, strict=True)]


def shuffled_label_run(model, lines, encode, encoded, first_ids, recipe, seed=0) -> dict:
    """Full fine-tuning with ``recipe`` on ``lines`` with shuffled labels (nothing to learn), and the singular
    values of the block updates it leaves: what the optimiser alone does to the spectra."""
    before = {n: p.detach().clone() for n, p in _block_matrices(model).items()}
    model.requires_grad_(True)
    shuffled = [encode(expr, label) for expr, label in shuffle_labels(lines, seed)]
    losses = train_task(model, shuffled, recipe["steps"], recipe["batch_size"], recipe["lr_full"], seed)
    spectra = {n: [round(x, 6) for x in torch.linalg.svdvals(p.detach() - before[n]).tolist()]
               for n, p in _block_matrices(model).items()}
    return {"seed": seed, "losses": [round(x, 4) for x in losses], "spectra": spectra,
            **_metrics(model, encoded, first_ids)}


def tiny_sweeps(log=print) -> dict:
    """The tiny model of chapter 9 on the same task: before, fully fine-tuned, LoRA at ranks 1..32 on all its
    block matrices, the spectrum of the full fine-tuning update and what its rank-r truncation keeps, and
    training in random subspaces of growing dimension d; last, the same full fine-tuning on shuffled labels."""
    from ..pretrained import load_tiny

    model, vocab = load_tiny()
    encode = WordEncoder(vocab)
    encoded = {k: [encode(e, label) for e, label in v] for k, v in task_splits().items()}
    first_ids = [encode.index[label.lower()] for label in LABELS]
    recipe = dict(TINY_RECIPE)
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    out = {"recipe": recipe, "parameters": cost.count_parameters(model),
           "base": _metrics(model, encoded, first_ids), "ranks": []}
    log(f"tiny base: {out['base']}")
    for r in (1, 2, 4, 8, 16, 32):
        out["ranks"].append(_adapter_run(model, encoded, first_ids, TARGET_SETS["all linear"], r, recipe))
        log(f"tiny r={r}: {out['ranks'][-1]['test']} {out['ranks'][-1]['test_unseen']}")
    model.requires_grad_(True)
    start = time.perf_counter()
    losses = train_task(model, encoded["train"], recipe["steps"], recipe["batch_size"], recipe["lr_full"])
    out["full"] = {"trainable": cost.count_parameters(model, True), "losses": [round(x, 4) for x in losses],
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
    model.load_state_dict(base_state)
    out["shuffled"] = shuffled_label_run(model, task_splits()["train"], encode, encoded, first_ids, recipe)
    log(f"shuffled labels: final loss {out['shuffled']['losses'][-1]}, {out['shuffled']['test']}")
    return out


def step_measurements(rounds: int = 4, batch: int = 4, seq_len: int = 64, log=print) -> dict:
    """One SmolLM2 training step (AdamW, lr = 0) of full fine-tuning and of two LoRA configurations, measured
    by ``cost.measure_training_step``: the tensors it creates and its time. The configurations alternate
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
            measured = cost.measure_training_step(model, ids)
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

    _check_parts(parts)
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


def _check_parts(parts):
    known = ("gguf", "steps", "smollm2", "tiny")
    if isinstance(parts, str) or not all(isinstance(p, str) and p in known for p in parts):
        raise ValueError(f"parts must be a list of names from {known}, got {parts!r}")


if __name__ == "__main__":  # make lora
    import os
    import sys

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    main(sys.argv[1:] or ("gguf", "steps", "smollm2", "tiny"), os.environ.get("LMBOOK_SWEEPS_PATH", SWEEPS_PATH))
