"""Byte-level BPE on the Python manual: training to 2,000 merges (lmbook's incremental counts vs the naive
recount-every-merge loop vs Hugging Face tokenizers, all from the same raw text), and encoding throughput."""

from __future__ import annotations

import time

from common import median_time, table


def _hf_train(text: str, vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    return tok


def _hf_smollm2():
    import gguf
    from lmbook.gguf_tokenizer import smollm2_gguf_path
    from tokenizers import Tokenizer, models, pre_tokenizers

    fields = gguf.GGUFReader(smollm2_gguf_path()).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"].contents()]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    return tok


def run() -> str:
    from lmbook import data
    from lmbook.pretokenization import pretokenize
    from lmbook.tokenization import BPETokenizer

    text = data.text()
    n_merges = 2000
    vocab_size = 256 + n_merges
    pretokenize("warm up the character classes")

    ours = BPETokenizer.train(text, vocab_size)
    hf = _hf_train(text, vocab_size)
    assert ours.encode(text) == hf.encode(text).ids, "lmbook and tokenizers disagree"
    t_ours = median_time(lambda: BPETokenizer.train(text, vocab_size), repeat=3)
    t_hf = median_time(lambda: _hf_train(text, vocab_size), repeat=3)
    start = time.perf_counter()  # the naive loop is slow: one timed run, on all 2,000 merges
    naive = BPETokenizer.train(text, vocab_size, naive=True)
    t_naive = time.perf_counter() - start
    assert naive.merges == ours.merges

    train_rows = [
        ["naive recount loop (lmbook, `naive=True`)", f"{t_naive:.2f}", f"{t_naive / t_ours:.1f}"],
        ["lmbook (incremental pair counts)", f"{t_ours:.2f}", "1.0"],
        ["HF tokenizers BpeTrainer (Rust)", f"{t_hf:.2f}", f"{t_hf / t_ours:.2f}"],
    ]

    mb = len(text.encode("utf-8")) / 1e6
    smol = BPETokenizer.from_gguf()
    smol_hf = _hf_smollm2()
    enc = {}
    # a fresh tokenizer per run, so that the chunk cache starts empty (cold) in every timed run
    enc["lmbook, 2,256-token BPE"] = median_time(
        lambda: BPETokenizer(ours.vocab, ours.merges).encode(text), repeat=3)
    enc["HF tokenizers, same BPE"] = median_time(lambda: hf.encode(text), repeat=3)
    enc["lmbook, SmolLM2 (49,152 tokens)"] = median_time(
        lambda: BPETokenizer(smol.vocab, smol.merges, smol.pre, smol.special_tokens).encode(text), repeat=3)
    enc["HF tokenizers, SmolLM2"] = median_time(lambda: smol_hf.encode(text), repeat=3)
    warm = BPETokenizer(ours.vocab, ours.merges)
    warm.encode(text)
    enc["lmbook, 2,256-token BPE, warm chunk cache"] = median_time(lambda: warm.encode(text), repeat=3)
    base = enc["lmbook, 2,256-token BPE"]
    enc_rows = [[name, f"{t:.2f}", f"{mb / t:.2f}", f"{base / t:.2f}"] for name, t in enc.items()]

    return (
        "## BPE training and encoding (lmbook.tokenization)\n\n"
        f"The whole Python manual ({len(text):,} characters, {mb:.2f} MB of UTF-8), byte-level, GPT-2 "
        f"pre-tokenization, {n_merges:,} merges, min_frequency 2; the three trainers learn identical merges "
        "(asserted). Times include pre-tokenization. Medians of 3 runs; the naive loop is timed once.\n\n"
        + table(["trainer", "seconds", "time / lmbook"], train_rows)
        + f"\n\nlmbook is **{t_naive / t_ours:.0f}x** faster than the naive loop and "
        f"**{t_ours / t_hf:.1f}x** slower than HF tokenizers.\n\n"
        "Encoding the whole manual (the ids of lmbook and HF are identical; tests/test_tokenization.py):\n\n"
        + table(["encoder", "seconds", "MB/s", "speed-up over lmbook cold"], enc_rows)
        + "\n"
    )
