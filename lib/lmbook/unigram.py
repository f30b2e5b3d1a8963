"""Chapter 5: the two other subword algorithms, both built on a unigram model of the pieces.

- **WordPiece** merges pairs like BPE, but picks the pair whose merge most raises the likelihood of a unigram
  model of the corpus: the pair of highest log P(xy) / (P(x) P(y)) (:func:`wordpiece_score`).
- **The Unigram language model** (SentencePiece) goes the other way: start from many candidate pieces with
  probabilities p(x), segment a word by its most probable segmentation (:func:`unigram_viterbi`), fit the
  p(x) by EM over all segmentations (:func:`unigram_em`), and prune the pieces whose removal costs the
  least likelihood (:func:`unigram_prune`).

Log-probabilities are dicts {piece: log p}; -inf marks a piece of probability 0 (EM produces them).
Left out on purpose: WordPiece's ``##`` continuation prefix and greedy longest-match encoding,
SentencePiece's whitespace symbol, subword sampling, and the suffix-array seeding of the candidates.
"""

from __future__ import annotations

import math
from collections import defaultdict

from . import validate

__all__ = ["wordpiece_score", "unigram_viterbi", "unigram_em", "unigram_prune"]


def wordpiece_score(pair_count: float, left_count: float, right_count: float, total: float) -> float:
    """WordPiece's merge score log P(xy) / (P(x) P(y)) with P(.) = count / total: the PMI of the pair.

    BPE merges the most *frequent* pair; WordPiece the pair whose merge most raises the likelihood of a
    unigram model of the corpus, which is this ratio (the frequency of xy relative to chance). Chapter 5.
    """
    _check_wordpiece_score(pair_count, left_count, right_count, total)
    return math.log((pair_count / total) / ((left_count / total) * (right_count / total)))


def unigram_viterbi(word: str, logp: dict[str, float]) -> tuple[list[str], float]:
    """The most probable segmentation of ``word`` under a unigram model: argmax_x sum_i log p(x_i).

    Dynamic programming over end positions: best[j] = max_i best[i] + log p(word[i:j]). ``logp`` maps
    pieces to log-probabilities (<= 0). Returns the pieces and their total log-probability (-inf if no
    segmentation exists). Chapter 5.
    """
    _check_word_and_logp(word, logp)
    return _viterbi(word, logp)


def unigram_em(word_counts: dict[str, int], vocab, n_iter: int = 10) -> tuple[dict[str, float], list[float]]:
    """Fit the piece probabilities of a Unigram LM tokenizer by EM (chapter 5).

    ``vocab`` is a list of pieces (start: uniform) or a dict piece -> log p (start: those values).
    E-step: expected count of each piece over all segmentations of each word, weighted by the word's count.
    M-step: p(x) = expected count(x) / total expected count.
    Returns the log-probabilities and the corpus log-likelihood sum_w c(w) log p(w), where p(w) sums over
    all segmentations of w, before each M-step (EM never lets it decrease).
    """
    _check_unigram_em(word_counts, vocab, n_iter)
    logp, history = _initial_logp(vocab), []
    for _ in range(n_iter):
        terms, loglik = defaultdict(list), 0.0
        for word, c in word_counts.items():
            log_counts, logp_word = _expected_log_counts(word, logp)
            loglik += c * logp_word
            for piece, e in log_counts.items():
                terms[piece].append(math.log(c) + e)
        history.append(loglik)
        log_totals = {piece: _logsumexp(t) for piece, t in terms.items()}
        log_z = _logsumexp(list(log_totals.values()))
        logp = {piece: log_totals.get(piece, -math.inf) - log_z for piece in logp}
    return logp, history


def unigram_prune(word_counts: dict[str, int], logp: dict[str, float], keep: int,
                  n_iter: int = 2) -> dict[str, float]:
    """Shrink a Unigram vocabulary to ``keep`` pieces, one piece per round (chapter 5).

    loss(x) = L - L_without_x, with L = sum_w c(w) log p(best segmentation of w) (Viterbi). Each round
    removes the multi-character piece of smallest loss, then re-fits the rest with ``n_iter`` EM steps.
    Single characters are never removed, so every word stays encodable. (SentencePiece removes a fixed
    fraction per round; one at a time keeps the idea visible.)
    """
    _check_unigram_prune(word_counts, logp, keep, n_iter)
    logp = dict(logp)

    def loglik(lp):
        return sum(c * _viterbi(w, lp)[1] for w, c in word_counts.items())

    while len(logp) > keep:
        candidates = sorted(p for p in logp if len(p) > 1)
        if not candidates:
            break
        base = loglik(logp)
        loss = {p: base - loglik({q: v for q, v in logp.items() if q != p}) for p in candidates}
        del logp[min(candidates, key=lambda p: loss[p])]
        logp, _ = unigram_em(word_counts, logp, n_iter=n_iter)
    return logp


def _initial_logp(vocab) -> dict[str, float]:
    """A dict {piece: log p} is kept; a list of pieces starts uniform, log p = -log |vocab|."""
    return dict(vocab) if isinstance(vocab, dict) else {piece: -math.log(len(vocab)) for piece in vocab}


