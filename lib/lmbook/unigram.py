"""Chapter 5: the two other subword algorithms, both built on a unigram model of the pieces.

- **WordPiece** merges pairs like BPE, but ranks a pair by how much more often it occurs than chance:
  c(xy) / (c(x) c(y)), i.e. the PMI log P(xy) / (P(x) P(y)) (:func:`wordpiece_score`), the criterion usually
  given for it (Google's trainer is not public). The exact gain in the unigram log-likelihood of the corpus,
  about c(xy) (PMI - 1), is :func:`wordpiece_likelihood_gain`.
- **The Unigram language model** (SentencePiece) goes the other way: start from many candidate pieces with
  probabilities p(x), segment a word by its most probable segmentation (:func:`unigram_viterbi`), sum over
  all segmentations with the forward-backward recursions (:func:`unigram_forward_backward`,
  :func:`unigram_expected_counts`), fit the p(x) by EM (:func:`unigram_em`), and prune the pieces whose
  removal costs the least likelihood (:func:`unigram_prune`).

Log-probabilities are dicts {piece: log p}; -inf marks a piece of probability 0 (EM produces them).
Left out on purpose: WordPiece's ``##`` continuation prefix and greedy longest-match encoding,
SentencePiece's whitespace symbol, subword sampling, and the suffix-array seeding of the candidates.
"""

from __future__ import annotations

import math
from collections import defaultdict

from . import validate

__all__ = ["wordpiece_score", "wordpiece_likelihood_gain", "unigram_viterbi", "unigram_forward_backward",
           "unigram_expected_counts", "unigram_em", "unigram_prune"]


def wordpiece_score(pair_count: float, left_count: float, right_count: float, total: float) -> float:
    """WordPiece's merge score log P(xy) / (P(x) P(y)) with P(.) = count / total: the PMI of the pair.

    It ranks pairs exactly as c(xy) / (c(x) c(y)) does (total is the same for every pair): how much more often
    xy occurs than if x and y were independent. BPE ranks by c(xy) alone. Chapter 5.
    """
    _check_wordpiece_score(pair_count, left_count, right_count, total)
    return math.log((pair_count / total) / ((left_count / total) * (right_count / total)))


def wordpiece_likelihood_gain(pair_count: float, left_count: float, right_count: float, total: float) -> float:
    """The exact change of the corpus log-likelihood under a maximum-likelihood unigram model of the symbols
    when every occurrence of xy (x != y) becomes one new symbol z (chapter 5).

    L = sum_s c(s) log(c(s) / N). The merge sets c(z) = c(xy), lowers c(x) and c(y) by c(xy) and N by c(xy).
    For k = c(xy) much smaller than c(x), c(y) and N, expanding (c - k) log(c - k) ~ c log c - k (log c + 1)
    gives k (PMI(x, y) - 1), with PMI the score of :func:`wordpiece_score`: not k * PMI, since the shrinking
    c(x), c(y) (-k each) and N (+k) add -k.
    """
    _check_wordpiece_score(pair_count, left_count, right_count, total)
    k = pair_count

    def c_log_c(c):  # c log c, with 0 log 0 = 0
        return c * math.log(c) if c > 0 else 0.0

    before = c_log_c(left_count) + c_log_c(right_count) - c_log_c(total)
    after = c_log_c(left_count - k) + c_log_c(right_count - k) + c_log_c(k) - c_log_c(total - k)
    return after - before


def unigram_viterbi(word: str, logp: dict[str, float]) -> tuple[list[str], float]:
    """The most probable segmentation of ``word`` under a unigram model: argmax_x sum_i log p(x_i).

    Dynamic programming over end positions: best[j] = max_i best[i] + log p(word[i:j]). ``logp`` maps
    pieces to log-probabilities (<= 0). Returns the pieces and their total log-probability (-inf if no
    segmentation exists). Chapter 5.
    """
    _check_word_and_logp(word, logp)
    return _viterbi(word, logp)


