"""Chapter 12's experiment 2 (see ``positional_runs``): SmolLM2-135M-Instruct read at query-key distances beyond its
8,192-position window, by a jump in the position ids between a context passage and a scored passage, with RoPE
plain and stretched by PI, NTK, NTK-by-parts and YaRN. Run by ``make positional`` (the ``smollm2`` part); the
results go to ``data/positional_smollm2_passages.json.gz``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import validate
from ..rope_scaling import rescale_rope
from .positional_runs import METHODS, SMOLLM2_PATH, _check_run, _save

SMOLLM2_WINDOW = 8192
GAP_PASSAGE = 128            # tokens in the context passage and in the scored passage
GAP_SAMPLES = 8              # passages (a batch)
GAP_DISTANCES = (1024, 2048, 4096, 8192, 16384, 32768, 65536)  # largest query-key distance D


def gap_positions(distance: int, passage: int = GAP_PASSAGE) -> torch.Tensor:
    """Positions of the probe: the context passage at 0 .. P-1, the scored passage ending at ``distance``."""
    _check_gap(distance, passage)
    return torch.cat([torch.arange(passage), torch.arange(distance - passage + 1, distance + 1)])


@torch.no_grad()
def _passage_loss(model, batch, positions, scored):
    """Mean loss of the last ``scored`` tokens of each row of ``batch`` (b, T), read at ``positions`` (T,): (b,)."""
    logits = model(batch[:, :-1], positions[:-1]).float()  # (b, T - 1, V)
    nll = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")  # (b, T - 1)
    return nll[:, -scored:].mean(1)


def run_smollm2(path: str | Path = SMOLLM2_PATH, samples: int = GAP_SAMPLES) -> dict:
    """Experiment 2 (see the module docstring), ``samples`` passages; writes ``path`` and returns the results."""
    _check_run(path, samples)
    from .. import data
    from ..pretrained import load_smollm2
    from ..tokenization import BPETokenizer

    model, tokenizer = load_smollm2(), BPETokenizer.from_gguf()
    ids = torch.tensor(tokenizer.encode("\n\n".join(data.split("validation").values())))
    P, W = GAP_PASSAGE, SMOLLM2_WINDOW
    starts = [int(i * (len(ids) - 2 * P) / samples) for i in range(samples)]
    batch = torch.stack([ids[s:s + 2 * P] for s in starts])  # (samples, 2P): context passage, scored passage
    rows, start = [], time.perf_counter()

    def record(name, distance, method, tokens, positions, s=1.0):
        m = model if method == "RoPE" else rescale_rope(model, method, s, W)
        losses = _passage_loss(m, tokens, positions, P - 1)  # (samples,)
        rows.append({"setting": name, "distance": distance, "method": method, "s": s,
                     "loss": round(losses.mean().item(), 5), "losses": [round(x, 5) for x in losses.tolist()]})
        print(f"{name:>12} D={distance:6d} {method:>12} s={s:g}: ppl {math.exp(losses.mean().item()):.2f}", flush=True)

    record("alone", P - 1, "RoPE", batch[:, P:], torch.arange(P))
    for s in (2.0, 4.0, 8.0):  # the passage alone, read with stretched frequencies: local damage only
        for method in METHODS:
            record("alone", P - 1, method, batch[:, P:], torch.arange(P), s)
    record("contiguous", 2 * P - 1, "RoPE", batch, torch.arange(2 * P))
    for distance in GAP_DISTANCES:
        s = max(1.0, distance / W)
        record("gap", distance, "RoPE", batch, gap_positions(distance, P))
        for method in METHODS if s > 1 else ():
            record("gap", distance, method, batch, gap_positions(distance, P), s)
    for distance in (4096, 16384, 65536):  # plain RoPE: the distant context without its first token, or only it
        at = gap_positions(distance, P)
        record("gap, no first token", distance, "RoPE", batch[:, 1:], at[1:])
        record("gap, first token only", distance, "RoPE", torch.cat([batch[:, :1], batch[:, P:]], 1),
               torch.cat([at[:1], at[P:]]))
    out = {"window": W, "passage": P, "samples": samples, "starts": starts, "scored_tokens": samples * (P - 1),
           "rows": rows, "seconds": round(time.perf_counter() - start, 1)}
    _save(path, out)
    return out


# ---- argument checks ----------------------------------------------------------------------------------------------

def _check_gap(distance, passage):
    validate.integer("passage", passage)
    validate.integer("distance", distance, low=2 * passage - 1)  # the scored passage must not overlap the context
