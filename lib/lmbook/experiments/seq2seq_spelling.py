"""Chapter 13's full runs: an encoder-decoder and a decoder-only model of about the same size trained on spelling
correction of the manual's words, with weights and test results stored for the notebook.

    python -m lmbook.experiments.seq2seq_spelling [STEPS [NAME]]   # 700 steps: 24 and 31 min, see below
    python -m lmbook.experiments.seq2seq_spelling beam              # adds beam-4 corrections (about 3 min)

Writes ``lib/lmbook/data/seq2seq_spelling.pt``: both models' weights (float16; the configs are :func:`config`'s),
the training losses, and chapter 2's ``suggest`` corrections of the same noisy test words (slow: about 80 s).
With NAME ("encoder-decoder", "decoder-only" or "suggest") a run does one part into a ``.part`` file, so that
three processes can share the work; a run without NAME then merges the parts. The stored times (1459 s and
1882 s) are wall-clock times of two such processes sharing a loaded 2-core machine: not a clean cost measure.
The hyperparameters (700 steps, lr 3e-3, batch 256) were set by hand, not chosen on held-out data.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import torch

from lmbook import spelling as sp
from lmbook.edit_distance import osa_distance, suggest
from lmbook.seq2seq import Seq2Seq, Seq2SeqConfig, beam_search

PATH = Path(__file__).resolve().parents[1] / "data" / "seq2seq_spelling.pt"
TEST_SEED, TRAIN_SEED, BATCH = 1, 0, 256  # a larger batch costs little more per step here: overhead dominates
CONFIGS = {  # 56 d^2 and 60 d^2 of weight matrices: the decoder-only model is given slightly more
    "encoder-decoder": dict(n_encoder_layers=2, n_decoder_layers=2),
    "decoder-only": dict(n_encoder_layers=0, n_decoder_layers=5),
}


def config(name: str) -> Seq2SeqConfig:
    """The 2017 layout at width 64 with 4 heads; 2 + 2 layers, or 5 decoder-only layers."""
    return Seq2SeqConfig(vocab_size=sp.VOCAB_SIZE, context_length=32, d_model=64, n_heads=4, **CONFIGS[name])


def test_set(test_words, levels=(1, 2), seed: int = TEST_SEED) -> dict:
    """{level: noisy forms of every test word at exactly that many OSA edits}, fixed by the seed."""
    rng = random.Random(seed)
    return {k: [sp.add_noise(w, k, rng) for w in test_words] for k in levels}


def suggest_corrections(noisy: list, counts: dict) -> list:
    """Chapter 2's corrector: the most frequent word of the manual at the smallest OSA distance (<= 2)."""
    out = []
    for w in noisy:
        found = suggest(w, counts, k=1, max_distance=2, distance=osa_distance)
        out.append(found[0][0] if found else w)
    return out


def load(name: str) -> Seq2Seq:
    """The stored model ``name`` ("encoder-decoder" or "decoder-only") in float64, in eval mode."""
    blob = torch.load(PATH, weights_only=True)
    model = Seq2Seq(config(name))
    model.load_state_dict({k: v.float() for k, v in blob["weights"][name].items()})
    return model.double().eval()


def stored() -> dict:
    """Everything stored but the weights: losses per model, the suggest corrections per noise level."""
    blob = torch.load(PATH, weights_only=True)
    return {k: v for k, v in blob.items() if k != "weights"}


def train_one(name: str, steps: int, train_words: list) -> dict:
    """Train model ``name`` from seed 0; its float16 weights, losses and seconds. Saved to a part file, so the two
    models can be trained by two processes at once (``python -m ... STEPS NAME``)."""
    part = PATH.with_suffix(f".{name}.part")
    if part.exists():
        return torch.load(part, weights_only=True)
    torch.manual_seed(TRAIN_SEED)
    model = Seq2Seq(config(name))
    start = time.time()
    losses = sp.train(model, train_words, steps=steps, batch_size=BATCH, lr=3e-3, seed=TRAIN_SEED)
    out = {"weights": {k: v.half() for k, v in model.state_dict().items()}, "losses": losses,
           "seconds": time.time() - start}
    torch.save(out, part)
    print(name, f"{out['seconds']:.0f} s, mean loss of the last 100 steps {sum(losses[-100:]) / 100:.3f}")
    return out


def suggest_part(counts: dict, test_words: list) -> dict:
    """suggest's corrections of the noisy test words per noise level (a part file, as train_one's)."""
    part = PATH.with_suffix(".suggest.part")
    if not part.exists():
        torch.save({k: suggest_corrections(v, counts) for k, v in test_set(test_words).items()}, part)
    return torch.load(part, weights_only=True)


def beam_corrections(model: Seq2Seq, noisy: list, num_beams: int = 4) -> list:
    """Beam-search corrections of ``noisy``, one word at a time (slow: about 0.1 s a word)."""
    if not isinstance(noisy, list) or not all(isinstance(w, str) for w in noisy):
        raise TypeError(f"noisy must be a list of words (str), got {type(noisy).__name__}")
    out = []
    for w in noisy:
        ids, _ = beam_search(model, sp.encode([w])[0][0], max_len=16, num_beams=num_beams)
        out.append(sp.decode(torch.tensor([ids]))[0])
    return out


def add_beam() -> None:
    """Store the stored encoder-decoder's beam-4 corrections of the test set next to the rest (no training)."""
    torch.set_num_threads(1)
    _, test_words = sp.split_by_type(list(sp.manual_words()))
    blob, model = torch.load(PATH, weights_only=True), load("encoder-decoder")
    blob["beam4"] = {k: beam_corrections(model, v) for k, v in test_set(test_words).items()}
    torch.save(blob, PATH)


def main(steps: int = 700, only: str | None = None) -> None:
    torch.set_num_threads(1)
    counts = sp.manual_words()
    train_words, test_words = sp.split_by_type(list(counts))
    if only == "suggest":
        return suggest_part(counts, test_words)
    runs = {name: train_one(name, steps, train_words) for name in ([only] if only else CONFIGS)}
    if only:
        return
    blob = {"weights": {n: r["weights"] for n, r in runs.items()}, "losses": {n: r["losses"] for n, r in runs.items()},
            "seconds": {n: r["seconds"] for n, r in runs.items()}, "steps": steps}
    blob["suggest"] = suggest_part(counts, test_words)
    torch.save(blob, PATH)
    for name in [*CONFIGS, "suggest"]:
        PATH.with_suffix(f".{name}.part").unlink()
    print("wrote", PATH, f"{PATH.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__" and sys.argv[1:] == ["beam"]:
    add_beam()
elif __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 700, sys.argv[2] if len(sys.argv) > 2 else None)
