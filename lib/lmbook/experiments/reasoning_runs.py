"""Chapter 17's stored runs: the tiny Transformer trained on addition written three ways, then GRPO.

    python -m lmbook.experiments.reasoning_runs sft [ARM ...]  # every ARM (or those named), seed 0
    python -m lmbook.experiments.reasoning_runs grpo           # GRPO, GRPO without KL, more supervised steps
    python -m lmbook.experiments.reasoning_runs smollm2        # SmolLM2 asked directly and "step by step"

The runs of a stage go as parallel processes, one CPU thread each, on ``lmbook.utils.default_device()``. ``sft``
trains chapter 9's tiny model (596k parameters) from scratch on sums whose operands have 1 to 5 digits (the size
drawn uniformly per problem), batch 64, AdamW at 1e-3 after 100 warm-up steps, and scores greedy answers on held-
out problems of 1 to 6 digits (6 is longer than any training problem): 200 per size every 250 steps, 1,000 per size
at the end (500 before and after GRPO). A scratchpad example is about three times as long as an answer-only one, so
the scratchpad arm trains a third as many steps: every arm sees about the same number of tokens (recorded, with
its wall-clock seconds).
``grpo`` starts from a scratchpad checkpoint that is only partly trained (stored by ``sft``) and runs GRPO
with and without the KL penalty, against the control of as many further supervised examples as GRPO samples
completions, on 3- to 5-digit sums (smaller ones the checkpoint already solves, so their groups would all score
alike and teach nothing). Sums of one or two digits also occur in training (there are only 10,000 of them); the
larger test sets are practically disjoint from training.

Writes ``lib/lmbook/data/reasoning_runs.json.gz`` (curves, accuracies, times) and ``reasoning_models.pt``
(float16 weights of the scratchpad model and its step-500 checkpoint, which the chapter samples from and GRPO
starts from; every final score is taken with float16-rounded weights).
"""

from __future__ import annotations

import copy
import fcntl
import gzip
import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch

from .. import reasoning as R
from .. import rlvr
from ..model import Transformer
from ..pretrained import tiny_config
from ..utils import default_device

DATA = Path(__file__).resolve().parent.parent / "data"
RESULTS, MODELS = DATA / "reasoning_runs.json.gz", DATA / "reasoning_models.pt"
TRAIN_DIGITS, TEST_DIGITS = (1, 2, 3, 4, 5), (1, 2, 3, 4, 5, 6)
ARMS = {"answer": ("answer", 3600), "reversed": ("reversed", 3600),
        "scratchpad": ("scratchpad", 1200)}  # (format, steps): about equal tokens per arm
SEEDS, BATCH, LR, WARMUP, EVERY = (0,), 64, 1e-3, 100, 250  # one seed: the gaps are tens of points
START_STEP = 500  # the partly trained scratchpad checkpoint GRPO starts from
GRPO_ARMS = {"grpo": 0.04, "grpo_no_kl": 0.0, "more_sft": None}  # beta, or None for supervised steps
GRPO_STEPS, GRPO_PROMPTS, GRPO_LR, GRPO_DIGITS = 200, 8, 1e-4, (3, 4, 5)


def test_problems(digits: int, n: int) -> list:
    return R.make_problems(n, digits, seed=10_000 + digits)


def training_batch(rng: random.Random, n: int = BATCH) -> list:
    return [R.make_problems(1, rng.choice(TRAIN_DIGITS), seed=rng.randrange(2 ** 31))[0] for _ in range(n)]


def new_model(seed: int) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(len(R.VOCAB))).to(default_device())


def rounded(model: Transformer) -> Transformer:
    """The model with float16-rounded weights, as stored and as the chapter loads it."""
    out = copy.deepcopy(model)
    out.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
    return out


def scores(model, fmt: str, n: int) -> dict:
    model.eval()
    out = {str(d): rlvr.accuracy(model, test_problems(d, n), fmt) for d in TEST_DIGITS}
    model.train()
    return out


