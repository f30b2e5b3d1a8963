"""lmbook.batching: static and continuous batching on a hand-worked trace, and invariants on random traces
(every request's tokens exactly once, no slot or block budget exceeded, continuous never slower in steps)."""

import random

import pytest
from lmbook.batching import Request, simulate


def test_hand_worked_trace():
    # max_batch 2. A needs 3 tokens, B 1, C 2, all arriving at step 0.
    # static:      step 0: A B | step 1: A - | step 2: A - | step 3: C - | step 4: C -   -> 5 steps
    # continuous:  step 0: A B | step 1: A C | step 2: A C                              -> 3 steps
    trace = [Request(4, 3), Request(2, 1), Request(5, 2)]
    static = simulate(trace, "static", max_batch=2)
    assert static["start"] == [0, 0, 3] and static["finish"] == [2, 0, 4]
    assert static["latency"] == [3, 1, 5] and static["steps"] == 5
    assert static["utilisation"] == pytest.approx(6 / 10)  # 6 busy slot-steps of 2 x 5
    cont = simulate(trace, "continuous", max_batch=2)
    assert cont["start"] == [0, 0, 1] and cont["finish"] == [2, 0, 2]
    assert cont["latency"] == [3, 1, 3] and cont["steps"] == 3 and cont["utilisation"] == 1.0


def test_static_full_waits_for_a_full_batch():
    # max_batch 2. A (3 tokens) arrives at 0, B (1) at 2, C (2) at 3.
    # static:      A alone at 0-2, then B and C at 3 (C runs 3-4)                   -> 5 steps
    # static_full: waits for B; A B at 2 (A runs 2-4), then C, the last request, at 5-6 -> 7 steps
    trace = [Request(4, 3, 0), Request(2, 1, 2), Request(5, 2, 3)]
    static = simulate(trace, "static", max_batch=2)
    assert static["start"] == [0, 3, 3] and static["steps"] == 5
    full = simulate(trace, "static_full", max_batch=2)
    assert full["start"] == [2, 2, 5] and full["finish"] == [4, 2, 6] and full["steps"] == 7
    assert full["first_token"] == [3, 1, 3] and full["latency"] == [5, 1, 4]


def test_hand_worked_trace_with_arrivals_and_a_block_budget():
    # blocks of 4 tokens: A (2 + 6) needs 2, B (3 + 2) needs 2, C (1 + 1) needs 1; 3 blocks in all.
    # continuous: step 0 A; B arrives at 1 but A holds 2 of 3 blocks -> waits; C arrives at 2, fits (1 block),
    # but FIFO keeps it behind B; A finishes at step 5; B runs 6-7, C too (2 + 1 blocks) at 6.
    trace = [Request(2, 6, arrival=0), Request(3, 2, arrival=1), Request(1, 1, arrival=2)]
    cont = simulate(trace, "continuous", max_batch=4, kv_blocks=3, block_size=4)
    assert cont["start"] == [0, 6, 6] and cont["finish"] == [5, 7, 6] and cont["steps"] == 8
    assert cont["latency"] == [6, 7, 5]
    free = simulate(trace, "continuous", max_batch=4)  # without the budget all three overlap
    assert free["start"] == [0, 1, 2] and free["steps"] == 6


def _random_trace(rng):
    return [Request(rng.randint(1, 30), rng.randint(1, 12), rng.randint(0, 25)) for _ in range(rng.randint(1, 15))]


def _running_at(result, trace, step):
    return [i for i in range(len(trace)) if result["start"][i] <= step <= result["finish"][i]]


@pytest.mark.parametrize("seed", range(40))
def test_invariants_on_random_traces(seed):
    rng = random.Random(seed)
    trace = _random_trace(rng)
    max_batch, block_size = rng.randint(1, 5), rng.choice([4, 8, 16])
    need = max(-(-(r.prompt_len + r.output_len) // block_size) for r in trace)
    budget = rng.choice([None, need, need + 3])
    results = {p: simulate(trace, p, max_batch=max_batch, kv_blocks=budget, block_size=block_size)
               for p in ("static", "static_full", "continuous")}
    for res in results.values():
        assert res["tokens"] == [r.output_len for r in trace]  # every token exactly once
        for i, r in enumerate(trace):
            assert res["start"][i] >= r.arrival and res["finish"][i] - res["start"][i] + 1 == r.output_len
            assert res["latency"][i] == res["finish"][i] - r.arrival + 1
            assert res["first_token"][i] == res["start"][i] - r.arrival + 1
        busy = 0
        for step in range(res["steps"]):  # a naive recount of slots and blocks step by step
            running = _running_at(res, trace, step)
            busy += len(running)
            assert len(running) <= max_batch
            if budget is not None:
                assert sum(-(-(trace[i].prompt_len + trace[i].output_len) // block_size) for i in running) <= budget
        assert res["steps"] == max(res["finish"]) + 1
        assert res["utilisation"] == pytest.approx(busy / (max_batch * res["steps"]))
    for policy in ("static", "static_full"):  # static admits only into an empty batch
        for step in range(results[policy]["steps"]):
            starting = [i for i in range(len(trace)) if results[policy]["start"][i] == step]
            if starting:  # nothing from an earlier batch still runs
                assert set(_running_at(results[policy], trace, step)) == set(starting)
    # continuous admits every request no later than static (with or without a budget): by induction in FIFO
    # order, when static admits request i into an empty batch every earlier request has finished there, so
    # it has finished in the continuous run too, which then holds only later requests, none admitted before i
    assert all(c <= s for c, s in zip(results["continuous"]["start"], results["static"]["start"], strict=True))
    assert results["continuous"]["steps"] <= results["static"]["steps"]


def test_bad_input():
    with pytest.raises(ValueError, match="output_len"):
        Request(3, 0)
    with pytest.raises(ValueError, match="policy"):
        simulate([Request(3, 2)], "greedy")
    with pytest.raises(ValueError, match="kv_blocks"):
        simulate([Request(30, 10)], kv_blocks=2, block_size=16)
    with pytest.raises(TypeError, match=r"requests\[0\]"):
        simulate([(3, 2)])
