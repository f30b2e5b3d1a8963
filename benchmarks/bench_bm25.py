"""BM25 at scale: lmbook.bm25.BM25 against bm25s (numpy backend) and rank_bm25, timed in the same run.

The corpus is synthetic: 100,000 documents with lengths uniform in [50, 150] (mean 100 tokens) and tokens
drawn from a Zipf law p(rank r) ~ 1/r over a 100,000-word vocabulary. The 1,000 queries have 1 to 5 tokens,
each a token picked at random from the corpus, so queries follow the same law and contain common words too.
Every library gets the same lists of string tokens.

Each system is timed on index + get_scores for every query (every document scored). lmbook's Okapi variant
is compared with rank_bm25's BM25Okapi, its Lucene variant with bm25s's default method (both float64), and
the scores are checked to agree. rank_bm25 scans every document for every query term, so its query time is
measured on a subset of the queries and scaled linearly to all of them; the table says so.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from common import table  # noqa: E402

N_DOCS, MIN_LEN, MAX_LEN, VOCAB, N_QUERIES = 100_000, 50, 150, 100_000, 1_000
RANK_BM25_QUERIES = 50  # rank_bm25 takes ~0.1 s per query at this size: time a subset, scale linearly
REPEAT = 3


def make_corpus(seed: int = 0):
    """(documents, queries) as lists of lists of str tokens, Zipf-distributed."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{r}" for r in range(VOCAB)], dtype=object)
    p = 1.0 / np.arange(1, VOCAB + 1)
    p /= p.sum()
    lengths = rng.integers(MIN_LEN, MAX_LEN + 1, size=N_DOCS)
    flat = words[rng.choice(VOCAB, size=int(lengths.sum()), p=p)].tolist()
    ends = np.cumsum(lengths)
    docs = [flat[e - n:e] for e, n in zip(ends, lengths, strict=True)]
    q_lengths = rng.integers(1, 6, size=N_QUERIES)
    queries = [[flat[i] for i in rng.integers(0, len(flat), size=n)] for n in q_lengths]
    return docs, queries


def _timed(fn, repeat: int = 1):
    """(result of the last call, median CPU seconds, median wall seconds) over ``repeat`` calls.

    All three systems run on one thread, so the process's CPU time measures their work even when other jobs
    share the machine; wall time is reported alongside.
    """
    cpu, wall = [], []
    for _ in range(repeat):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return out, statistics.median(cpu), statistics.median(wall)


def run() -> str:
    import bm25s
    from lmbook.bm25 import BM25
    from rank_bm25 import BM25Okapi

    docs, queries = make_corpus()
    n_tokens = sum(map(len, docs))

    def bm25s_index(dtype):
        engine = bm25s.BM25(method="lucene", dtype=dtype)
        engine.index(docs, show_progress=False)
        return engine

    makers = {
        "lmbook lucene": lambda: BM25(variant="lucene").index(docs),
        "bm25s lucene (float64)": lambda: bm25s_index("float64"),
        "bm25s lucene (float32)": lambda: bm25s_index("float32"),
        "lmbook okapi": lambda: BM25(variant="okapi").index(docs),
    }
    engines, times, wall = {}, {}, {}
    for name, make in makers.items():
        engine, t_index, w_index = _timed(make, REPEAT)
        _, t_queries, w_queries = _timed(lambda e=engine: [e.get_scores(q) for q in queries], REPEAT)
        engines[name], times[name], wall[name] = engine, (t_index, t_queries), w_index + w_queries

    rank, t_index, w_index = _timed(lambda: BM25Okapi(docs))
    subset = queries[:RANK_BM25_QUERIES]
    rank_scores, t_subset, w_subset = _timed(lambda: [rank.get_scores(q) for q in subset])
    scale = N_QUERIES / RANK_BM25_QUERIES
    times["rank_bm25 okapi"] = (t_index, t_subset * scale)
    wall["rank_bm25 okapi"] = w_index + w_subset * scale

    # identical scores: lmbook okapi vs rank_bm25 (subset), lmbook lucene vs bm25s float64 (all queries)
    okapi, lucene = engines["lmbook okapi"], engines["lmbook lucene"]
    rel = lambda a, b: float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))  # noqa: E731
    err_rank = max(rel(okapi.get_scores(q), s) for q, s in zip(subset, rank_scores, strict=True))
    b64 = engines["bm25s lucene (float64)"]
    err_bm25s = max(rel(lucene.get_scores(q), b64.get_scores(q)) for q in queries)
    b32 = engines["bm25s lucene (float32)"]
    err_bm25s32 = max(rel(lucene.get_scores(q), b32.get_scores(q)) for q in queries)

    total = {k: v[0] + v[1] for k, v in times.items()}
    rows, notes = [], []
    for name in ["lmbook lucene", "bm25s lucene (float64)", "bm25s lucene (float32)", "lmbook okapi",
                 "rank_bm25 okapi"]:
        t_idx, t_q = times[name]
        peer = "lmbook lucene" if "lucene" in name else "lmbook okapi"
        q_note = f"{t_q:.2f}" + (" *" if name.startswith("rank_bm25") else "")
        rows.append([name, f"{t_idx:.2f}", q_note, f"{total[name]:.2f}", f"{wall[name]:.2f}",
                     f"{total[name] / total[peer]:.2f}x"])
    vs_bm25s = total["lmbook lucene"] / total["bm25s lucene (float64)"]
    vs_bm25s32 = total["lmbook lucene"] / total["bm25s lucene (float32)"]
    vs_rank = total["rank_bm25 okapi"] / total["lmbook okapi"]
    notes.append(f"* rank_bm25's query time was measured on {RANK_BM25_QUERIES} of the {N_QUERIES} queries "
                 f"({t_subset:.1f} CPU s) and scaled linearly to all {N_QUERIES}; its index was built once.")
    head = (
        "## BM25: lmbook vs bm25s and rank_bm25\n\n"
        f"Synthetic Zipf corpus: {N_DOCS:,} documents, {n_tokens:,} tokens (vocabulary {VOCAB:,}), "
        f"{N_QUERIES:,} queries of 1-5 tokens; every document scored for every query (`get_scores`). "
        f"CPU seconds of the (single-threaded) process, medians of {REPEAT} runs (rank_bm25: one run), so that "
        "other jobs on a shared machine do not distort the ratios; total wall-clock seconds for context. The "
        "last column is each system's total CPU time relative to lmbook with the same variant.\n\n"
    )
    summary = (
        f"\n\n- lmbook (lucene) takes **{vs_bm25s:.2f}x** the time of bm25s at float64 "
        f"({vs_bm25s32:.2f}x of bm25s at its default float32); target: within 1.5x.\n"
        f"- lmbook (okapi) is **{vs_rank:.0f}x** faster than rank_bm25; target: at least 20x.\n"
        f"- Same scores: largest relative difference {err_bm25s:.1e} against bm25s float64, "
        f"{err_rank:.1e} against rank_bm25 (float32 bm25s: {err_bm25s32:.1e}).\n- " + "\n- ".join(notes)
    )
    return head + table(["system", "index", "queries", "total", "wall", "vs lmbook"], rows) + summary


if __name__ == "__main__":
    print(run())
