"""A live, exact DPO experiment small enough to rerun in a second: a tabular autoregressive policy over short
replies, trained with :func:`lmbook.preference.dpo_loss` on pairs labelled by a preference rule.

The reply space is enumerable (4 content tokens ``a b c d``, an end-of-turn token, at most ``MAX_LEN`` tokens),
so every measure is exact rather than sampled: the rule rate of the policy, the sequence-level
KL(pi_theta || pi_ref), the per-token KL read along the training pair replies (teacher forced: the analogue of
the chapter's KL_pairs, which reads held-out pairs), and the mass on the chosen and on the rejected replies.
It mirrors the SmolLM2 run of chapter 16 (a reply is cut off after ``MAX_LEN`` tokens) and lets a reader change beta,
the steps, the loss and the rule. Left out on purpose: prompts (one prompt only), neural parameterisations, sampling
during training. ``seed_study`` repeats the runs over seeds (a new reference table and new pairs per seed); ``python
-m lmbook.experiments.dpo_toy`` stores it in ``data/dpo_toy_seeds.json.gz`` (about a minute). Chapter 16.
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import torch

from .. import validate
from ..preference import LOSS_TYPES, dpo_loss

__all__ = ["TOKENS", "MAX_LEN", "RULES", "all_replies", "reference_logits", "reply_logprobs", "live_dpo",
           "seed_study", "load_seed_study"]

SEEDS_PATH = Path(__file__).resolve().parents[1] / "data" / "dpo_toy_seeds.json.gz"

TOKENS = "abcd"  # content tokens 1..4; id 0 is the end-of-turn token
MAX_LEN = 6  # a reply with no end-of-turn token within MAX_LEN tokens is cut off
EOT, BOS = 0, len(TOKENS) + 1  # BOS: the "previous token" at position 0

RULES = {  # (content tokens as a string, finished) -> is the reply good?
    "finish": lambda text, finished: finished,  # brevity wins: any finished reply, the empty one included
    "topic": lambda text, finished: finished and len(text) >= 3 and "c" in text,  # says something, names topic "c"
}


def all_replies(max_len: int = MAX_LEN):
    """Every reply: ids (N, max_len) padded with 0, mask (N, max_len) of the scored positions, finished (N,)."""
    rows = [(seq, True) for k in range(max_len) for seq in itertools.product(range(1, 5), repeat=k)]
    rows += [(seq, False) for seq in itertools.product(range(1, 5), repeat=max_len)]
    ids = torch.zeros(len(rows), max_len, dtype=torch.long)
    mask = torch.zeros(len(rows), max_len, dtype=torch.bool)
    for i, (seq, finished) in enumerate(rows):
        ids[i, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[i, :len(seq) + finished] = True  # a finished reply also scores its end-of-turn token (id 0)
    return ids, mask, torch.tensor([f for _, f in rows])


def reference_logits(seed: int = 0, end_bias: float = -1.0, max_len: int = MAX_LEN) -> torch.Tensor:
    """pi_ref as a table of next-token logits (max_len, 6 previous tokens incl. BOS, 5 next tokens), float64."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(max_len, BOS + 1, BOS, generator=g, dtype=torch.float64)
    table[..., EOT] += end_bias  # a negative bias: the reference rambles, like a model that rarely stops
    return table


def reply_logprobs(table: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor):
    """log pi(y) = sum_t log p(y_t | t, y_{t-1}) over the scored positions, and the per-position
    log-distributions (N, max_len, 5) used for teacher-forced KL."""
    prev = torch.cat([torch.full_like(ids[:, :1], BOS), ids[:, :-1]], dim=1)  # (N, L): the token before each
    logdist = torch.log_softmax(table[torch.arange(ids.shape[1]), prev], dim=-1)  # (N, L, 5)
    token_logps = logdist.gather(-1, ids[..., None]).squeeze(-1)  # (N, L)
    return (token_logps * mask).sum(1), logdist


def _measures(table, ref_table, ids, mask, good, lengths, pair_rows, n_pairs):
    logp, logdist = reply_logprobs(table, ids, mask)
    ref_logp, ref_logdist = reply_logprobs(ref_table, ids, mask)
    p = logp.exp()  # (N,): the exact distribution over all replies
    token_kl = ((logdist.exp() * (logdist - ref_logdist)).sum(-1) * mask).sum(1)  # (N,) teacher forced
    return {"rule_rate": (p * good).sum().item(), "finished_rate": (p * (mask.sum(1) > lengths)).sum().item(),
            "mean_tokens": (p * lengths).sum().item(), "empty_rate": p[0].item(),
            "seq_kl": (p * (logp - ref_logp)).sum().item(), "pair_token_kl": token_kl[pair_rows].mean().item(),
            "chosen_mass": p[pair_rows[:n_pairs].unique()].sum().item(),  # on the distinct chosen replies
            "rejected_mass": p[pair_rows[n_pairs:].unique()].sum().item()}


