"""Static against continuous batching (Orca, Yu et al. 2022): a step-level scheduler simulation.

A server decodes a batch of requests together: one forward pass (a *step*) gives every running request
its next token. Requests differ in length, so a batch wastes slots:

- static batching: a batch is formed from the waiting requests and runs until its LONGEST request is done;
  the slots of requests that finished early stay empty until then;
- static batching that waits for a full batch ("static_full"): as static, but an empty batch is refilled only
  once max_batch requests are waiting or no more will arrive (a stronger static baseline);
- continuous (iteration-level) batching: after every step, finished requests leave and waiting requests
  take their slots at the next step.

:func:`simulate` plays a trace of :class:`Request` s (prompt length, output length, arrival step) under either
policy with at most ``max_batch`` running requests and, optionally, a budget of KV-cache blocks. The model
of a step: a request admitted at step s does its prefill and emits its first token at step s, then one
token per step, so it finishes at s + output_len - 1; its latency is finish - arrival + 1 steps, and its
time to first token start - arrival + 1. Requests are
admitted first come, first served. With a block budget each running request holds
ceil((prompt_len + output_len) / block_size) blocks from admission to finish (its final size).

Left out on purpose: step times (a step is one unit; a real prefill step costs more than a decode step,
and chunked prefill evens that out), allocating blocks on demand with preemption (vLLM), priorities.
Chapter 11.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import validate

__all__ = ["Request", "simulate"]


@dataclass(frozen=True)
class Request:
    """One request: ``prompt_len`` prompt tokens, ``output_len`` tokens to generate, arriving at step ``arrival``."""
    prompt_len: int
    output_len: int
    arrival: int = 0

    def __post_init__(self):
        _check_request(self)


def _blocks(r: Request, block_size: int) -> int:
    return math.ceil((r.prompt_len + r.output_len) / block_size)  # KV blocks the request ends up filling


def _admit(requests, waiting, running, step, max_batch, kv_blocks, block_size) -> list[int]:
    """Pop from ``waiting`` the requests that start at ``step``: first come, first served, while a slot and
    (with kv_blocks) the blocks of the next one are free."""
    free = math.inf if kv_blocks is None else kv_blocks - sum(_blocks(requests[i], block_size) for i in running)
    admitted = []
    while waiting and len(running) + len(admitted) < max_batch and requests[waiting[0]].arrival <= step \
            and _blocks(requests[waiting[0]], block_size) <= free:
        admitted.append(waiting.pop(0))
        free -= _blocks(requests[admitted[-1]], block_size)
    return admitted


def _may_admit(policy: str, requests, waiting, running, step: int, max_batch: int) -> bool:
    """Continuous: at every step. Static: into an empty batch only; static_full: also only once the batch can be
    filled, or every remaining request has arrived."""
    if policy == "continuous":
        return True
    arrived = sum(requests[i].arrival <= step for i in waiting)
    return not running and (policy == "static" or arrived >= min(max_batch, len(waiting)))


def simulate(requests: list[Request], policy: str = "continuous", max_batch: int = 4,
             kv_blocks: int | None = None, block_size: int = 16) -> dict:
    """Play ``requests`` step by step under ``policy`` ("static", "static_full" or "continuous").

    Each step: when the policy allows, admit arrived requests (first come, first served) while a slot (and, with
    ``kv_blocks``, enough blocks) is free; then every running request emits one token; those done leave. Returns
    ``latency`` and ``first_token`` (per request: finish or start - arrival + 1), ``start``, ``finish``, ``steps``,
    ``tokens`` (per request) and ``utilisation`` = busy slot-steps / (max_batch * steps).
    """
    _check_simulate(requests, policy, max_batch, kv_blocks, block_size)
    n = len(requests)
    waiting, running = sorted(range(n), key=lambda i: (requests[i].arrival, i)), []
    start, finish, tokens = [None] * n, [None] * n, [0] * n
    step, busy = 0, 0
    while waiting or running:
        if _may_admit(policy, requests, waiting, running, step, max_batch):
            for i in _admit(requests, waiting, running, step, max_batch, kv_blocks, block_size):
                running.append(i)
                start[i] = step
        for i in running:  # one forward pass: a token for every running request
            tokens[i] += 1
        busy += len(running)
        for i in [i for i in running if tokens[i] == requests[i].output_len]:
            running.remove(i)
            finish[i] = step
        step += 1
    latency, first_token = ([at[i] - requests[i].arrival + 1 for i in range(n)] for at in (finish, start))
    return {"latency": latency, "first_token": first_token, "start": start, "finish": finish, "steps": step,
            "tokens": tokens, "utilisation": busy / (max_batch * step)}


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_request(r: Request) -> None:
    validate.integer("prompt_len", r.prompt_len)
    validate.integer("output_len", r.output_len)
    validate.integer("arrival", r.arrival, low=0)


def _check_simulate(requests, policy, max_batch, kv_blocks, block_size) -> None:
    if isinstance(requests, (str, bytes)) or not isinstance(requests, (list, tuple)) or not requests:
        raise TypeError(f"requests must be a non-empty list of Request, got {validate.describe(requests)}")
    for i, r in enumerate(requests):
        if not isinstance(r, Request):
            raise TypeError(f"requests[{i}] must be a Request, got {validate.describe(r)}")
    validate.choice("policy", policy, ("static", "static_full", "continuous"))
    validate.integer("max_batch", max_batch)
    validate.integer("block_size", block_size)
    if kv_blocks is not None:
        validate.integer("kv_blocks", kv_blocks)
        need = max(_blocks(r, block_size) for r in requests)
        if need > kv_blocks:
            raise ValueError(f"kv_blocks={kv_blocks} cannot hold the largest request, which needs {need} blocks of "
                             f"{block_size} tokens; it would wait forever")
