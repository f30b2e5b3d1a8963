"""The slow runs behind chapter 18, run once and stored: SmolLM2-135M-Instruct (lmbook's own model code,
float32, greedy) answering the chapter's questions with and without retrieval, and with and without tools.

``python -m lmbook.experiments.agent_runs [stage] [--shard i/n]``, stages in order:

- ``dense``: chapter 6's dense vectors (mean-pooled residual stream after layer ``LAYER``, a BOS token first and
  left out) of every passage of :func:`lmbook.rag.manual_passages` and of every question;
- ``rag``: each manual question answered closed-book, with the top ``TOP_K`` BM25 passages, with the top
  ``TOP_K`` fused (BM25 + dense, RRF k = 60) passages, and with its oracle passages (at most ``TOP_K``);
- ``tools``: each expression question answered in the arms of ``ARMS``: without tools; by the agent loop with the
  Python and search tools, free and with constrained decoding of each step (at most ``MAX_STEPS`` steps); and two
  controls with the same prompt and constrained decoding, one whose mask allows only ``ANSWER: `` (the format without
  the tools) and one whose first step must be ``CALL python: `` (the tool used at least once).
  ``--arms a,b`` runs only those arms, into parts of their own (``tools-a+b.*``) that ``merge`` adds to the others,
  so new arms need not recompute the stored ones;
- ``merge``: the parts combined into ``data/agent_runs.json.gz`` with the summary figures;
- ``all`` (the default): the four in order, unsharded.

``--shard i/n`` (1 <= i <= n) runs every n-th item from the i-th, so n processes can share a stage; parts go to
``_build/agent_runs/``. Run the shards of ``dense`` before ``rag``. Measured: about 0.4 s of one core per passage, 10 s
per manual question (four prompts, identical prompts answered once) and 9 s per expression question for the
first three arms, 3.5 s for the two controls together.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from glob import escape as glob_escape
from pathlib import Path

import numpy as np
import torch

from .. import rag
from ..agents import AGENT_SYSTEM, TOOLS, CallGrammar, TokenMask, make_tools, run_agent, value_correct, write_step
from ..decoding import generate
from ..dense_retrieval import cosine_rank, mean_pooled_states
from ..pretrained import load_smollm2, smollm2_chat
from ..ranking import recall_at_k
from ..tokenization import BPETokenizer

ROOT = Path(__file__).resolve().parents[3]
PARTS = ROOT / "_build" / "agent_runs"
OUT_PATH = Path(__file__).resolve().parents[1] / "data" / "agent_runs.json.gz"
LAYER, BOS = 20, 0           # chapter 6's pooling: a middle layer, <|endoftext|> as BOS (left out of the mean)
TOP_K, DEPTH = 3, 10         # passages in the prompt; ranks kept per retriever
MAX_NEW_TOKENS, MAX_STEPS = 24, 3
NO_TOOL_PROMPT = "What does this Python expression evaluate to? Reply with the value only.\n{}"
ARMS = ("no_tools", "agent", "agent_constrained", "agent_answer_only", "agent_python_first")


def _model():
    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    return load_smollm2(), BPETokenizer.from_gguf()


def _shard(items: list, shard: tuple[int, int]) -> list[int]:
    i, n = shard
    return list(range(len(items)))[i - 1::n]


def _save(stage: str, shard: tuple[int, int], payload) -> None:
    PARTS.mkdir(parents=True, exist_ok=True)
    path = PARTS / f"{stage}.{shard[0]}of{shard[1]}.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    print(f"wrote {path}")


def _load(stage: str) -> dict:
    """Every part of ``stage``, merged by item index; refuses an incomplete set of shards."""
    merged, seen = {}, set()
    for path in sorted(PARTS.glob(f"{glob_escape(stage)}.*of*.json")):
        i, n = map(int, path.name.split(".")[1].split("of"))
        seen.add((i, n))
        merged.update(json.loads(path.read_text(encoding="utf-8")))
    counts = {n for _, n in seen}
    if len(counts) != 1 or len(seen) != next(iter(counts)):
        raise SystemExit(f"stage {stage!r}: parts {sorted(seen)} in {PARTS} are not one complete set of shards")
    return merged


def stage_dense(shard) -> None:
    model, tokenizer = _model()
    passages, questions = rag.manual_passages(), rag.manual_questions()
    texts = [f"{p.title}: {p.text}" for p in passages] + [q["question"] for q in questions]
    out, start, cpu = {}, time.time(), time.process_time()
    for k in _shard(texts, shard):
        ids = torch.tensor([BOS] + tokenizer.encode(texts[k]))  # (1 + T,)
        out[k] = mean_pooled_states(model, ids, [LAYER])[0].astype(np.float32).tolist()  # (d,)
    print(f"{len(out)} texts in {time.time() - start:.0f} s, {time.process_time() - cpu:.0f} s of CPU")
    _save("dense", shard, out)


def _rankings(questions) -> list[dict]:
    """BM25, dense and fused top-DEPTH passage rankings for every question."""
    passages = rag.manual_passages()
    vectors = _load("dense")
    P = np.array([vectors[str(k)] for k in range(len(passages))])  # (N, d)
    Q = np.array([vectors[str(len(passages) + k)] for k in range(len(questions))])  # (Q, d)
    dense = cosine_rank(Q, P)[:, :100].tolist()  # (Q, 100)
    search = rag.PassageSearch(passages)
    out = []
    for q, d in zip(questions, dense, strict=True):
        bm25 = search.rank(q["question"], 100)
        out.append({"bm25": bm25[:DEPTH], "dense": d[:DEPTH], "fused": rag.fuse([bm25, d], k=60, top=DEPTH)})
    return out


def _answer(model, tokenizer, prompt: str) -> str:
    ids = torch.tensor(tokenizer.encode(prompt))
    out = generate(model, ids, MAX_NEW_TOKENS, eos_id=tokenizer.special_tokens["<|im_end|>"], use_cache=True)
    return tokenizer.decode(out[0, len(ids):].tolist()).replace("<|im_end|>", "").strip()


def stage_rag(shard) -> None:
    model, tokenizer = _model()
    passages, questions = rag.manual_passages(), rag.manual_questions()
    ranks = _rankings(questions)
    out, start, cpu = {}, time.time(), time.process_time()
    for k in _shard(questions, shard):
        q = questions[k]
        shown = {"closed": [], "bm25": ranks[k]["bm25"][:TOP_K], "fused": ranks[k]["fused"][:TOP_K],
                 "oracle": q["oracle"][:TOP_K]}
        answers, cache = {}, {}
        for condition, ids in shown.items():
            prompt = rag.closed_book_prompt(q["question"]) if condition == "closed" else \
                rag.rag_prompt(q["question"], [passages[i] for i in ids])
            if prompt not in cache:  # the same prompt (say BM25 and fused agree) gives the same greedy answer
                cache[prompt] = _answer(model, tokenizer, prompt)
            text = cache[prompt]
            answers[condition] = {"passages": ids, "answer": text, "correct": rag.answer_correct(text, q["accepted"])}
        out[k] = {"rankings": ranks[k], "answers": answers}
    print(f"{len(out)} questions in {time.time() - start:.0f} s, {time.process_time() - cpu:.0f} s of CPU")
    _save("rag", shard, out)


def _step_masks(tokenizer, specials) -> dict:
    """Per agent arm, the masks of (the first step, the later steps); None decodes freely."""
    plain = {i: b for i, b in tokenizer.vocab.items() if i not in specials}

    def mask(heads=None):
        grammar = CallGrammar(TOOLS)
        if heads is not None:  # a narrower format: the same automaton with only these heads
            grammar.heads = [h.encode() for h in heads]
        return TokenMask(plain, grammar, len(tokenizer.vocab))

    full, answer = mask(), mask(["ANSWER: "])
    return {"agent": (None, None), "agent_constrained": (full, full), "agent_answer_only": (answer, answer),
            "agent_python_first": (mask(["CALL python: "]), full)}


def stage_tools(shard, arms=ARMS) -> None:
    model, tokenizer = _model()
    questions = rag.expression_questions()
    specials = set(tokenizer.special_tokens.values())
    masks = _step_masks(tokenizer, specials)
    tools = make_tools(rag.PassageSearch(rag.manual_passages()))
    out, start, cpu = {}, time.time(), time.process_time()
    for k in _shard(questions, shard):
        q, record = questions[k], {}
        if "no_tools" in arms:
            text = _answer(model, tokenizer, smollm2_chat(NO_TOOL_PROMPT.format(q["expression"])))
            first = next((line for line in text.splitlines() if line.strip()), "")
            record["no_tools"] = {"answer": first, "correct": value_correct(first, q["value"])}
        for name in (a for a in arms if a != "no_tools"):
            prompt = smollm2_chat(f"Question: What does {q['expression']} evaluate to?", system=AGENT_SYSTEM)

            def write(transcript, prompt=prompt, masks=masks[name]):
                ids = torch.tensor(tokenizer.encode(prompt + transcript))
                step_mask = masks[1] if transcript else masks[0]
                return write_step(model, ids, tokenizer.vocab, specials, MAX_NEW_TOKENS, step_mask)

            run = run_agent(write, tools, MAX_STEPS)
            record[name] = {"answer": run.answer, "steps": [vars(s) for s in run.steps],
                            "correct": run.answer is not None and value_correct(run.answer, q["value"])}
        out[k] = record
    print(f"{len(out)} expressions in {time.time() - start:.0f} s, {time.process_time() - cpu:.0f} s of CPU")
    _save("tools" if tuple(arms) == ARMS else "tools-" + "+".join(arms), shard, out)


def _load_tools() -> list:
    """The records of every arm: the parts of ``tools`` and of each ``tools-<arms>`` run, merged per question."""
    n = len(rag.expression_questions())
    records = [{} for _ in range(n)]
    for stage in sorted({path.name.split(".")[0] for path in PARTS.glob("tools*.*of*.json")}):
        for k, record in _load(stage).items():
            records[int(k)].update(record)
    missing = [(k, a) for k, r in enumerate(records) for a in ARMS if a not in r]
    if missing:
        raise SystemExit(f"tools: no stored run for (question, arm) {missing[:3]}... ({len(missing)} in all)")
    return records


def _summary(manual: list, tools: list) -> dict:
    summary = {"accuracy": {c: float(np.mean([m["answers"][c]["correct"] for m in manual]))
                            for c in ("closed", "bm25", "fused", "oracle")}}
    questions = rag.manual_questions()
    summary["recall"] = {r: {k: float(np.mean([recall_at_k(m["rankings"][r], set(q["oracle"]), k)
                                               for m, q in zip(manual, questions, strict=True)]))
                             for k in (1, 3, 10)} for r in ("bm25", "dense", "fused")}
    summary["tools"] = {}
    for c in ARMS:
        runs = [t[c] for t in tools]
        kinds = [s["kind"] for t in runs for s in t.get("steps", [])]
        summary["tools"][c] = {"accuracy": float(np.mean([t["correct"] for t in runs])),
                               "parse_failures": kinds.count("parse_failure"),
                               "malformed_calls": kinds.count("malformed_call"), "calls": kinds.count("call"),
                               "answered": sum(t["answer"] is not None for t in runs),
                               "steps": len(kinds)}
    return summary


def stage_merge() -> None:
    manual, tools = _load("rag"), _load_tools()
    manual = [manual[str(k)] for k in range(len(rag.manual_questions()))]
    blob = {"settings": {"layer": LAYER, "top_k": TOP_K, "depth": DEPTH, "max_new_tokens": MAX_NEW_TOKENS,
                         "max_steps": MAX_STEPS, "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, float32), greedy"},
            "summary": _summary(manual, tools), "manual": manual, "tools": tools}
    with gzip.GzipFile(OUT_PATH, "wb", mtime=0) as f:
        f.write(json.dumps(blob, ensure_ascii=False, sort_keys=True).encode("utf-8"))
    print(json.dumps(blob["summary"], indent=1))
    print(f"wrote {OUT_PATH} ({OUT_PATH.stat().st_size / 1e3:.0f} kB)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stage", nargs="?", default="all", choices=("dense", "rag", "tools", "merge", "all"))
    parser.add_argument("--shard", default="1/1", help="i/n: run every n-th item from the i-th")
    parser.add_argument("--arms", default=",".join(ARMS), help="tools stage: a comma-separated subset of ARMS")
    args = parser.parse_args(argv)
    i, n = (int(x) for x in args.shard.split("/"))
    if not 1 <= i <= n:
        parser.error(f"--shard must be i/n with 1 <= i <= n, got {args.shard}")
    arms = tuple(a for a in ARMS if a in args.arms.split(","))  # in ARMS order
    if not arms or set(args.arms.split(",")) - set(ARMS):
        parser.error(f"--arms must be a comma-separated subset of {','.join(ARMS)}, got {args.arms}")
    stages = {"dense": stage_dense, "rag": stage_rag, "tools": lambda shard: stage_tools(shard, arms)}
    for name in (("dense", "rag", "tools", "merge") if args.stage == "all" else (args.stage,)):
        stage_merge() if name == "merge" else stages[name]((i, n))


if __name__ == "__main__":
    main()
