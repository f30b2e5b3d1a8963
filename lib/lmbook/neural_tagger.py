"""A neural part-of-speech tagger (chapter 4): a bidirectional LSTM over word embeddings and character features.

Each word is represented by the concatenation of a learned embedding of its lowercased form (rare and unknown
words share one ``<unk>`` row) and a character CNN over its spelling, which sees case, digits and suffixes. A
BiLSTM reads the sentence both ways and a linear layer scores the tags at each position; tags are predicted
independently per position (no CRF layer), from the whole sentence's context.

Left out on purpose: pretrained embeddings, a CRF output layer and subword (transformer) encoders.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from . import validate
from .tagging import _check_tagged  # the same (words, tags) checks as the HMM's

__all__ = ["TaggerConfig", "TaggerVocab", "BiLSTMTagger", "encode_batch", "train_tagger", "predict_tags"]

PAD, UNK = 0, 1  # row 0 pads, row 1 stands for unknown words and characters
MAX_CHARS = 16  # longer words keep their first 8 and last 8 characters


@dataclass
class TaggerConfig:
    word_dim: int = 64  # embedding of the lowercased word
    char_dim: int = 16  # embedding of one character
    char_channels: int = 32  # filters of the character CNN (width 3), max-pooled over the word
    hidden: int = 64  # LSTM units per direction
    dropout: float = 0.3  # on the word features and on the LSTM outputs
    word_dropout: float = 0.05  # training only: a known word is replaced by <unk> with this probability

    def __post_init__(self):
        _check_config(self)


@dataclass
class TaggerVocab:
    words: list[str]  # lowercased forms seen at least min_count times, after PAD and UNK
    chars: list[str]
    tags: list[str]

    def __post_init__(self):
        for name in ("words", "chars", "tags"):
            validate.strings(name, getattr(self, name))

    @classmethod
    def build(cls, tagged, min_count: int = 2) -> TaggerVocab:
        validate.integer("min_count", min_count)
        _check_tagged(tagged)
        counts = Counter(w.lower() for words, _ in _pairs(tagged) for w in words)
        chars = sorted({c for words, _ in _pairs(tagged) for w in words for c in w})
        tags = sorted({t for _, ts in _pairs(tagged) for t in ts})
        return cls(["<pad>", "<unk>"] + sorted(w for w, n in counts.items() if n >= min_count),
                   ["<pad>", "<unk>"] + chars, tags)


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab: TaggerVocab, config: TaggerConfig | None = None):
        super().__init__()
        config = TaggerConfig() if config is None else config
        _check_init(vocab, config)
        self.vocab, self.config = vocab, config
        self.word_emb = nn.Embedding(len(vocab.words), config.word_dim, padding_idx=PAD)
        self.char_emb = nn.Embedding(len(vocab.chars), config.char_dim, padding_idx=PAD)
        self.char_cnn = nn.Conv1d(config.char_dim, config.char_channels, kernel_size=3, padding=1)
        self.lstm = nn.LSTM(config.word_dim + config.char_channels, config.hidden, batch_first=True,
                            bidirectional=True)
        self.drop = nn.Dropout(config.dropout)
        self.out = nn.Linear(2 * config.hidden, len(vocab.tags))

    def forward(self, word_ids: torch.Tensor, char_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Tag scores (B, T, K) from word ids (B, T), character ids (B, T, C) and sentence lengths (B,)."""
        _check_forward(self, word_ids, char_ids, lengths)
        B, T, C = char_ids.shape
        chars = self.char_emb(char_ids.reshape(B * T, C)).transpose(1, 2)  # (B*T, char_dim, C)
        spelling = self.char_cnn(chars).relu().amax(dim=2).reshape(B, T, -1)  # (B, T, char_channels)
        x = self.drop(torch.cat([self.word_emb(word_ids), spelling], dim=-1))  # (B, T, word_dim + channels)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        h, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=T)  # (B, T, 2 hidden)
        return self.out(self.drop(h))  # (B, T, K)


