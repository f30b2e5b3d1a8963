"""Decoding, chapter 10: turning a language model's next-token logits into text, one token at a time.
Each strategy is a small function over a batch of logits (B, V): greedy (argmax), temperature (z / tau), top-k,
top-p (nucleus), min-p, a repetition penalty, and sample (one draw from softmax(z)). Filters set removed logits to
-inf (probability 0). ``next_token`` chains them in transformers' order, ``generate`` calls it once per new token,
and ``distinct_n``, ``sequence_logprob`` and ``compare_strategies`` measure what comes out. Left out on purpose:
beam search and best-of-N (``lmbook.beam_search``), typical sampling, contrastive search, speculative decoding, and
a KV cache (chapter 11 plugs one into ``generate`` through ``cache=``).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import torch
from torch import nn

from . import validate

__all__ = [
    "greedy", "apply_temperature", "top_k_filter", "top_p_filter", "min_p_filter", "apply_repetition_penalty",
    "sample", "next_token", "generate", "distinct_n", "sequence_logprob", "compare_strategies", "STRATEGIES",
]

# The strategies chapter 10 compares, as keyword arguments of generate (or of beam_search with num_beams).
STRATEGIES = {
    "greedy": {}, "beam search (4 beams)": {"num_beams": 4, "length_penalty": 1.0},
    "greedy + rep. penalty 1.3": {"repetition_penalty": 1.3},
    "sampling, T = 1": {"do_sample": True}, "sampling, T = 0.7": {"do_sample": True, "temperature": 0.7},
    "sampling, T = 1.5": {"do_sample": True, "temperature": 1.5}, "top-k = 20": {"do_sample": True, "top_k": 20},
    "top-p = 0.9": {"do_sample": True, "top_p": 0.9}, "min-p = 0.1": {"do_sample": True, "min_p": 0.1}}


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most probable next token of each row: argmax_v z_v. logits (B, V) -> (B,) ids. Chapter 10."""
    _check_logits(logits)
    return logits.argmax(dim=-1)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """z / tau, logits (B, V). softmax(z / tau) is sharper for tau < 1 (tau -> 0: greedy), flatter for tau > 1.
    Chapter 10."""
    _check_logits(logits, temperature=("temperature", temperature))
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row of (B, V) (and any tied with the k-th); the rest -> -inf. Chapter 10."""
    _check_logits(logits, top_k=("k", k))
    kth_largest = logits.topk(min(k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most probable tokens whose total probability reaches p.

    Equivalently, drop the least probable tokens as long as the mass dropped stays <= 1 - p: sort the
    probabilities in increasing order and remove token r if the cumulative mass up to it is <= 1 - p.
    The most probable token is always kept; p = 1 keeps every token of non-zero probability.
    logits (B, V) -> (B, V). Chapter 10.
    """
    _check_logits(logits, top_p=("p", p))
    probs, order = logits.softmax(dim=-1).sort(dim=-1)  # (B, V) each, increasing
    remove_sorted = probs.cumsum(dim=-1) <= 1 - p  # the tail whose total mass is at most 1 - p
    remove_sorted[:, -1] = False  # never remove the most probable token
    remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
    return logits.masked_fill(remove, float("-inf"))


def min_p_filter(logits: torch.Tensor, p_min: float) -> torch.Tensor:
    """Keep the tokens v with p_v >= p_min * max_u p_u, p = softmax(z); logits (B, V) -> (B, V). Chapter 10."""
    _check_logits(logits, min_p=("p_min", p_min))
    probs = logits.softmax(dim=-1)  # (B, V)
    threshold = p_min * probs.amax(dim=-1, keepdim=True)  # (B, 1)
    return logits.masked_fill(probs < threshold, float("-inf"))  # the top token always survives


def apply_repetition_penalty(logits: torch.Tensor, previous_ids: torch.Tensor, penalty: float) -> torch.Tensor:
    """The repetition penalty of CTRL (Keskar et al. 2019) as transformers implements it: for every token
    already in ``previous_ids`` (B, T), a positive logit is divided by ``penalty`` and a negative one
    multiplied by it, so for penalty > 1 its logit never increases (it strictly decreases unless it is 0; CTRL's
    paper divides every seen logit, which raises a negative one). Its probability usually falls too, but not
    always: the softmax also hands it part of the mass freed by other penalised tokens. Each token is penalised
    once, however often it occurred; the prompt counts as text. logits (B, V). Chapter 10."""
    _check_logits(logits, previous_ids, repetition_penalty=("penalty", penalty))
    seen = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, previous_ids, True)  # (B, V)
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