def sft(job: dict) -> dict:
    torch.set_num_threads(1)
    arm, seed = job["arm"], job["seed"]
    fmt, steps = ARMS[arm]
    model, rng = new_model(seed), random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.1)
    curve, losses, states, tokens, t0 = [], [], {}, 0, time.time()
    for step in range(1, steps + 1):
        for g in opt.param_groups:
            g["lr"] = LR * min(1.0, step / WARMUP)
        batch = training_batch(rng)
        tokens += sum(len(R.prompt(a, b, fmt)) + len(R.target(a, b, fmt)) for a, b in batch)
        loss = rlvr.supervised_loss(model, batch, fmt)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % EVERY == 0:
            curve.append({"step": step, "loss": sum(losses[-EVERY:]) / EVERY, "acc": scores(model, fmt, 200)})
        if seed == 0 and arm == "scratchpad" and step == START_STEP:
            states[f"scratchpad_{step}"] = {k: v.half().cpu() for k, v in model.state_dict().items()}
    seconds = time.time() - t0
    final = rounded(model)
    if seed == 0 and arm == "scratchpad":  # the models the chapter samples from: this and scratchpad_500
        states[arm] = {k: v.half().cpu() for k, v in model.state_dict().items()}
    return {"arm": arm, "fmt": fmt, "seed": seed, "steps": steps, "tokens": tokens, "seconds": seconds, "curve": curve,
            "final": scores(final, fmt, 1000), "states": states}


def grpo(job: dict) -> dict:
    torch.set_num_threads(1)
    arm, seed, start = job["arm"], job["seed"], job["start"]
    beta = GRPO_ARMS[arm]
    torch.manual_seed(seed)
    policy = new_model(seed)
    policy.load_state_dict({k: v.float() for k, v in start.items()})
    reference = copy.deepcopy(policy).requires_grad_(False)
    opt = torch.optim.AdamW(policy.parameters(), lr=GRPO_LR, betas=(0.9, 0.95), weight_decay=0.0)
    generator = torch.Generator(default_device()).manual_seed(seed)
    config = rlvr.GRPOConfig(beta=beta or 0.0)
    rng, curve, t0 = random.Random(1000 + seed), [], time.time()
    before = scores(policy, "scratchpad", 500)
    for step in range(1, GRPO_STEPS + 1):
        digits = rng.choice(GRPO_DIGITS)
        problems = R.make_problems(GRPO_PROMPTS, digits, seed=rng.randrange(2 ** 31))
        if beta is None:  # control: supervised steps on as many problems as GRPO samples completions
            loss = rlvr.supervised_loss(policy, problems * config.group_size, "scratchpad")
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            record = {"loss": loss.item()}
        else:
            record = rlvr.grpo_step(policy, reference, opt, problems, "scratchpad", config, generator)
        curve.append({"step": step, "digits": digits, **record})
    return {"arm": arm, "seed": seed, "steps": GRPO_STEPS, "seconds": time.time() - t0, "curve": curve,
            "before": before, "after": scores(rounded(policy), "scratchpad", 500), "states": {}}


def parallel(fn, jobs: list, workers: int = 2) -> list:
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return list(pool.map(fn, jobs))


def save(stage: str, runs: list) -> None:
    with open(DATA / ".reasoning_runs.lock", "w") as lock:  # stages may run at once: one writer at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        _save(stage, runs)


def _save(stage: str, runs: list) -> None:
    results = json.loads(gzip.decompress(RESULTS.read_bytes())) if RESULTS.exists() else {}
    states = torch.load(MODELS) if MODELS.exists() else {}
    for run in runs:
        states.update(run.pop("states"))
    kept = [r for r in results.get(stage, {}).get("runs", []) if r["arm"] not in {run["arm"] for run in runs}]
    results[stage] = {"device": str(default_device()), "runs": kept + runs}  # runs of other arms are kept
    RESULTS.write_bytes(gzip.compress(json.dumps(results).encode(), mtime=0))
    torch.save(states, MODELS)


# ---- stage "smollm2": does "think step by step" help a 135M model? --------------------------------------------
# python -m lmbook.experiments.reasoning_runs smollm2: SmolLM2-135M-Instruct, greedy, on 48 questions that code
# labels (24 sums and products, 24 Python expressions labelled by evaluating them), asked directly and with
# "think step by step"; a reply's answer is the integer its last line states (final_answer), none if cut off.

SMOL_MODES = {"direct": ("Reply with the final answer only.", 48),  # (instruction, most new tokens)
              "think": ("Think step by step, then give the final answer on the last line.", 256)}
SMOL_PYTHON = ("len({w!r}) + {a}", "{a} * {b} - {c}", "max([{a}, {b}, {c}]) - min([{a}, {b}, {c}])",
               "sum(range({a}))", "{w!r}.count({ch!r})", "[{a}, {b}, {c}][-1] * 2", "{b} // {d} + {b} % {d}",
               "len([{a}, {b}] * {d})")
