"""Decoding: turning a language model's next-token logits into text.

Each strategy is a small function over a batch of logits (B, V):

- :func:`greedy`: the most probable token, argmax_v z_v;
- :func:`apply_temperature`: z / tau (tau < 1 sharpens, tau > 1 flattens);
- :func:`top_k_filter`: keep the k largest logits;
- :func:`top_p_filter` (nucleus): keep the smallest set of most probable tokens whose mass reaches p;
- :func:`min_p_filter`: keep tokens with probability >= p_min * max probability;
- :func:`apply_repetition_penalty`: make tokens already in the text less likely;
- :func:`sample`: draw one token from softmax(z).

Filters set removed logits to -inf, so softmax gives them probability 0. :func:`generate` chains them
in the order transformers uses (penalty, temperature, top-k, top-p, min-p), then samples or takes the
argmax. :func:`beam_search` keeps the ``num_beams`` best partial sequences and ranks finished ones by
log-probability / length^alpha. :func:`distinct_n` and :func:`sequence_logprob` measure what comes out.
Chapter 9.

Left out on purpose: typical sampling, contrastive search, speculative decoding, batched beam search,
and a KV cache (chapter 11 plugs one into ``generate`` through ``cache=``).
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "greedy", "apply_temperature", "top_k_filter", "top_p_filter", "min_p_filter", "apply_repetition_penalty",
    "sample", "generate", "beam_search", "distinct_n", "sequence_logprob", "compare_strategies", "STRATEGIES",
]

# The strategies chapter 9 compares, as keyword arguments of generate (or of beam_search with num_beams).
STRATEGIES = {
    "greedy": {},
    "beam search (4 beams)": {"num_beams": 4, "length_penalty": 1.0},
    "greedy + rep. penalty 1.3": {"repetition_penalty": 1.3},
    "sampling, T = 1": {"do_sample": True},
    "sampling, T = 0.7": {"do_sample": True, "temperature": 0.7},
    "sampling, T = 1.5": {"do_sample": True, "temperature": 1.5},
    "top-k = 20": {"do_sample": True, "top_k": 20},
    "top-p = 0.9": {"do_sample": True, "top_p": 0.9},
    "min-p = 0.1": {"do_sample": True, "min_p": 0.1},
}


def _check_logits(logits) -> None:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() != 2:
        got = f"{type(logits).__name__} {tuple(getattr(logits, 'shape', ()))}"
        raise TypeError(f"logits must be a floating-point tensor of shape (B, V), got {got}")


def _check_settings(temperature=1.0, top_k=None, top_p=None, min_p=None, repetition_penalty=1.0) -> None:
    """Raise a ValueError naming the first decoding setting that is out of range."""
    rules = [("temperature", temperature, lambda v: v > 0, "a number > 0 (tau -> 0 is greedy)"),
             ("top_k", top_k, lambda v: isinstance(v, int) and v >= 1, "an int >= 1"),
             ("top_p", top_p, lambda v: 0 < v <= 1, "in (0, 1]"),
             ("min_p", min_p, lambda v: 0 <= v <= 1, "in [0, 1]"),
             ("repetition_penalty", repetition_penalty, lambda v: v > 0, "a number > 0 (1 = no penalty)")]
    for name, value, ok, expected in rules:
        if value is None and name in ("top_k", "top_p", "min_p"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
            raise ValueError(f"{name} must be {expected}, got {value!r}")


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most probable next token of each row: argmax_v z_v. (B, V) -> (B,)."""
    _check_logits(logits)
    return logits.argmax(dim=-1)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """z / tau. softmax(z / tau) is sharper for tau < 1 (tau -> 0: greedy) and flatter for tau > 1."""
    _check_logits(logits)
    _check_settings(temperature=temperature)
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row (and any tied with the k-th); set the rest to -inf."""
    _check_logits(logits)
    _check_settings(top_k=k)
    kth_largest = logits.topk(min(k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most probable tokens whose total probability reaches p.

    Equivalently, drop the least probable tokens as long as the mass dropped stays <= 1 - p: sort the
    probabilities in increasing order and remove token r if the cumulative mass up to it is <= 1 - p.
    The most probable token is always kept; p = 1 keeps every token of non-zero probability.
    """
    _check_logits(logits)
    _check_settings(top_p=p)
    probs, order = logits.softmax(dim=-1).sort(dim=-1)  # (B, V) each, increasing
    remove_sorted = probs.cumsum(dim=-1) <= 1 - p  # the tail whose total mass is at most 1 - p
    remove_sorted[:, -1] = False  # never remove the most probable token
    remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
    return logits.masked_fill(remove, float("-inf"))


def min_p_filter(logits: torch.Tensor, p_min: float) -> torch.Tensor:
    """Keep tokens whose probability is at least p_min times the top token's probability."""
    _check_logits(logits)
    _check_settings(min_p=p_min)
    probs = logits.softmax(dim=-1)  # (B, V)
    threshold = p_min * probs.amax(dim=-1, keepdim=True)  # (B, 1)
    return logits.masked_fill(probs < threshold, float("-inf"))  # the top token always survives


