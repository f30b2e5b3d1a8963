"""lmbook.tagging and lmbook.treebank: Viterbi and forward-backward against brute-force enumeration, the HMM's
estimates, paths and likelihoods against nltk's HiddenMarkovModelTagger with the same Lidstone smoothing, and
the CoNLL-U reader on multiword tokens and empty nodes.

Tolerances: Viterbi scores, forward-backward marginals and HMM probabilities agree with the oracles to 1e-12
(absolute, float64); log P(x) agrees with nltk's to a relative 1e-10 (nltk sums in base 2); paths must be equal."""

import itertools
import math

import numpy as np
import pytest
from lmbook.tagging import MostFrequentTag, fit_hmm, forward_backward, viterbi, word_shape
from lmbook.treebank import UPOS, load_ewt, parse_conllu
from nltk.probability import LidstoneProbDist
from nltk.tag.hmm import HiddenMarkovModelTrainer


def random_hmm(rng, K, T):
    def log_dist(*shape):
        p = rng.dirichlet(np.ones(shape[-1]) * 0.7, size=shape[:-1])
        return np.log(p)

    return log_dist(K), log_dist(K, K), np.log(rng.uniform(0.01, 1.0, size=(T, K)))


def enumerate_paths(log_start, log_trans, log_emit):
    """log P(z, x) for every state sequence z: K^T of them."""
    T, K = log_emit.shape
    out = {}
    for z in itertools.product(range(K), repeat=T):
        score = log_start[z[0]] + log_emit[0, z[0]]
        for t in range(1, T):
            score += log_trans[z[t - 1], z[t]] + log_emit[t, z[t]]
        out[z] = score
    return out


@pytest.mark.parametrize("K,T", [(2, 1), (3, 4), (4, 5), (5, 3), (2, 8)])
def test_viterbi_equals_brute_force(K, T):
    rng = np.random.default_rng(100 * K + T)
    for _ in range(5):
        hmm = random_hmm(rng, K, T)
        paths = enumerate_paths(*hmm)
        best = max(paths, key=paths.get)
        result = viterbi(*hmm)
        assert tuple(result.path) == best
        assert result.log_prob == pytest.approx(paths[best], abs=1e-12)
        assert result.scores[-1].max() == pytest.approx(paths[best], abs=1e-12)


@pytest.mark.parametrize("K,T", [(2, 1), (3, 4), (4, 5), (2, 8)])
def test_forward_backward_marginals_equal_enumeration(K, T):
    rng = np.random.default_rng(7 * K + T)
    hmm = random_hmm(rng, K, T)
    paths = enumerate_paths(*hmm)
    log_px = math.log(sum(math.exp(v) for v in paths.values()))
    marginals = np.zeros((T, K))
    for z, v in paths.items():
        marginals[np.arange(T), list(z)] += math.exp(v - log_px)
    posteriors, got_log_px = forward_backward(*hmm)
    assert got_log_px == pytest.approx(log_px, abs=1e-12)
    np.testing.assert_allclose(posteriors, marginals, atol=1e-12)
    np.testing.assert_allclose(posteriors.sum(1), 1.0, atol=1e-12)


def test_forward_backward_survives_where_probability_space_underflows():
    rng = np.random.default_rng(0)
    log_start, log_trans, _ = random_hmm(rng, 3, 1)
    log_emit = np.log(rng.uniform(1e-4, 1e-3, size=(200, 3)))  # P(x) ~ 1e-700: 0.0 in float64
    posteriors, log_px = forward_backward(log_start, log_trans, log_emit)
    assert np.isfinite(log_px) and log_px < -1400 and np.isfinite(posteriors).all()
    assert math.exp(log_px) == 0.0


SMALL = [s for s in load_ewt("train")[:400]]
TEST = load_ewt("dev")[:150]


def nltk_hmm(hmm, tagged, alpha_transition, alpha_emission):
    """nltk's supervised HMM on the same symbols: Lidstone(alpha) with K bins for transitions and priors, and
    V + 1 bins for emissions (our extra bin for unseen symbols)."""
    sequences = [[(hmm.symbol(w), t) for w, t in zip(s.words, s.tags, strict=True)] for s in tagged]
    K = len(hmm.tags)
    assert len(hmm.vocab) != K  # the estimator tells the two kinds of table apart by their bin count

    def estimator(fd, bins):
        return LidstoneProbDist(fd, alpha_transition, K) if bins == K else \
            LidstoneProbDist(fd, alpha_emission, bins + 1)

    return HiddenMarkovModelTrainer().train_supervised(sequences, estimator=estimator)


