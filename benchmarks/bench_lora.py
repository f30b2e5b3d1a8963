"""LoRA vs full fine-tuning: one SmolLM2-135M training step (batch 4, 128 tokens, AdamW, float32), LoRA with
r = 8 on q_proj and v_proj against updating every weight.

Each configuration runs in a fresh process, so that its peak resident memory (``ru_maxrss``) is its own;
the processes alternate (LoRA, full, LoRA, full) so that load from other programs hits both alike. Per
process: load the model, one forward pass to touch every weight (the RSS after it is the baseline), one
warm-up step, then timed steps. Reported: median step time, the peak RSS and its growth over the baseline,
and the tensors the step creates as counted by ``lmbook.finetuning_cost.measure_training_step`` (deterministic).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BATCH, SEQ, RANK, TIMED_STEPS, ROUNDS = 4, 128, 8, 3, 2
MB = 2 ** 20


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def child(kind: str, threads: int) -> dict:
    """One configuration in this process: 'lora' or 'full'."""
    import torch
    import torch.nn.functional as F
    from lmbook import finetuning_cost as cost
    from lmbook import lora
    from lmbook.pretrained import load_smollm2

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = load_smollm2()
    ids = torch.randint(len(model.tok_emb.weight), (BATCH, SEQ + 1), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model(ids[:, :-1])  # touch every weight: the baseline RSS holds the whole model
    baseline = _rss_bytes()
    if kind == "lora":
        lora.add_lora(model, ["q_proj", "v_proj"], r=RANK, alpha=2 * RANK, seed=0)
    else:
        model.requires_grad_(True)
    counted = cost.measure_training_step(model, ids)  # lr = 0: the weights stay as loaded
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4 if kind == "lora" else 1e-5)
    model.train()
    times = []
    for step in range(1 + TIMED_STEPS):
        start = time.perf_counter()
        logits = model(ids[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step:  # the first step allocates gradients and optimizer state
            times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return {"times": times, "peak": peak, "baseline": baseline, "counted": counted,
            "trainable": cost.count_parameters(model, trainable_only=True)}


def run() -> str:
    threads = int(os.environ.get("LMBOOK_THREADS", "1"))  # one thread: steadier timings on a shared CPU
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent / "lib"), os.environ.get("PYTHONPATH", "")])}
    results = {"lora": [], "full": []}
    for _ in range(ROUNDS):
        for kind in ("lora", "full"):
            out = subprocess.run([sys.executable, __file__, kind, str(threads)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            results[kind].append(json.loads(out.strip().splitlines()[-1]))
    summary = {}
    for kind, runs in results.items():
        summary[kind] = {
            "step": statistics.median(t for r in runs for t in r["times"]),
            "peak": max(r["peak"] for r in runs),
            "growth": max(r["peak"] - r["baseline"] for r in runs),
            "counted": runs[0]["counted"]["total"],
            "parts": runs[0]["counted"],
            "trainable": runs[0]["trainable"],
        }
    lo, fu = summary["lora"], summary["full"]
    rows = [[name, f"{s['trainable']:,}", f"{s['step']:.2f}", f"{s['peak'] / MB:.0f}", f"{s['growth'] / MB:.0f}",
             f"{s['counted'] / MB:.0f}"] for name, s in (("LoRA r=8 on q, v", lo), ("full fine-tuning", fu))]
    rows.append(["**ratio LoRA / full**", f"{lo['trainable'] / fu['trainable']:.4f}", f"{lo['step'] / fu['step']:.2f}",
                 f"{lo['peak'] / fu['peak']:.2f}", f"{lo['growth'] / fu['growth']:.2f}",
                 f"{lo['counted'] / fu['counted']:.2f}"])
    parts = [[name] + [f"{s['parts'][k] / MB:.1f}" for k in ("weights", "gradients", "optimizer", "activations")]
             for name, s in (("LoRA r=8 on q, v", lo), ("full fine-tuning", fu))]
    from common import table

    return (
        "## LoRA vs full fine-tuning (SmolLM2-135M training step)\n\n"
        f"One AdamW step on batch {BATCH} x {SEQ} tokens, float32, {threads} torch thread(s); each configuration "
        f"in its own process, {ROUNDS} alternating rounds, median of {TIMED_STEPS} timed steps per round after a "
        "warm-up step. Peak RSS is the process's maximum resident memory; growth is that peak minus the RSS after "
        "loading the model and one forward pass; counted is weights + gradients + AdamW state + saved "
        "activations from `lmbook.finetuning_cost.measure_training_step`.\n\n"
        + table(["method", "trainable", "step (s)", "peak RSS (MB)", "growth (MB)", "counted (MB)"], rows)
        + "\n\nCounted tensors (MB):\n\n"
        + table(["method", "weights", "gradients", "AdamW state", "activations"], parts)
        + "\n"
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("lora", "full"):
        print(json.dumps(child(sys.argv[1], int(sys.argv[2]))))
    else:
        print(run())
