"""Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): guess k tokens cheaply, let the large model
check all of them in ONE forward pass, keep the ones it agrees with.

- the acceptance rule for sampling: a token x drafted from q is accepted with probability min(1, p(x) / q(x));
  on rejection the token is drawn from the residual normalize(max(0, p - q)). :func:`verify_draft` does one
  such step and :func:`output_distribution` gives its result in closed form, which is exactly p;
- :func:`expected_tokens_per_pass`: with acceptance rate alpha per drafted token and k drafts, a target
  pass yields (1 - alpha^(k+1)) / (1 - alpha) tokens on average;
- :func:`prompt_lookup_draft`: a drafter with no second model (prompt lookup, n-gram drafting): find the
  last n tokens earlier in the context and propose the tokens that followed them;
- :func:`speculative_generate`: greedy speculative decoding with a KV cache: the target scores the last
  token and the k drafts in one cached pass, keeps the longest prefix of drafts equal to its own argmax
  choices plus one token of its own, and crops the rejected drafts from the cache (``KVCache.crop``). The
  output is token for token the output of plain greedy decoding.

Left out on purpose: sampling with a draft model inside ``speculative_generate`` (the rule is here, the loop
is greedy), draft models (the book's two models have different vocabularies), tree-shaped drafts
(Medusa, EAGLE) and batches. Chapter 11.
"""

from __future__ import annotations

import torch

from . import validate
from .kv_cache import KVCache

__all__ = ["residual_distribution", "verify_draft", "output_distribution", "expected_tokens_per_pass",
           "prompt_lookup_draft", "speculative_generate"]


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalize(max(0, p - q)) (V,): where to sample after a rejection. When p = q nothing is ever
    rejected and the residual is undefined; p is returned then."""
    _check_pq(p, q)
    r = (p - q).clamp(min=0)  # (V,)
    return r / r.sum() if r.sum() > 0 else p.clone()


def verify_draft(p: torch.Tensor, q: torch.Tensor, x: int,
                 generator: torch.Generator | None = None) -> tuple[int, bool]:
    """One step of the rule: draft token x ~ q is kept with probability min(1, p(x) / q(x)), else a token
    is drawn from the residual. p, q: (V,) target and draft distributions. Returns (token, accepted)."""
    _check_verify(p, q, x, generator)
    u = torch.rand((), dtype=p.dtype, generator=generator)
    if u * q[x] < p[x]:  # u < p(x) / q(x), without dividing
        return x, True
    return int(torch.multinomial(residual_distribution(p, q), 1, generator=generator)), False


def output_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The distribution of the token :func:`verify_draft` returns when x ~ q, in closed form (V,):

        P(y) = q(y) min(1, p(y)/q(y)) + (1 - sum_x q(x) min(1, p(x)/q(x))) * residual(y)
             = min(q(y), p(y)) + (1 - sum_x min(q(x), p(x))) * residual(y)  = p(y).
    """
    _check_pq(p, q)
    kept = torch.minimum(p, q)  # (V,) drafted and accepted
    return kept + (1 - kept.sum()) * residual_distribution(p, q)


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """Tokens one target pass yields when each of k drafts is accepted with probability alpha (independently,
    and only while all before it were): 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha).
    alpha in [0, 1]; k = 0 (no draft) gives 1, plain decoding."""
    _check_expected(alpha, k)
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def prompt_lookup_draft(ids: list[int], k: int, max_ngram: int = 3) -> list[int]:
    """Up to k draft tokens copied from the context: for n = max_ngram, ..., 1, find the first earlier place
    where the last n tokens of ``ids`` occur and return the (at most k) tokens that followed it; [] if the
    last token never occurred before. The rule of transformers' prompt-lookup candidate generator."""
    _check_lookup(ids, k, max_ngram)
    T = len(ids)
    for n in range(min(max_ngram, T - 1), 0, -1):
        tail = ids[T - n:]
        for i in range(T - n):  # windows ids[i : i + n] that have a token after them
            if ids[i:i + n] == tail:
                return list(ids[i + n:i + n + k])
    return []