@pytest.mark.parametrize("alphas", [(0.1, 0.01), (1.0, 1.0), (0.5, 0.003)])
def test_hmm_matches_nltk(alphas):
    hmm = fit_hmm(SMALL, *alphas, min_count=2)
    # the training symbols: rare words map to their shape, so nltk sees exactly our vocabulary
    ref = nltk_hmm(hmm, SMALL, *alphas)
    assert sorted(ref._symbols) == sorted(hmm.vocab)
    k = {t: i for i, t in enumerate(hmm.tags)}
    for t in hmm.tags:
        assert hmm.log_start[k[t]] == pytest.approx(math.log(ref._priors.prob(t)), abs=1e-12)
        for u in hmm.tags:
            assert hmm.log_trans[k[t], k[u]] == pytest.approx(math.log(ref._transitions[t].prob(u)), abs=1e-12)
        for w in list(hmm.vocab)[:300] + ["never-seen-symbol"]:
            col = hmm.vocab.get(w, len(hmm.vocab))
            assert hmm.log_emit[k[t], col] == pytest.approx(math.log(ref._outputs[t].prob(w)), abs=1e-12)
    for s in TEST:
        symbols = [hmm.symbol(w) for w in s.words]
        assert hmm.tag(list(s.words)) == ref.best_path_simple(symbols)
        log_px = forward_backward(hmm.log_start, hmm.log_trans, hmm.emission_scores(list(s.words)))[1]
        nltk_log2 = ref.log_probability([(x, None) for x in symbols])
        assert log_px == pytest.approx(nltk_log2 * math.log(2), rel=1e-10)


def test_hmm_rows_are_distributions():
    hmm = fit_hmm(SMALL)
    np.testing.assert_allclose(np.exp(hmm.log_start).sum(), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(hmm.log_trans).sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(hmm.log_emit).sum(1), 1.0, atol=1e-12)  # V seen symbols + the unseen bin


def test_word_shape_classes():
    assert word_shape("1,000") == "<num>" and word_shape("3rd") == "<num>"
    assert word_shape("--") == "<punct>" and word_shape(":)") == "<punct>"
    assert word_shape("Tokenizing") == "<Cap-ing>" and word_shape("quickly") == "<low-ly>"
    assert word_shape("happiness") == "<low-ness>"  # the longest suffix wins over "s"
    assert word_shape("NASA") == "<CAPS>" and word_shape("I") == "<Cap>" and word_shape("bus") == "<low>"


def test_most_frequent_tag_known_and_unknown():
    data = [(["the", "run", "ended"], ["DET", "NOUN", "VERB"]), (["we", "run"], ["PRON", "VERB"]),
            (["they", "run", "fast"], ["PRON", "VERB", "ADV"]), (["walked"], ["VERB"])]
    tagger = MostFrequentTag().fit(data)
    assert tagger.tag(["run", "the"]) == ["VERB", "DET"]
    assert tagger.tag(["jumped"]) == ["VERB"]  # unknown, shape <low-ed>, learned from the hapaxes "ended", "walked"
    with pytest.raises(ValueError, match="tagged\\[0\\]"):
        MostFrequentTag().fit([(["a", "b"], ["DET"])])


CONLLU = """# sent_id = s1
# text = I don't know.
1	I	I	PRON	PRP	_	3	nsubj	_	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	know	know	VERB	VB	_	0	root	_	_
4.1	know	know	VERB	VB	_	_	_	4:conj	_
5	.	.	PUNCT	.	_	4	punct	_	_

# sent_id = s2
1	Hi	hi	INTJ	UH	_	0	root	_	_
"""


def test_parse_conllu_keeps_syntactic_words():
    first, second = parse_conllu(CONLLU)
    assert first.sent_id == "s1" and first.words == ("I", "do", "n't", "know", ".")
    assert first.tags == ("PRON", "AUX", "PART", "VERB", "PUNCT")
    assert second.words == ("Hi",) and second.tags == ("INTJ",)
    with pytest.raises(ValueError, match="text"):
        parse_conllu("1\tonly three\tcolumns\n")


def test_shipped_ewt_splits():
    sizes = {split: (len(s := load_ewt(split)), sum(len(x.words) for x in s)) for split in ("train", "dev", "test")}
    assert sizes == {"train": (12544, 204577), "dev": (2001, 25147), "test": (2077, 25094)}
    assert {t for x in load_ewt("dev") for t in x.tags} == set(UPOS)
    assert all(len(x.words) == len(x.tags) for x in load_ewt("test"))


def test_neural_tagger_padding_does_not_change_scores_and_training_lowers_the_loss():
    import torch
    from lmbook.neural_tagger import BiLSTMTagger, TaggerConfig, TaggerVocab, encode_batch, train_tagger

    torch.manual_seed(0)
    data = SMALL[:60]
    vocab = TaggerVocab.build(data)
    model = BiLSTMTagger(vocab, TaggerConfig(word_dim=8, char_dim=4, char_channels=6, hidden=8, dropout=0.0,
                                                      word_dropout=0.0)).double().eval()
    short, long = list(data[0].words[:3]), list(data[1].words)
    alone = model(*encode_batch(vocab, [short]))[0]
    batched = model(*encode_batch(vocab, [long, short]))[1, :3]  # padded to len(long)
    torch.testing.assert_close(alone, batched, rtol=0, atol=1e-12)
    losses = train_tagger(model, data[:30], epochs=12, batch_size=10, lr=3e-2, log_every=3)
    assert losses[-1] < 0.5 * losses[0]