SMOL_WORDS = ("banana", "mississippi", "reasoning", "transformer", "attention", "parrot")


def smollm2_questions() -> list:
    """48 questions with exact integer labels: 8 each of a+b (2 digits), a+b (3 digits), a*b (1 by 2 digits), and
    24 Python expressions (3 per template), labelled by evaluating the expression."""
    rng, out = random.Random(17), []
    for kind, lo, hi, lo2, hi2, op in (("add2", 10, 99, 10, 99, "+"), ("add3", 100, 999, 100, 999, "+"),
                                       ("mul", 2, 9, 10, 99, "*")):
        for _ in range(8):
            a, b = rng.randint(lo, hi), rng.randint(lo2, hi2)
            out.append({"kind": kind, "question": f"What is {a} {op} {b}?", "answer": a + b if op == "+" else a * b})
    for template in SMOL_PYTHON:
        for _ in range(3):
            w = rng.choice(SMOL_WORDS)
            expr = template.format(a=rng.randint(2, 9), b=rng.randint(10, 40), c=rng.randint(2, 9), d=rng.randint(2, 5),
                                   w=w, ch=rng.choice(sorted(set(w))))
            out.append({"kind": "python", "question": f"What does this Python line print?\nprint({expr})",
                        "answer": eval(expr)})  # our own generated expression, never user input
    return out


def last_integer(text: str) -> int | None:
    """The last integer anywhere in the text: a lenient parser, kept to show what it gets wrong."""
    import re
    found = re.findall(r"-?\d+", text.replace(",", ""))
    return int(found[-1]) if found else None


def final_answer(text: str, finished: bool = True) -> int | None:
    """The answer a reply states, strictly: None unless the reply ended (not cut off at the token limit) and its
    last non-empty line ends with an integer that stands alone or follows "answer is", "=", "is" or "print"."""
    import re
    if not isinstance(text, str) or not isinstance(finished, bool):
        raise TypeError(f"text must be a str and finished a bool, got {type(text).__name__} "
                        f"and {type(finished).__name__}")
    lines = [line for line in text.replace(",", "").splitlines() if line.strip()]
    if not finished or not lines:
        return None
    found = re.search(r"(?:^|answer is|answer:|=|\bis|\bprint)\s*[`*]*(-?\d+)[`*]*\.?\s*$", lines[-1].strip())
    return int(found.group(1)) if found else None


def smollm2(limit: int | None = None) -> list:
    from ..decoding import generate
    from ..pretrained import load_smollm2, smollm2_chat
    from ..tokenization import BPETokenizer

    torch.set_num_threads(1)
    model, tok = load_smollm2(), BPETokenizer.from_gguf()
    eos = tok.special_tokens["<|im_end|>"]
    runs = []
    for i, q in enumerate(smollm2_questions()[:limit]):
        for mode, (instruction, max_new) in SMOL_MODES.items():
            ids = torch.tensor(tok.encode(smollm2_chat(f"{q['question']} {instruction}")))
            t0 = time.time()
            out = generate(model, ids, max_new, eos_id=eos, use_cache=True)[0, len(ids):].tolist()
            new = [t for t in out if t != eos]
            reply = tok.decode(new)
            parsed = final_answer(reply, eos in out)
            runs.append({"arm": mode, "index": i, **q, "reply": reply, "tokens": len(new), "finished": eos in out,
                         "parsed": parsed, "correct": parsed == q["answer"], "seconds": time.time() - t0,
                         "states": {}})
            print(i, mode, q["answer"], parsed, len(new), f"{time.time() - t0:.1f}s", flush=True)
    return runs


def main(stage: str, arms: list) -> None:
    if stage == "sft":
        jobs = [{"arm": arm, "seed": s} for arm in sorted(arms or ARMS, key=lambda a: a != "scratchpad") for s in SEEDS]
        save("sft", parallel(sft, jobs))  # scratchpad first: the grpo stage starts from its checkpoint
    elif stage == "grpo":
        start = torch.load(MODELS)[f"scratchpad_{START_STEP}"]
        save("grpo", parallel(grpo, [{"arm": arm, "seed": s, "start": start} for arm in GRPO_ARMS for s in SEEDS]))
    elif stage == "smollm2":
        save("smollm2", smollm2())
    else:
        raise SystemExit(f"stage must be sft, grpo or smollm2, got {stage!r}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sft", sys.argv[2:])