def apply_repetition_penalty(logits: torch.Tensor, previous_ids: torch.Tensor, penalty: float) -> torch.Tensor:
    """CTRL's penalty (Keskar et al. 2019): for every token already in ``previous_ids`` (B, T), a positive
    logit is divided by ``penalty`` and a negative one multiplied by it, so the token becomes less likely
    for penalty > 1. Each token is penalised once, however often it occurred."""
    _check_logits(logits)
    _check_settings(repetition_penalty=penalty)
    if previous_ids.dim() != 2 or previous_ids.shape[0] != logits.shape[0]:
        raise ValueError(f"previous_ids must have shape (B={logits.shape[0]}, T), got {tuple(previous_ids.shape)}")
    seen = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, previous_ids, True)  # (B, V)
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


def sample(logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One draw per row from softmax(z): (B, V) -> (B,). Rows filtered to -inf get probability 0."""
    _check_logits(logits)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(-1)


def _as_batch(model, prompt_ids) -> torch.Tensor:
    ids = torch.as_tensor(prompt_ids)
    if ids.is_floating_point() or ids.dim() not in (1, 2) or ids.shape[-1] == 0:
        raise ValueError(f"prompt_ids must be a non-empty list or tensor of ints, (T,) or (B, T), "
                         f"got {ids.dtype} {tuple(ids.shape)}")
    ids = ids.long().view(-1, ids.shape[-1])  # (B, T)
    return ids.to(next(model.parameters()).device)


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens: int, *, do_sample: bool = False, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, min_p: float | None = None,
             repetition_penalty: float = 1.0, eos_id: int | None = None, generator=None, cache=None,
             use_cache: bool = False):
    """Extend ``prompt_ids`` ((T,) or (B, T) ints) by up to ``max_new_tokens`` tokens; returns (B, T + new).

    Each step: logits of the last position -> repetition penalty -> (if sampling) temperature, top-k,
    top-p, min-p -> sample, or argmax when ``do_sample`` is False (greedy). A row that produced ``eos_id``
    is padded with ``eos_id`` afterwards; generation stops when every row has. ``model(ids, cache=None,
    last_only=True)`` must return the last position's logits (B, 1, V), as ``lmbook.model.Transformer`` does.
    With ``cache`` (chapter 11), only the new token is fed after the first step;
    ``use_cache=True`` makes one, a ``lmbook.kv_cache.KVCache`` sized for the prompt and the new tokens.
    """
    ids = _as_batch(model, prompt_ids)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    _check_settings(temperature, top_k, top_p, min_p, repetition_penalty)  # even those unused when greedy
    if use_cache and cache is None:
        from .kv_cache import KVCache  # chapter 11

        cache = KVCache.for_model(model, max_len=ids.shape[1] + max_new_tokens, batch=ids.shape[0])
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    fed = 0  # with a cache: how many tokens the model has already seen
    for _ in range(max_new_tokens):
        logits = model(ids[:, fed:], cache=cache, last_only=True)  # (B, 1, V): the next token's logits
        fed = ids.shape[1] if cache is not None else 0  # with a cache, feed only the new tokens next time
        z = logits[:, -1, :].float()  # (B, V)
        if repetition_penalty != 1.0:
            z = apply_repetition_penalty(z, ids, repetition_penalty)
        if do_sample:
            z = apply_temperature(z, temperature)
            z = top_k_filter(z, top_k) if top_k is not None else z
            z = top_p_filter(z, top_p) if top_p is not None else z
            z = min_p_filter(z, min_p) if min_p is not None else z
            next_ids = sample(z, generator)
        else:
            next_ids = greedy(z)
        if eos_id is not None:
            next_ids = torch.where(done, torch.full_like(next_ids, eos_id), next_ids)
            done |= next_ids == eos_id
        ids = torch.cat([ids, next_ids[:, None]], dim=1)  # (B, T + 1)
        if eos_id is not None and done.all():
            break
    return ids


@torch.no_grad()
def beam_search(model, prompt_ids, max_new_tokens: int, num_beams: int = 4, length_penalty: float = 1.0,
                eos_id: int | None = None):
    """Beam search for one prompt; returns the best sequence (1, T + n) and its score.

    Keep the ``num_beams`` partial continuations with the highest total log-probability. A continuation
    that ends in ``eos_id`` (or reaches ``max_new_tokens``) is finished and scored
    sum log p / n^alpha, n = number of generated tokens, alpha = ``length_penalty`` (alpha = 0: raw
    log-probability, which favours short outputs; alpha = 1: mean log-probability per token).
    Stops when no running beam can beat the worst of ``num_beams`` finished ones. The candidate and
    stopping rules follow transformers' ``generate(num_beams=..., early_stopping=False)``.
    """
    ids = _as_batch(model, prompt_ids)
    if ids.shape[0] != 1:
        raise ValueError(f"beam_search takes one prompt, got a batch of {ids.shape[0]}")
    if isinstance(num_beams, bool) or not isinstance(num_beams, int) or num_beams < 1:
        raise ValueError(f"num_beams must be an int >= 1, got {num_beams!r}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    beams, scores = ids, torch.zeros(1, device=ids.device)  # (n_running, T), (n_running,) total log-probs
    finished: list[tuple[float, torch.Tensor]] = []  # (normalised score, sequence)
    for step in range(1, max_new_tokens + 1):
        logprobs = model(beams, last_only=True)[:, -1, :].float().log_softmax(dim=-1)  # (n_running, V)
        totals = (scores[:, None] + logprobs).flatten()  # (n_running * V,)
        top_scores, top_index = totals.topk(min(2 * num_beams, totals.numel()))  # spares in case some end
        V = logprobs.shape[-1]
        next_beams, next_scores = [], []
        for rank, (score, index) in enumerate(zip(top_scores.tolist(), top_index.tolist(), strict=True)):
            seq = torch.cat([beams[index // V], beams.new_tensor([index % V])])
            if (index % V == eos_id or step == max_new_tokens) and rank < num_beams:
                finished.append((score / step**length_penalty, seq))  # step = generated length
            elif index % V != eos_id and len(next_beams) < num_beams:
                next_beams.append(seq)
                next_scores.append(score)
        finished = sorted(finished, key=lambda f: -f[0])[:num_beams]
        if step == max_new_tokens or not next_beams:
            break
        beams, scores = torch.stack(next_beams), torch.tensor(next_scores, device=ids.device)
        best_running = scores.max().item() / step**length_penalty  # the best a running beam could score
        if len(finished) == num_beams and best_running <= finished[-1][0]:
            break
    best_score, best = finished[0]
    return best[None], best_score


def distinct_n(sequences, n: int) -> float:
    """Diversity: (number of distinct n-grams) / (number of n-grams) over all ``sequences`` (lists of ids).

    1.0 means no n-gram repeats; repetitive text scores near 0 (Li et al. 2016).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    grams = [tuple(seq[i:i + n]) for seq in sequences for i in range(len(seq) - n + 1)]
    if not grams:
        raise ValueError(f"the sequences hold no {n}-gram: each needs at least {n} tokens")
    return len(set(grams)) / len(grams)


@torch.no_grad()
def sequence_logprob(model, ids, prompt_len: int) -> torch.Tensor:
    """Total log-probability (nats) the model gives the tokens after the prompt:
    sum_{t >= prompt_len} log p(x_t | x_<t). ids (B, T) -> (B,). Divide by T - prompt_len for a mean."""
    ids = _as_batch(model, ids)
    if isinstance(prompt_len, bool) or not isinstance(prompt_len, int) or not 1 <= prompt_len < ids.shape[1]:
        raise ValueError(f"prompt_len must be an int in [1, {ids.shape[1] - 1}], got {prompt_len!r}")
    logprobs = model(ids)[:, :-1].double().log_softmax(dim=-1)  # (B, T-1, V): position t predicts t+1
    picked = logprobs.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    return picked[:, prompt_len - 1:].sum(dim=-1)



def compare_strategies(model, prompt_ids, strategies: dict[str, dict], max_new_tokens: int, n_samples: int = 4,
                       eos_id: int | None = None, seed: int = 0) -> list[dict]:
    """Decode the same prompt with each named strategy and measure what comes out.

    ``strategies`` maps a name to keyword arguments of :func:`generate` (``do_sample``, ``temperature``, ...)
    or, with ``num_beams``, of :func:`beam_search`. Sampling strategies draw ``n_samples`` continuations
    (all seeded with ``seed``, so they share their random numbers); greedy and beam search give one, which
    counts ``n_samples`` times, since asking again gives the same text. Each row: name, the continuations
    (lists of ids, cut after ``eos_id``), distinct-1 and distinct-2 over the ``n_samples`` outputs, and the
    mean log-probability per token that the *unmodified* model gives them (high = what it finds likely).
    """
    rows = []
    prompt = _as_batch(model, prompt_ids)[:1]  # (1, T)
    for name, settings in strategies.items():
        settings = dict(settings)
        if "num_beams" in settings:
            outputs = beam_search(model, prompt, max_new_tokens, eos_id=eos_id, **settings)[0]
        else:
            n = n_samples if settings.get("do_sample") else 1
            generator = torch.Generator(device=prompt.device).manual_seed(seed)
            outputs = generate(model, prompt.expand(n, -1), max_new_tokens, eos_id=eos_id, generator=generator,
                               **settings)
        continuations, logprob, count = [], 0.0, 0
        for row in outputs:
            new = row[prompt.shape[1]:].tolist()
            if eos_id is not None and eos_id in new:
                new = new[:new.index(eos_id) + 1]  # keep the end token, drop the padding after it
            continuations.append(new)
            full = torch.cat([prompt[0], row.new_tensor(new)])[None]
            logprob += sequence_logprob(model, full, prompt.shape[1]).item()
            count += len(new)
        outputs_seen = continuations * (n_samples // len(continuations))  # a deterministic text n_samples times
        rows.append({"name": name, "continuations": continuations,
                     "distinct_1": distinct_n(outputs_seen, 1),
                     "distinct_2": distinct_n(outputs_seen, 2) if max(map(len, continuations)) > 1 else math.nan,
                     "mean_logprob": logprob / count})
    return rows