def _viterbi(word: str, logp: dict[str, float]) -> tuple[list[str], float]:
    """unigram_viterbi without the argument checks (unigram_prune calls it thousands of times)."""
    best, back = [0.0] + [-math.inf] * len(word), [0] * (len(word) + 1)
    for j in range(1, len(word) + 1):
        for i in range(j):
            piece = word[i:j]
            if piece in logp and best[i] + logp[piece] > best[j]:
                best[j], back[j] = best[i] + logp[piece], i
    if best[-1] == -math.inf:
        return [], -math.inf
    pieces, j = [], len(word)
    while j > 0:
        pieces.append(word[back[j]:j])
        j = back[j]
    return pieces[::-1], best[-1]


def _expected_log_counts(word: str, logp: dict[str, float]) -> tuple[dict[str, float], float]:
    """log E[count of each piece] over all segmentations of ``word`` (forward-backward), and log p(word).

    Kept in log space: after a few EM steps rarely used pieces have probabilities far below 1e-300.
    """
    n = len(word)
    fwd = [0.0] + [-math.inf] * n  # fwd[j] = log of the summed probability of all segmentations of word[:j]
    for j in range(1, n + 1):
        fwd[j] = _logsumexp([fwd[i] + logp[word[i:j]] for i in range(j) if word[i:j] in logp])
    bwd = [-math.inf] * n + [0.0]  # bwd[i] = the same for word[i:]
    for i in range(n - 1, -1, -1):
        bwd[i] = _logsumexp([logp[word[i:j]] + bwd[j] for j in range(i + 1, n + 1) if word[i:j] in logp])
    terms = defaultdict(list)  # piece -> log p(segmentations that use it at i:j, with word[i:j] = piece)
    for i in range(n):
        for j in range(i + 1, n + 1):
            if word[i:j] in logp:
                terms[word[i:j]].append(fwd[i] + logp[word[i:j]] + bwd[j] - fwd[n])
    return {piece: _logsumexp(t) for piece, t in terms.items()}, fwd[n]


def _logsumexp(xs: list[float]) -> float:
    m = max(xs, default=-math.inf)
    return m if m == -math.inf else m + math.log(sum(math.exp(x - m) for x in xs))


# ----- checks ------------------------------------------------------------------------------------------

def _check_wordpiece_score(pair_count, left_count, right_count, total) -> None:
    for name, value in (("pair_count", pair_count), ("left_count", left_count), ("right_count", right_count),
                        ("total", total)):
        validate.number(name, value, low=0, low_open=True)
    for name, value in (("pair_count", pair_count), ("left_count", left_count), ("right_count", right_count)):
        if value > total:
            raise ValueError(f"{name} must be <= total = {total!r}, got {value!r}")
    if pair_count > min(left_count, right_count):
        raise ValueError(f"pair_count must be <= left_count and right_count (each occurrence of the pair holds "
                         f"one of each), got pair_count={pair_count!r}, left_count={left_count!r}, "
                         f"right_count={right_count!r}")


def _check_logp(logp, name: str = "logp") -> None:
    """A non-empty dict {non-empty str piece: log-probability <= 0}; -inf (probability 0) is allowed."""
    if not isinstance(logp, dict):
        raise TypeError(f"{name} must be a dict {{piece: log-probability}}, got {validate.describe(logp)}")
    if not logp:
        raise ValueError(f"{name} must be a non-empty dict {{piece: log-probability}}, got an empty dict")
    for piece, value in logp.items():
        validate.string(f"a piece of {name}", piece)
        validate.number(f"{name}[{piece!r}]", value if value != -math.inf else -1.0, high=0.0)


def _check_word_and_logp(word, logp) -> None:
    validate.string("word", word)
    _check_logp(logp)


def _check_word_counts(word_counts) -> None:
    if not isinstance(word_counts, dict):
        raise TypeError(f"word_counts must be a dict {{word: count}}, got {validate.describe(word_counts)}")
    if not word_counts:
        raise ValueError("word_counts must be a non-empty dict {word: count}, got an empty dict")
    for word, count in word_counts.items():
        validate.string("a word of word_counts", word)
        validate.integer(f"word_counts[{word!r}]", count, low=1)


def _check_unigram_em(word_counts, vocab, n_iter) -> None:
    _check_word_counts(word_counts)
    if isinstance(vocab, dict):
        _check_logp(vocab, "vocab")
    else:
        validate.strings("vocab", vocab)
        if not all(vocab):
            raise ValueError("vocab must hold non-empty pieces, got an empty str")
    validate.integer("n_iter", n_iter, low=1)
    pieces = {p for p in vocab if not isinstance(vocab, dict) or vocab[p] > -math.inf}
    for word in word_counts:
        _check_segmentable(word, pieces)


def _check_unigram_prune(word_counts, logp, keep, n_iter) -> None:
    _check_word_counts(word_counts)
    _check_logp(logp)
    validate.integer("keep", keep, low=1)
    validate.integer("n_iter", n_iter, low=1)


def _check_segmentable(word: str, pieces: set[str]) -> None:
    """EM needs every word to have at least one segmentation into pieces of non-zero probability."""
    reachable = [True] + [False] * len(word)  # reachable[j]: word[:j] can be cut into pieces
    for j in range(1, len(word) + 1):
        reachable[j] = any(reachable[i] and word[i:j] in pieces for i in range(j))
    if not reachable[-1]:
        raise ValueError(f"vocab cannot segment the word {word!r} of word_counts; keep its characters")