@torch.no_grad()
def speculative_generate(model, prompt_ids: torch.Tensor, max_new_tokens: int, drafter=prompt_lookup_draft,
                         k: int = 4) -> tuple[torch.Tensor, dict]:
    """Greedy decoding of max_new_tokens after prompt_ids (T,). Per pass: d = drafter(ids, k) (at most k ids);
    the target reads [last, d_1 .. d_m] through the cache, keeps d_1 .. d_j while each equals its argmax,
    adds its own argmax after d_j, and crops the rest from the cache. Returns (ids (T + max_new_tokens,),
    stats: target_passes, drafted, accepted, tokens_per_pass)."""
    _check_generate(model, prompt_ids, max_new_tokens, drafter, k)
    ids = prompt_ids.tolist()
    end = len(ids) + max_new_tokens
    cache = KVCache.for_model(model, max_len=end + k)
    device = next(model.parameters()).device
    nxt = int(model(prompt_ids[None].to(device), cache=cache, last_only=True)[0, -1].argmax())  # prefill pass
    passes, drafted, accepted = 1, 0, 0
    while len(ids) + 1 < end:
        ids.append(nxt)  # the target's own token, not yet in the cache
        draft = list(drafter(ids, k))[:min(k, end - len(ids) - 1)]
        logits = model(torch.tensor([[nxt, *draft]], device=device), cache=cache)[0]  # (1 + m, V)
        choice = logits.argmax(-1).tolist()  # choice[i]: the target's token after draft[:i]
        j = 0  # drafts kept: accept while draft[j] is the target's own choice
        while j < len(draft) and draft[j] == choice[j]:
            j += 1
        ids += draft[:j]
        nxt = choice[j]
        cache.crop(len(ids))  # forget the rejected drafts
        passes, drafted, accepted = passes + 1, drafted + len(draft), accepted + j
    ids.append(nxt)
    stats = {"target_passes": passes, "drafted": drafted, "accepted": accepted,
             "tokens_per_pass": max_new_tokens / passes}
    return torch.tensor(ids[:end]), stats


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_dist(name: str, p) -> None:
    validate.tensor(name, p, ndim=1)
    if p.numel() == 0 or (p < 0).any() or abs(float(p.sum()) - 1) > 1e-6:
        raise ValueError(f"{name} must be a probability vector (V,) with entries >= 0 summing to 1, got "
                         f"{validate.describe(p)} summing to {float(p.sum()):.6g}")


def _check_pq(p, q) -> None:
    _check_dist("p", p)
    _check_dist("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape (V,), got {tuple(p.shape)} and {tuple(q.shape)}")


def _check_verify(p, q, x, generator) -> None:
    _check_pq(p, q)
    validate.integer("x", x, low=0, high=p.numel() - 1)
    if q[x] <= 0:
        raise ValueError(f"x={x} has q(x) = 0: a token drawn from q cannot be one q never proposes")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be None or a torch.Generator, got {validate.describe(generator)}")


def _check_expected(alpha, k) -> None:
    validate.number("alpha", alpha, low=0, high=1)
    validate.integer("k", k, low=0)


def _check_lookup(ids, k, max_ngram) -> None:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)) or not ids:
        raise TypeError(f"ids must be a non-empty list of token ids, got {validate.describe(ids)}")
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise ValueError(f"ids[{i}] must be a token id (an int >= 0), got {t!r}")
    validate.integer("k", k)
    validate.integer("max_ngram", max_ngram)


def _check_generate(model, prompt_ids, max_new_tokens, drafter, k) -> None:
    config = getattr(model, "config", None)
    if not isinstance(model, torch.nn.Module) or not hasattr(config, "vocab_size"):
        raise TypeError(f"model must be a Transformer (a module with a config), got {validate.describe(model)}")
    validate.token_ids("prompt_ids", prompt_ids, config.vocab_size, ndim=1)
    if prompt_ids.numel() == 0:
        raise ValueError("prompt_ids must hold at least one token, got an empty tensor")
    validate.integer("max_new_tokens", max_new_tokens)
    if not callable(drafter) or isinstance(drafter, type):
        raise TypeError(f"drafter must be a function (ids, k) -> list of ids, got {validate.describe(drafter)}")
    validate.integer("k", k)
