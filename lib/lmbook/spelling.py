"""Spelling correction as a character-level sequence-to-sequence task, for chapter 13.

The words are the Python manual's (``lmbook.data``); a noisy form is made by chapter 2's edit operations
(insert, delete, substitute, swap two neighbours) until it is exactly ``n_edits`` OSA edits from the word
(``lmbook.edit_distance.osa_distance``), so a noise level is a distance, not a number of attempts. The split is
by word *type*: no test word is ever a training target. :func:`train` fits a ``lmbook.seq2seq.Seq2Seq`` on
fresh noise at every step, as an encoder-decoder or, with ``n_encoder_layers=0``, as a decoder-only model
that reads ``noisy <sep> clean`` as one sequence.

Left out on purpose: real typo statistics (keyboard neighbours, phonetic errors), words with digits or ``_``.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F

from . import data, validate
from .edit_distance import osa_distance
from .seq2seq import BOS, EOS, PAD, Seq2Seq, greedy_decode
from .training import TrainConfig, adamw, set_learning_rate

__all__ = ["ALPHABET", "SEP", "MASK", "VOCAB_SIZE", "manual_words", "split_by_type", "add_noise", "encode",
           "decode", "make_batch", "train", "correct", "wilson_interval"]

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
SEP, MASK = 3, 4  # after PAD, BOS, EOS = 0, 1, 2: the separator of a decoder-only input, BERT's [MASK]
FIRST = 5  # the id of "a"
VOCAB_SIZE = FIRST + len(ALPHABET)  # 31


def manual_words(min_len: int = 4, max_len: int = 12) -> dict:
    """{word: count} of the manual's lower-case a-z words of min_len..max_len letters (chapter 1's tokenizer)."""
    _check_lengths(min_len, max_len)
    counts = {}
    for w in data.words(data.text()):
        if min_len <= len(w) <= max_len and w.isascii() and w.isalpha():
            counts[w] = counts.get(w, 0) + 1
    return dict(sorted(counts.items()))


def split_by_type(words, test_fraction: float = 0.2, seed: int = 0) -> tuple[list, list]:
    """A random split of the word *types*: (train, test), each sorted; no word is in both."""
    validate.strings("words", words)
    validate.integer("seed", seed, low=0)
    validate.number("test_fraction", test_fraction, low=0, high=1, low_open=True, high_open=True)
    shuffled = sorted(set(words))
    random.Random(seed).shuffle(shuffled)
    n_test = round(len(shuffled) * test_fraction)
    return sorted(shuffled[n_test:]), sorted(shuffled[:n_test])


def add_noise(word: str, n_edits: int, rng: random.Random) -> str:
    """A random form of ``word`` at OSA distance exactly n_edits (0: the word), by random edit operations."""
    _check_noise(word, n_edits, rng)
    while True:
        noisy = word
        for _ in range(n_edits):
            noisy = _random_edit(noisy, rng)
        if osa_distance(noisy, word) == n_edits and noisy:
            return noisy


def _random_edit(w: str, rng: random.Random) -> str:
    op, i, c = rng.choice("idst"), rng.randrange(len(w) + 1), rng.choice(ALPHABET)
    if op == "i":
        return w[:i] + c + w[i:]  # insert c before position i
    i = min(i, len(w) - 1)
    if op == "d" and len(w) > 1:
        return w[:i] + w[i + 1:]
    if op == "t" and i + 1 < len(w):
        return w[:i] + w[i + 1] + w[i] + w[i + 2:]  # swap two neighbours
    return w[:i] + c + w[i + 1:]  # substitute (also the fallback where a delete or swap cannot apply)


def encode(words, bos: bool = False, eos: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (B, S) and lengths (B,) of a list of a-z words, optionally with BOS first and EOS last."""
    _check_words(words)
    validate.boolean("bos", bos)
    validate.boolean("eos", eos)
    rows = [[BOS] * bos + [FIRST + ALPHABET.index(c) for c in w] + [EOS] * eos for w in words]
    lengths = torch.tensor([len(r) for r in rows])
    ids = torch.full((len(rows), int(lengths.max())), PAD, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r)
    return ids, lengths


def decode(ids) -> list[str]:
    """The words spelt by rows of ids (B, T): letters up to the first EOS; PAD, BOS, SEP and MASK skipped."""
    validate.token_ids("ids", ids, VOCAB_SIZE, ndim=2)
    out = []
    for row in ids.tolist():
        row = row[:row.index(EOS)] if EOS in row else row
        out.append("".join(ALPHABET[i - FIRST] for i in row if i >= FIRST))
    return out