def live_dpo(beta: float = 0.1, steps: int = 200, rule="topic", n_pairs: int = 64, loss_type: str = "sigmoid",
             lr: float = 0.05, seed: int = 0, record_every: int = 0, loss_fn=None) -> dict:
    """Draw replies from pi_ref, pair a reply that satisfies ``rule`` with one that does not, and run full-batch
    Adam on the DPO loss of a table of logits that starts at pi_ref. ``rule``: a name in RULES or a function
    (text, finished) -> bool. Returns the pairs' statistics and exact measures before and after; with
    ``record_every`` = k > 0 also "trace", the exact measures (plus "step") at steps 0, k, 2k, ...
    ``loss_fn(chosen_logps, rejected_logps, chosen_lengths, rejected_lengths)``, if given, replaces the DPO loss
    (and beta, loss_type): a reference-free loss of the policy's log-probs and the scored lengths, float64."""
    rule_fn = _check_live(beta, steps, rule, n_pairs, loss_type, lr, seed, record_every, loss_fn)
    ids, mask, finished = all_replies()
    lengths = mask.sum(1) - finished.long()  # content tokens
    good = torch.tensor([bool(rule_fn("".join(TOKENS[t - 1] for t in row[:n]), bool(f)))
                         for row, n, f in zip(ids.tolist(), lengths.tolist(), finished.tolist(), strict=True)],
                        dtype=torch.float64)
    ref_table = reference_logits(seed)
    ref_logp = reply_logprobs(ref_table, ids, mask)[0]
    g = torch.Generator().manual_seed(seed + 1)
    pool = torch.multinomial(ref_logp.exp(), 32 * n_pairs, replacement=True, generator=g)  # samples of pi_ref
    wins, losses = pool[good[pool] == 1], pool[good[pool] == 0]
    if len(wins) < n_pairs or len(losses) < n_pairs:
        raise ValueError(f"rule is satisfied by {len(wins)} of {len(pool)} reference samples: too few of one kind "
                         f"for n_pairs={n_pairs}; choose a rule that splits the reference's replies")
    w, lo = wins[:n_pairs], losses[:n_pairs]  # (n_pairs,) row indices of chosen and rejected replies
    pair_rows = torch.cat([w, lo])
    scored = mask.sum(1).double()  # (N,) tokens scored per reply, the end-of-turn token included
    table = ref_table.clone().requires_grad_(True)  # the policy starts as an exact copy of the reference
    optimizer = torch.optim.Adam([table], lr=lr)
    before = _measures(ref_table, ref_table, ids, mask, good, lengths, pair_rows, n_pairs)
    history, trace = [], [{"step": 0, **before}] if record_every else []
    for step in range(1, steps + 1):
        logp = reply_logprobs(table, ids[pair_rows], mask[pair_rows])[0]  # (2 n_pairs,)
        if loss_fn is None:
            loss = dpo_loss(logp[:n_pairs], logp[n_pairs:], ref_logp[w], ref_logp[lo], beta, loss_type)[0]
        else:
            loss = loss_fn(logp[:n_pairs], logp[n_pairs:], scored[w], scored[lo])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss.item())
        if record_every and step % record_every == 0:
            with torch.no_grad():
                now = _measures(table, ref_table, ids, mask, good, lengths, pair_rows, n_pairs)
                trace.append({"step": step, **now})
    with torch.no_grad():
        after = _measures(table, ref_table, ids, mask, good, lengths, pair_rows, n_pairs)
        logp = reply_logprobs(table, ids[pair_rows], mask[pair_rows])[0]
    return {"before": before, "after": after, "loss": history, "trace": trace,
            "chosen_lengths": lengths[w].tolist(), "rejected_lengths": lengths[lo].tolist(),
            "chosen_shorter": (lengths[w] < lengths[lo]).double().mean().item(),
            "chosen_logp_change": (logp[:n_pairs] - ref_logp[w]).mean().item(),
            "rejected_logp_change": (logp[n_pairs:] - ref_logp[lo]).mean().item()}


def seed_study(seeds=range(10), betas=(0.03, 0.3), rules=("finish", "topic"), steps: int = 800,
               record_every: int = 20, **kwargs) -> dict:
    """``live_dpo`` for every rule, beta and seed: {"steps": [...], "runs": {rule: {beta: [trace per seed]}}},
    each trace a dict of lists of the exact measures at steps 0, record_every, ..., steps."""
    seeds = list(seeds)
    validate.integer("steps", steps, low=1)
    validate.integer("record_every", record_every, low=1)
    runs = {}
    for rule in rules:
        for beta in betas:
            traces = [live_dpo(beta=beta, steps=steps, rule=rule, seed=s, record_every=record_every, **kwargs)["trace"]
                      for s in seeds]
            runs.setdefault(rule, {})[str(beta)] = [{k: [t[k] for t in tr] for k in tr[0] if k != "step"}
                                                    for tr in traces]
    return {"seeds": seeds, "steps": list(range(0, steps + 1, record_every)), "runs": runs}


def load_seed_study(path=SEEDS_PATH) -> dict:
    """The stored ``seed_study()`` (write it with ``python -m lmbook.experiments.dpo_toy``)."""
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _check_live(beta, steps, rule, n_pairs, loss_type, lr, seed, record_every, loss_fn) -> Callable:
    validate.number("beta", beta, low=0, low_open=True)
    validate.integer("steps", steps, low=1)
    validate.integer("n_pairs", n_pairs, low=1)
    validate.choice("loss_type", loss_type, LOSS_TYPES)
    validate.number("lr", lr, low=0, low_open=True)
    validate.integer("seed", seed, low=0)
    validate.integer("record_every", record_every, low=0)
    if loss_fn is not None and not callable(loss_fn):
        raise TypeError(f"loss_fn must be None or a function (chosen_logps, rejected_logps, chosen_lengths, "
                        f"rejected_lengths) -> loss, got {validate.describe(loss_fn)}")
    if isinstance(rule, str):
        validate.choice("rule", rule, tuple(RULES))
        return RULES[rule]
    if not callable(rule):
        raise TypeError(f"rule must be one of {tuple(RULES)} or a function (text, finished) -> bool, "
                        f"got {validate.describe(rule)}")
    return rule



if __name__ == "__main__":
    torch.set_num_threads(1)
    with gzip.GzipFile(SEEDS_PATH, "wb", mtime=0) as f:
        f.write(json.dumps(seed_study()).encode("utf-8"))
    print(f"wrote {SEEDS_PATH}")
