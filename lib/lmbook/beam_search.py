"""Beam search, chapter 9: decoding as a search for the most probable continuation, not one token at a time.

Keep the ``num_beams`` best partial continuations by total log-probability, extend each by every token,
keep the best again; a continuation that produces the end token is set aside as finished, and finished ones
of different lengths are compared by log-probability / length^alpha (Wu et al. 2016). The candidate and
stopping rules are those of transformers' ``generate(num_beams=..., early_stopping=False)``, which the
tests match token for token.

Left out on purpose: batches of prompts, diverse or constrained beam search, and a KV cache (each step
feeds every beam's whole text again).
"""

from __future__ import annotations

import torch

from . import validate
from .decoding import _as_batch, _check_model  # the prompt, model and end-token checks of every decoder

__all__ = ["beam_search"]


@torch.no_grad()
def beam_search(model, prompt_ids, max_new_tokens: int, num_beams: int = 4, length_penalty: float = 1.0,
                eos_id: int | None = None):
    """Beam search for one prompt ((T,) or (1, T) ints); returns the best sequence (1, T + n) and its score.

    Keep the ``num_beams`` partial continuations with the highest total log-probability. One that ends in
    ``eos_id`` (or reaches ``max_new_tokens``) is finished and scored sum log p / n^alpha, n = generated
    tokens, alpha = ``length_penalty`` (0: raw log-probability, which favours short outputs; 1: the mean
    per token; < 0 favours short ones further). Stops when no running beam can beat the worst of
    ``num_beams`` finished ones: the rules of transformers' ``generate(num_beams=..., early_stopping=False)``.
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