def encode_batch(vocab: TaggerVocab, sentences) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Word ids (B, T), character ids (B, T, C) and lengths (B,) for a list of word lists, padded with 0."""
    if not isinstance(vocab, TaggerVocab):
        raise TypeError(f"vocab must be a TaggerVocab, got {validate.describe(vocab)}")
    validate.sequence("sentences", sentences, what="word lists")
    for b, sentence in enumerate(sentences):
        validate.strings(f"sentences[{b}]", sentence)
    word_index = {w: i for i, w in enumerate(vocab.words)}
    char_index = {c: i for i, c in enumerate(vocab.chars)}
    B, T = len(sentences), max(len(s) for s in sentences)
    words, chars = torch.zeros(B, T, dtype=torch.long), torch.zeros(B, T, MAX_CHARS, dtype=torch.long)
    for b, sentence in enumerate(sentences):
        for t, w in enumerate(sentence):
            words[b, t] = word_index.get(w.lower(), UNK)
            spelled = w if len(w) <= MAX_CHARS else w[: MAX_CHARS // 2] + w[-MAX_CHARS // 2:]
            chars[b, t, : len(spelled)] = torch.tensor([char_index.get(c, UNK) for c in spelled])
    return words, chars, torch.tensor([len(s) for s in sentences])


def train_tagger(model: BiLSTMTagger, tagged, epochs: int = 1, batch_size: int = 32, lr: float = 2e-3,
                 seed: int = 0, log_every: int = 0) -> list[float]:
    """Train with Adam on the cross-entropy of each word's tag; returns the mean loss of each logged stretch."""
    _check_training(model, tagged, epochs, batch_size, lr, seed, log_every)
    pairs, generator, losses, stretch = _pairs(tagged), torch.Generator().manual_seed(seed), [], []
    tag_index = {t: i for i, t in enumerate(model.vocab.tags)}
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(pairs), generator=generator).tolist()
        for start in range(0, len(pairs), batch_size):
            batch = [pairs[i] for i in order[start:start + batch_size]]
            words, chars, lengths = encode_batch(model.vocab, [list(ws) for ws, _ in batch])
            drop = torch.rand(words.shape, generator=generator) < model.config.word_dropout
            words = words.masked_fill(drop & (words > UNK), UNK)  # teach the <unk> row what rare words look like
            gold = torch.full(words.shape, -100, dtype=torch.long)  # -100: padding, ignored by the loss
            for b, (_, ts) in enumerate(batch):
                gold[b, : len(ts)] = torch.tensor([tag_index[t] for t in ts])
            loss = F.cross_entropy(model(words, chars, lengths).flatten(0, 1), gold.flatten(), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            stretch.append(loss.item())
            if log_every and len(stretch) == log_every:
                losses.append(sum(stretch) / len(stretch))
                stretch = []
    model.eval()
    return losses


@torch.no_grad()
def predict_tags(model: BiLSTMTagger, sentences, batch_size: int = 256) -> list[list[str]]:
    """The highest-scoring tag at each position of each sentence (a list of word lists)."""
    _check_predict(model, sentences, batch_size)
    model.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))  # batch similar lengths: less padding
    out = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        chunk = [list(sentences[i]) for i in order[start:start + batch_size]]
        best = model(*encode_batch(model.vocab, chunk)).argmax(dim=-1)  # (B, T)
        for i, b in zip(order[start:start + batch_size], range(len(chunk)), strict=True):
            out[i] = [model.vocab.tags[k] for k in best[b, : len(chunk[b])].tolist()]
    return out


def _pairs(tagged) -> list[tuple]:
    return [(item.words, item.tags) if hasattr(item, "tags") else tuple(item) for item in tagged]


def _check_config(config) -> None:
    for name in ("word_dim", "char_dim", "char_channels", "hidden"):
        validate.integer(name, getattr(config, name))
    for name in ("dropout", "word_dropout"):
        validate.number(name, getattr(config, name), low=0.0, high=1.0, high_open=True)


def _check_init(vocab, config) -> None:
    if not isinstance(vocab, TaggerVocab) or not isinstance(config, TaggerConfig):
        raise TypeError(f"vocab must be a TaggerVocab and config a TaggerConfig, got vocab "
                        f"{validate.describe(vocab)} and config {validate.describe(config)}")


def _check_forward(model, word_ids, char_ids, lengths) -> None:
    validate.token_ids("word_ids", word_ids, len(model.vocab.words), ndim=2)
    validate.token_ids("char_ids", char_ids, len(model.vocab.chars), ndim=3)
    validate.tensor("lengths", lengths, ndim=1, kind="int")
    B, T = word_ids.shape
    if char_ids.shape[:2] != (B, T) or lengths.shape != (B,) or B == 0 or T == 0:
        raise ValueError(f"word_ids (B, T), char_ids (B, T, C) and lengths (B,) must agree and be non-empty, got "
                         f"{tuple(word_ids.shape)}, {tuple(char_ids.shape)} and {tuple(lengths.shape)}")
    if (lengths < 1).any() or (lengths > T).any():
        raise ValueError(f"lengths must be in [1, {T}], got {lengths.tolist()}")


def _check_predict(model, sentences, batch_size) -> None:
    if not isinstance(model, BiLSTMTagger):
        raise TypeError(f"model must be a BiLSTMTagger, got {validate.describe(model)}")
    validate.sequence("sentences", sentences, what="word lists")
    for b, sentence in enumerate(sentences):
        validate.strings(f"sentences[{b}]", sentence)
    validate.integer("batch_size", batch_size)


def _check_training(model, tagged, epochs, batch_size, lr, seed, log_every) -> None:
    if not isinstance(model, BiLSTMTagger):
        raise TypeError(f"model must be a BiLSTMTagger, got {validate.describe(model)}")
    _check_tagged(tagged)
    validate.integer("epochs", epochs)
    validate.integer("batch_size", batch_size)
    validate.number("lr", lr, low=0, low_open=True)
    validate.integer("seed", seed, low=None)
    validate.integer("log_every", log_every, low=0)