def sample(logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One draw per row from softmax(z): (B, V) -> (B,). Logits of -inf get probability 0. Chapter 10."""
    _check_logits(logits, generator=generator)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(-1)


def next_token(logits, previous_ids, *, do_sample=False, temperature=1.0, top_k=None, top_p=None, min_p=None,
               repetition_penalty=1.0, generator=None) -> torch.Tensor:
    """The next token of each row, from its logits (B, V) and the text so far, previous_ids (B, T): (B,) ids.

    The repetition penalty, then the argmax (greedy), or, when do_sample, temperature, top-k, top-p, min-p
    and one draw: transformers' order. A setting left at None (or 1.0) is skipped. Chapter 10.
    """
    _check_next_token(logits, previous_ids, do_sample, temperature, top_k, top_p, min_p, repetition_penalty, generator)
    z = apply_repetition_penalty(logits, previous_ids, repetition_penalty) if repetition_penalty != 1.0 else logits
    if not do_sample:
        return greedy(z)
    z = apply_temperature(z, temperature)
    z = top_k_filter(z, top_k) if top_k is not None else z
    z = top_p_filter(z, top_p) if top_p is not None else z
    z = min_p_filter(z, min_p) if min_p is not None else z
    return sample(z, generator)


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens: int, *, do_sample: bool = False, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, min_p: float | None = None,
             repetition_penalty: float = 1.0, eos_id: int | None = None, generator=None, cache=None,
             use_cache: bool = False):
    """Extend ``prompt_ids`` ((T,) or (B, T) ints) by up to ``max_new_tokens`` tokens; returns (B, T + new).

    Each step the model gives the next token's logits (B, V) and ``next_token`` picks the token. A row that
    produced ``eos_id`` is padded with it; generation stops when every row has. ``cache`` and ``use_cache``
    (chapter 11's KV cache, in ``_logits_step``) change the cost of the logits, not the text. Chapter 10.
    """
    ids = _check_generate(model, prompt_ids, max_new_tokens, do_sample, temperature, top_k, top_p, min_p,
                          repetition_penalty, eos_id, generator, cache, use_cache)  # (B, T) on the model's device
    logits_of = _logits_step(model, ids, max_new_tokens, cache, use_cache)  # ids (B, T) -> logits (B, V)
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)  # rows that produced eos_id
    for _ in range(max_new_tokens):
        next_ids = next_token(logits_of(ids), ids, do_sample=do_sample, temperature=temperature, top_k=top_k,
                              top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty, generator=generator)
        if eos_id is not None:
            next_ids = torch.where(done, torch.full_like(next_ids, eos_id), next_ids)  # finished rows: padding
            done |= next_ids == eos_id
        ids = torch.cat([ids, next_ids[:, None]], dim=1)  # (B, T + 1)
        if done.all():
            break
    return ids


def _logits_step(model, ids, max_new_tokens, cache=None, use_cache=False):
    """``generate``'s step: the text so far, ids (B, T) -> the next token's logits (B, V). Without a cache the
    model reads the whole text every step; with a KV cache (chapter 11; ``use_cache=True`` makes one for the
    prompt and the new tokens) only the tokens the cache has not seen: the prompt, then the newest token."""
    if use_cache and cache is None:
        from .kv_cache import KVCache  # chapter 11
        cache = KVCache.for_model(model, max_len=ids.shape[1] + max_new_tokens, batch=ids.shape[0])

    def logits_of(ids):
        unseen = ids if cache is None else ids[:, int(cache.seq_len):]  # (B, T) or (B, T - cached)
        return model(unseen, cache=cache, last_only=True)[:, -1, :].float()  # (B, V)

    return logits_of


def distinct_n(sequences, n: int) -> float:
    """Diversity: (number of distinct n-grams) / (number of n-grams) over all ``sequences`` (lists of ids); 1.0
    means no n-gram repeats. Li et al. 2016 divide by the number of generated tokens instead. Chapter 10."""
    _check_distinct_n(sequences, n)
    grams = [tuple(seq[i:i + n]) for seq in sequences for i in range(len(seq) - n + 1)]
    return len(set(grams)) / len(grams)


@torch.no_grad()
def sequence_logprob(model, ids, prompt_len: int) -> torch.Tensor:
    """Total log-probability (nats) the model gives the tokens after the prompt:
    sum_{t >= prompt_len} log p(x_t | x_<t). ids (B, T) -> (B,). Divide by T - prompt_len for a mean. Ch. 10"""
    ids = _as_batch(model, ids, "ids")  # (B, T) on the model's device
    validate.integer("prompt_len", prompt_len, low=1, high=ids.shape[1] - 1)
    logprobs = model(ids)[:, :-1].double().log_softmax(dim=-1)  # (B, T-1, V): position t predicts t+1
    picked = logprobs.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    return picked[:, prompt_len - 1:].sum(dim=-1)


def compare_strategies(model, prompt_ids, strategies: dict[str, dict], max_new_tokens: int, n_samples: int = 4,
                       eos_id: int | None = None, seed: int = 0) -> list[dict]:
    """Decode one prompt with each named strategy (keyword arguments of :func:`generate`, or with ``num_beams``
    of ``beam_search``) and measure the outputs. Sampling draws ``n_samples`` (seeded); greedy and beam search give
    one, counted ``n_samples`` times. Each row: name, continuations (cut after ``eos_id``), distinct-1 and -2 of
    the outputs pooled (diversity *across* outputs: a text counted n times scores at most 1/n), distinct_2_within
    (the mean of each output's own distinct-2: repetition *within* a text), and the mean log-probability per
    token under the *unmodified* model. Chapter 10."""
    prompt = _check_compare(model, prompt_ids, strategies, max_new_tokens, n_samples, eos_id, seed)  # (1, T)
    rows = []
    for name, settings in strategies.items():
        continuations = _continuations(model, prompt, dict(settings), max_new_tokens, n_samples, eos_id, seed)
        logprob = sum(sequence_logprob(model, torch.cat([prompt[0], prompt.new_tensor(new)])[None],
                                       prompt.shape[1]).item() for new in continuations)
        outputs_seen = continuations * (n_samples // len(continuations))  # a deterministic text n_samples times
        rows.append({"name": name, "continuations": continuations,
                     "distinct_1": distinct_n(outputs_seen, 1),
                     "distinct_2": distinct_n(outputs_seen, 2) if max(map(len, continuations)) > 1 else math.nan,
                     "distinct_2_within": _mean_within(continuations),
                     "mean_logprob": logprob / sum(map(len, continuations))})
    return rows


def _mean_within(continuations) -> float:
    """The mean of each continuation's own distinct-2 (those with at least two tokens); nan if none has."""
    values = [distinct_n([c], 2) for c in continuations if len(c) > 1]
    return sum(values) / len(values) if values else math.nan


def _continuations(model, prompt, settings, max_new_tokens, n_samples, eos_id, seed) -> list[list[int]]:
    """The new tokens of each output of one strategy, cut after eos_id."""
    if "num_beams" in settings:
        from .beam_search import beam_search  # its own module, which uses this one's checks
        outputs = beam_search(model, prompt, max_new_tokens, eos_id=eos_id, **settings)[0]
    else:
        n = n_samples if settings.get("do_sample") else 1
        generator = torch.Generator(device=prompt.device).manual_seed(seed)
        outputs = generate(model, prompt.expand(n, -1), max_new_tokens, eos_id=eos_id, generator=generator, **settings)
    continuations = []
    for row in outputs:
        new = row[prompt.shape[1]:].tolist()
        continuations.append(new[:new.index(eos_id) + 1] if eos_id is not None and eos_id in new else new)
    return continuations


# ----- checks: each raises a TypeError or ValueError naming the argument ----------------------------------

_SETTINGS = {  # setting: (its type, its valid range, what it must be)
    "temperature": (Real, lambda v: v > 0, "a number > 0 (tau -> 0 is greedy)"),
    "top_k": (Integral, lambda v: v >= 1, "an int >= 1"),
    "top_p": (Real, lambda v: 0 < v <= 1, "in (0, 1]"),
    "min_p": (Real, lambda v: 0 <= v <= 1, "in [0, 1]"),
    "repetition_penalty": (Real, lambda v: v > 0, "a number > 0 (1 = no penalty)"),
}
_ABSENT = object()  # a filter without previous_ids


def _check_setting(setting: str, name: str, value) -> None:
    """A decoding setting, passed as the parameter ``name`` (a filter's own name for it, or the setting's)."""
    kind, ok, expected = _SETTINGS[setting]
    got = f"got {value!r}" if name == setting else f"got {name}={value!r}"
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{setting} must be {expected}, {got}")
    if not math.isfinite(value) or not ok(value):
        raise ValueError(f"{setting} must be {expected}, {got}")


def _check_logits(logits, previous_ids=_ABSENT, generator=None, **settings) -> None:
    """logits (B, V), each row with a finite logit; previous_ids (B, T) in [0, V); setting=(parameter, value)."""
    validate.tensor("logits", logits, finite=False)
    if logits.dim() != 2 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (B, V) with V >= 1, got shape {tuple(logits.shape)}")
    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise ValueError("logits must hold no NaN or +inf (-inf marks a removed token)")
    if (logits == float("-inf")).all(dim=-1).any():
        raise ValueError("every row of logits needs a finite logit: all its tokens were removed")
    if previous_ids is not _ABSENT:
        validate.token_ids("previous_ids", previous_ids, logits.shape[-1], ndim=2)
        if previous_ids.shape[0] != logits.shape[0]:
            raise ValueError(f"previous_ids must have shape (B={logits.shape[0]}, T), got {tuple(previous_ids.shape)}")
    _check_generator(generator)
    for setting, (name, value) in settings.items():
        _check_setting(setting, name, value)


def _check_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {validate.describe(generator)}")


def _check_next_token(logits, previous_ids, *settings) -> None:
    _check_logits(logits, previous_ids)
    _check_settings(*settings)


def _check_settings(do_sample, temperature, top_k, top_p, min_p, repetition_penalty, generator) -> None:
    """The settings of generate and next_token, all checked, even those greedy decoding does not use."""
    validate.boolean("do_sample", do_sample)
    for setting, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p),
                           ("repetition_penalty", repetition_penalty)):
        if value is not None or setting in ("temperature", "repetition_penalty"):
            _check_setting(setting, setting, value)
    _check_generator(generator)


def _check_model(model, eos_id=None) -> int:
    """A language model: an nn.Module with config.vocab_size (returned); eos_id, if given, one of its ids."""
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    if not isinstance(model, nn.Module) or isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError("model must be a language model (an nn.Module with config.vocab_size, such as "
                        f"lmbook.model.Transformer), got {validate.describe(model)}")
    if eos_id is not None:
        validate.integer("eos_id", eos_id, low=0, high=vocab_size - 1)
    return vocab_size


def _as_batch(model, value, name: str) -> torch.Tensor:
    """Token ids (T,) or (B, T), as a list or an integer tensor, checked against the model's vocabulary:
    a (B, T) long tensor on the model's device."""
    vocab_size = _check_model(model)
    if not isinstance(value, (list, tuple, torch.Tensor)):
        raise TypeError(f"{name} must be a list or an integer tensor of token ids, got {validate.describe(value)}")
    try:
        ids = value if isinstance(value, torch.Tensor) else torch.tensor(value)
    except (TypeError, ValueError, RuntimeError):
        ids = torch.empty(0)  # ragged rows or not numbers: reported below
    if ids.numel() == 0:
        raise ValueError(f"{name} must be a non-empty list or tensor of token ids, (T,) or (B, T) with rows of equal "
                         f"length, got {validate.describe(value)}")
    validate.tensor(name, ids, ndim=(1, 2), kind="int")
    if ids.min() < 0 or ids.max() >= vocab_size:
        bad = ids[(ids < 0) | (ids >= vocab_size)].flatten()[0].item()
        raise ValueError(f"{name} must hold token ids in [0, {vocab_size - 1}] (max id {vocab_size - 1}), found {bad}")
    return ids.long().view(-1, ids.shape[-1]).to(next(model.parameters()).device)  # (B, T)


def _check_generate(model, prompt_ids, max_new_tokens, do_sample, temperature, top_k, top_p, min_p,
                    repetition_penalty, eos_id, generator, cache, use_cache) -> torch.Tensor:
    ids = _as_batch(model, prompt_ids, "prompt_ids")
    validate.integer("max_new_tokens", max_new_tokens)
    _check_settings(do_sample, temperature, top_k, top_p, min_p, repetition_penalty, generator)
    _check_model(model, eos_id)
    if cache is not None and (isinstance(cache, type) or not hasattr(cache, "seq_len") or not hasattr(cache, "update")):
        raise TypeError(f"cache must be a KV cache with seq_len and update(), got {validate.describe(cache)}")
    validate.boolean("use_cache", use_cache)
    return ids


def _check_distinct_n(sequences, n) -> None:
    validate.sequence("sequences", sequences, what="token-id lists")
    for i, seq in enumerate(sequences):
        validate.sequence(f"sequences[{i}]", seq, empty=True, what="token ids")
        for token in seq:
            validate.integer(f"sequences[{i}] item", token, low=0)
    validate.integer("n", n)
    if all(len(seq) < n for seq in sequences):
        raise ValueError(f"sequences hold no {n}-gram: at least one needs {n} tokens (n={n})")


def _check_compare(model, prompt_ids, strategies, max_new_tokens, n_samples, eos_id, seed) -> torch.Tensor:
    prompt = _as_batch(model, prompt_ids, "prompt_ids")[:1]  # (1, T): the first prompt
    known = set(_SETTINGS) | {"do_sample", "num_beams", "length_penalty"}
    if not isinstance(strategies, dict) or not strategies or not all(
            isinstance(name, str) and isinstance(kw, dict) and set(kw) <= known for name, kw in strategies.items()):
        raise ValueError(f"strategies must be a non-empty dict of name -> settings among {sorted(known)}, got "
                         f"{validate.describe(strategies)}")
    validate.integer("max_new_tokens", max_new_tokens)
    validate.integer("n_samples", n_samples)
    _check_model(model, eos_id)
    validate.integer("seed", seed, low=0)
    return prompt
