"""Decoding as search, chapter 10: beam search, and best-of-N, which spends N samples on one answer.

Keep the ``num_beams`` best partial continuations by total log-probability, extend each by every token,
keep the best again; a continuation that produces the end token is set aside as finished, and finished ones
of different lengths are compared by log-probability / length^alpha, transformers' simpler form of the length
penalty of Wu et al. 2016 (GNMT divides by ((5 + length) / 6)^alpha). The candidate and
stopping rules are those of transformers' ``generate(num_beams=..., early_stopping=False)``, which the
tests match token for token. Best-of-N samples N continuations and keeps the one a scorer ranks highest
(by default the model's own mean log-probability per token; a verifier or a reward model in later chapters).

Left out on purpose: batches of prompts, diverse or constrained beam search, majority voting
(self-consistency, chapter 17), and a KV cache (each step feeds every beam's whole text again).
"""

from __future__ import annotations

import torch

from . import validate
from .decoding import _as_batch, _check_model, generate, sequence_logprob  # the checks of every decoder

__all__ = ["beam_search", "best_of_n"]


@torch.no_grad()
def beam_search(model, prompt_ids, max_new_tokens: int, num_beams: int = 4, length_penalty: float = 1.0,
                eos_id: int | None = None):
    """Beam search for one prompt ((T,) or (1, T) ints); returns the best sequence (1, T + n) and its score.

    Keep the ``num_beams`` partial continuations with the highest total log-probability. One that ends in
    ``eos_id`` (or reaches ``max_new_tokens``) is finished and scored sum log p / n^alpha, n = generated
    tokens, alpha = ``length_penalty`` (0: raw log-probability, which favours short outputs; 1: the mean
    per token; < 0 favours short ones further). Stops, heuristically, when the best running beam's current
    score, normalised by its current length, cannot beat the worst of ``num_beams`` finished ones (with
    alpha > 0 a longer continuation could still score better): the rules of transformers'
    ``generate(num_beams=..., early_stopping=False)``.
    Chapter 10.
    """
    ids = _check_beam_search(model, prompt_ids, max_new_tokens, num_beams, length_penalty, eos_id)  # (1, T)
    beams, scores = ids, torch.zeros(1, device=ids.device)  # (n_running, T), (n_running,) total log-probs
    finished: list[tuple[float, torch.Tensor]] = []  # (normalised score, sequence), best first
    for step in range(1, max_new_tokens + 1):
        logprobs = model(beams, last_only=True)[:, -1, :].float().log_softmax(dim=-1)  # (n_running, V)
        ended, running = _candidates(beams, scores, logprobs, num_beams, eos_id, step == max_new_tokens)
        finished = sorted(finished + [(s / step**length_penalty, seq) for s, seq in ended], key=lambda f: -f[0])
        finished = finished[:num_beams]
        if step == max_new_tokens or not running:
            break
        beams = torch.stack([seq for _, seq in running])
        scores = torch.tensor([s for s, _ in running], device=ids.device)
        best_running = scores.max().item() / step**length_penalty  # the best a running beam could score
        if len(finished) == num_beams and best_running <= finished[-1][0]:
            break
    best_score, best = finished[0]
    return best[None], best_score


def _candidates(beams, scores, logprobs, num_beams, eos_id, last_step):
    """The 2 * num_beams best extensions of the beams, as (total log-prob, sequence) pairs: those among the
    num_beams best that end in eos_id (or every one at the last step) finish; the others run on."""
    totals = (scores[:, None] + logprobs).flatten()  # (n_running * V,)
    top_scores, top_index = totals.topk(min(2 * num_beams, totals.numel()))  # spares in case some end
    V = logprobs.shape[-1]
    ended, running = [], []
    for rank, (score, index) in enumerate(zip(top_scores.tolist(), top_index.tolist(), strict=True)):
        seq = torch.cat([beams[index // V], beams.new_tensor([index % V])])
        if (index % V == eos_id or last_step) and rank < num_beams:
            ended.append((score, seq))
        elif index % V != eos_id and len(running) < num_beams:
            running.append((score, seq))
    return ended, running


@torch.no_grad()
def best_of_n(model, prompt_ids, n: int, max_new_tokens: int, scorer=None, generator=None, **sampling):
    """Sample n continuations of one prompt ((T,) or (1, T) ints) with ``generate(..., do_sample=True,
    **sampling)`` and keep the best: returns it (1, T + new), and the n scores. ``scorer(ids (n, T + new),
    prompt_len) -> (n,)`` ranks them; the default is the mean log-probability per new token under the model,
    sum_t log p(x_t | x_<t) / new. Every sample has max_new_tokens new tokens (no end token). Costs n
    generations. Chapter 10.
    """
    prompt = _check_best_of_n(model, prompt_ids, n, max_new_tokens, scorer, sampling)  # (1, T)
    samples = generate(model, prompt.expand(n, -1), max_new_tokens, do_sample=True, generator=generator,
                       **sampling)  # (n, T + new)
    if scorer is None:
        scores = sequence_logprob(model, samples, prompt.shape[1]) / (samples.shape[1] - prompt.shape[1])  # (n,)
    else:
        scores = torch.as_tensor(scorer(samples, prompt.shape[1]), dtype=torch.float64).to(samples.device)  # (n,)
    return samples[scores.argmax()][None], scores


# ----- checks: each raises a TypeError or ValueError naming the argument ----------------------------------

def _check_beam_search(model, prompt_ids, max_new_tokens, num_beams, length_penalty, eos_id) -> torch.Tensor:
    ids = _as_batch(model, prompt_ids, "prompt_ids")
    if ids.shape[0] != 1:
        raise ValueError(f"prompt_ids must be one prompt, (T,) or (1, T): beam_search takes one, got a batch of "
                         f"{ids.shape[0]}")
    validate.integer("max_new_tokens", max_new_tokens)
    validate.integer("num_beams", num_beams)
    validate.number("length_penalty", length_penalty)
    _check_model(model, eos_id)
    return ids


def _check_best_of_n(model, prompt_ids, n, max_new_tokens, scorer, sampling) -> torch.Tensor:
    ids = _check_beam_search(model, prompt_ids, max_new_tokens, 1, 1.0, None)  # one prompt, as beam search
    validate.integer("n", n)
    if scorer is not None and not callable(scorer):
        raise TypeError(f"scorer must be None or a function (ids, prompt_len) -> scores, got "
                        f"{validate.describe(scorer)}")
    unknown = set(sampling) - {"temperature", "top_k", "top_p", "min_p", "repetition_penalty"}
    if unknown:
        raise ValueError(f"best_of_n passes only sampling settings to generate (temperature, top_k, top_p, min_p, "
                         f"repetition_penalty; no eos_id: every sample has max_new_tokens), got {sorted(unknown)}")
    return ids