def make_batch(words, rng: random.Random, noise=(0, 1, 1, 2, 2), decoder_only: bool = False) -> dict:
    """Training tensors for the clean ``words`` with noise levels drawn from ``noise`` (a 0 teaches to copy).

    Encoder-decoder: src, src_lengths, tgt_in (BOS + clean), tgt_out (clean + EOS). Decoder-only: tgt_in =
    noisy SEP clean and tgt_out its shift by one, with PAD (not scored) at the positions inside the source.
    """
    _check_batch(words, rng, noise, decoder_only)
    noisy = [add_noise(w, rng.choice(noise), rng) for w in words]
    if not decoder_only:
        src, lengths = encode(noisy)
        tgt, _ = encode(words, bos=True, eos=True)  # BOS w EOS
        return {"src": src, "src_lengths": lengths, "tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:]}
    rows = [encode([n])[0][0].tolist() + [SEP] + encode([w], eos=True)[0][0].tolist()
            for n, w in zip(noisy, words, strict=True)]  # noisy SEP clean EOS
    seq = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    target = seq.clone()
    for b, (r, n) in enumerate(zip(rows, noisy, strict=False)):
        seq[b, :len(r)] = torch.tensor(r)
        target[b, len(n):len(r) - 1] = torch.tensor(r[len(n) + 1:])  # predict clean + EOS after SEP
    return {"tgt_in": seq[:, :-1], "tgt_out": target[:, :-1]}


def train(model: Seq2Seq, words, steps: int = 1000, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          double_softmax: bool = False) -> list[float]:
    """AdamW with warm-up and cosine decay (chapter 9) on fresh noisy forms of ``words``; the loss per step.
    double_softmax=True reproduces a common bug: cross-entropy applied to softmax outputs, not to logits."""
    _check_train(model, words, steps, batch_size, lr, seed, double_softmax)
    decoder_only, device = model.config.n_encoder_layers == 0, next(model.parameters()).device
    config = TrainConfig(steps=steps, lr=lr, warmup_steps=min(50, steps // 10), batch_size=batch_size)
    optimizer, rng, losses = adamw(model, config), random.Random(seed), []
    model.train()
    for step in range(steps):
        b = make_batch(rng.choices(words, k=batch_size), rng, decoder_only=decoder_only)
        b = {k: v.to(device) for k, v in b.items()}
        logits = (model.decode(b["tgt_in"]) if decoder_only else model(b["src"], b["src_lengths"], b["tgt_in"]))
        out = logits.softmax(-1) if double_softmax else logits  # the bug: probabilities fed in as logits
        loss = F.cross_entropy(out.flatten(0, 1), b["tgt_out"].flatten(), ignore_index=PAD)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        set_learning_rate(optimizer, step, config)
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def correct(model: Seq2Seq, noisy, max_len: int = 16) -> list[str]:
    """The model's greedy correction of each noisy word: an encoder-decoder reads it as the source; a decoder-only
    model continues ``noisy <sep>`` (words of one length at a time, so that no row needs padding)."""
    _check_correct(model, noisy, max_len)
    device = next(model.parameters()).device
    if model.config.n_encoder_layers:
        src, lengths = encode(noisy)
        return decode(greedy_decode(model, src.to(device), lengths.to(device), max_len))
    out, by_length = [""] * len(noisy), {}
    for i, w in enumerate(noisy):
        by_length.setdefault(len(w), []).append(i)
    for n, rows in by_length.items():
        ids = torch.cat([encode([noisy[i] for i in rows])[0], torch.full((len(rows), 1), SEP)], 1).to(device)  # b, n+1
        for _ in range(max_len):
            ids = torch.cat([ids, model.decode(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
            if (ids[:, n + 1:] == EOS).any(dim=1).all():
                break
        for i, word in zip(rows, decode(ids[:, n + 1:]), strict=False):
            out[i] = word
    return out


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion k/n: (centre -+ half) / (1 + z^2/n) with
    centre = p + z^2/(2n), half = z sqrt(p(1-p)/n + z^2/(4n^2)); z = 1.96 for 95%."""
    validate.integer("n", n)
    validate.integer("successes", successes, low=0, high=n)
    validate.number("z", z, low=0, low_open=True)
    p = successes / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n))  # no -1e-17


# ----- argument checks ---------------------------------------------------------------------------------------

def _check_lengths(min_len, max_len) -> None:
    validate.integer("min_len", min_len)
    validate.integer("max_len", max_len, low=min_len)


def _check_words(words, name: str = "words") -> None:
    validate.strings(name, words)
    for i, w in enumerate(words):
        if not w or any(c not in ALPHABET for c in w):
            raise ValueError(f"{name}[{i}] must be a non-empty word of the letters a-z, got {w!r}")


def _check_rng(rng) -> None:
    if not isinstance(rng, random.Random):
        raise TypeError(f"rng must be a random.Random, got {validate.describe(rng)}")


def _check_noise(word, n_edits, rng) -> None:
    validate.string("word", word)
    if not word or any(c not in ALPHABET for c in word):
        raise ValueError(f"word must be a non-empty word of the letters a-z, got {word!r}")
    validate.integer("n_edits", n_edits, low=0, high=len(word))
    _check_rng(rng)


def _check_batch(words, rng, noise, decoder_only) -> None:
    _check_words(words)
    _check_rng(rng)
    validate.sequence("noise", noise)
    for level in noise:
        validate.integer("noise", level, low=0, high=3)
    validate.boolean("decoder_only", decoder_only)


def _check_train(model, words, steps, batch_size, lr, seed, double_softmax) -> None:
    if not isinstance(model, Seq2Seq) or not model.config.n_decoder_layers:
        raise TypeError(f"model must be a Seq2Seq with a decoder, got {validate.describe(model)}")
    _check_words(words)
    validate.integer("steps", steps)
    validate.integer("batch_size", batch_size)
    validate.number("lr", lr, low=0, low_open=True)
    validate.integer("seed", seed, low=0)
    validate.boolean("double_softmax", double_softmax)


def _check_correct(model, noisy, max_len) -> None:
    if not isinstance(model, Seq2Seq) or not model.config.n_decoder_layers:
        raise TypeError(f"model must be a Seq2Seq with a decoder, got {validate.describe(model)}")
    _check_words(noisy, "noisy")
    longest = max(map(len, noisy)) + 1 if not model.config.n_encoder_layers else 0  # the decoder-only prefix
    validate.integer("max_len", max_len, high=model.config.context_length - longest)