def unigram_forward_backward(word: str, logp: dict[str, float]) -> tuple[list[float], list[float]]:
    """log alpha(j) and log beta(i) for a word of n characters under a unigram model (chapter 5).

    alpha(0) = 1, alpha(j) = sum_{i<j} alpha(i) p(word[i:j]): the total probability of all segmentations of
    word[:j]; beta(n) = 1, beta(i) = sum_{j>i} p(word[i:j]) beta(j): the same for word[i:]. Pieces not in
    ``logp`` have probability 0. Z = p(word) = alpha(n) = beta(0) sums over every segmentation of the word.
    """
    _check_word_and_logp(word, logp)
    return _forward_backward(word, logp)


def unigram_expected_counts(word: str, logp: dict[str, float]) -> tuple[dict[str, float], float]:
    """E[n_x], the expected number of times each piece x occurs in a segmentation of ``word`` drawn from
    the posterior p(segmentation | word), and log p(word) (chapter 5).

    E[n_x] = sum over spans i:j with word[i:j] = x of alpha(i) p(x) beta(j) / Z (the E-step of EM).
    """
    _check_word_and_logp(word, logp)
    log_counts, log_z = _expected_log_counts(word, logp)
    return {piece: math.exp(v) for piece, v in log_counts.items()}, log_z


def unigram_em(word_counts: dict[str, int], vocab, n_iter: int = 10) -> tuple[dict[str, float], list[float]]:
    """Fit the piece probabilities of a Unigram LM tokenizer by EM (chapter 5).

    ``vocab`` is a list of pieces (start: uniform) or a dict piece -> log p (start: those values).
    E-step: C(x) = sum_w c(w) E_w[n_x], the expected counts of :func:`unigram_expected_counts` weighted by
    the word counts c(w). M-step: p(x) = C(x) / sum_y C(y).
    Returns the log-probabilities and the corpus log-likelihood sum_w c(w) log p(w), where p(w) sums over
    all segmentations of w, before each M-step (EM never lets it decrease).
    """
    _check_unigram_em(word_counts, vocab, n_iter)
    logp, history = _initial_logp(vocab), []
    for _ in range(n_iter):
        terms, loglik = defaultdict(list), 0.0
        for word, c in word_counts.items():
            log_expected, logp_word = _expected_log_counts(word, logp)  # log E_w[n_x], log p(w)
            loglik += c * logp_word
            for piece, e in log_expected.items():
                terms[piece].append(math.log(c) + e)
        history.append(loglik)
        log_counts = {piece: _logsumexp(t) for piece, t in terms.items()}  # log C(x)
        log_total = _logsumexp(list(log_counts.values()))  # log sum_y C(y)
        logp = {piece: log_counts.get(piece, -math.inf) - log_total for piece in logp}
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


def _forward_backward(word: str, logp: dict[str, float]) -> tuple[list[float], list[float]]:
    """log alpha and log beta; log space, because rare pieces get probabilities far below 1e-300."""
    n = len(word)
    alpha = [0.0] + [-math.inf] * n  # alpha[j]: all segmentations of word[:j]; alpha[0] = log 1
    for j in range(1, n + 1):
        alpha[j] = _logsumexp([alpha[i] + logp[word[i:j]] for i in range(j) if word[i:j] in logp])
    beta = [-math.inf] * n + [0.0]  # beta[i]: all segmentations of word[i:]; beta[n] = log 1
    for i in range(n - 1, -1, -1):
        beta[i] = _logsumexp([logp[word[i:j]] + beta[j] for j in range(i + 1, n + 1) if word[i:j] in logp])
    return alpha, beta


def _expected_log_counts(word: str, logp: dict[str, float]) -> tuple[dict[str, float], float]:
    """log E[n_x] = log sum_{i:j spelling x} alpha(i) p(x) beta(j) / Z for each piece x, and log Z."""
    alpha, beta = _forward_backward(word, logp)
    log_z, terms = alpha[-1], defaultdict(list)  # Z = alpha(n) = p(word)
    for i in range(len(word)):
        for j in range(i + 1, len(word) + 1):
            if word[i:j] in logp:  # log posterior probability that the piece word[i:j] sits at span i:j
                terms[word[i:j]].append(alpha[i] + logp[word[i:j]] + beta[j] - log_z)
    return {piece: _logsumexp(t) for piece, t in terms.items()}, log_z


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
