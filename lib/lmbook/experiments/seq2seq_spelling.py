"""Chapter 13's full runs: an encoder-decoder and a decoder-only model of about the same size trained on spelling
correction of the manual's words, with the recipe chosen on a dev split, and weights and results stored.

    python -m lmbook.experiments.seq2seq_spelling tune [STEPS ...]  # 4 runs on a dev split: the learning rate
    python -m lmbook.experiments.seq2seq_spelling final    # each model's chosen recipe, 3 seeds
    python -m lmbook.experiments.seq2seq_spelling matched  # the decoder-only model at the other's lr, 3 seeds
    python -m lmbook.experiments.seq2seq_spelling beam     # beam-4 corrections of the seed-0 encoder-decoder

The trainings of a stage run as parallel processes on ``lmbook.utils.default_device()`` (LMBOOK_DEVICE=cuda for a
GPU). On one H100 with 16 CPU cores a 3,000-step run took about 400 s (six at once; 250 s three at once): a step
costs 80-160 ms there, mostly Python building the noisy batch and launching the model's many small kernels. The
stored ``tune`` times (about 480 s) were taken while eight trainings shared the machine, four of them of a
10,000-step arm that was stopped unfinished. On one CPU core with nothing else competing for it a step
takes about 0.2 s, a 3,000-step run about ten minutes.

``tune`` splits the training words by type into a fit and a dev part, trains every (model, lr, steps) of GRID on
the fit part and scores greedy corrections of the dev words: ``seq2seq_spelling_tuning.json``. ``final`` trains
each model with its best recipe on all training words from three seeds and writes ``seq2seq_spelling.pt``: the
seed-0 weights (float16), every seed's losses and test accuracies (greedy, float64 on the CPU), and chapter 2's
``suggest`` corrections of the same noisy test words. ``matched`` adds the decoder-only model trained at the
encoder-decoder's learning rate, so that the two can also be compared at one recipe; ``beam`` adds beam search.
The test words are used for nothing but these final scores.
"""

from __future__ import annotations

import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch

from lmbook import spelling as sp
from lmbook.edit_distance import osa_distance, suggest
from lmbook.seq2seq import Seq2Seq, Seq2SeqConfig, beam_search
from lmbook.utils import default_device as device

PATH = Path(__file__).resolve().parents[1] / "data" / "seq2seq_spelling.pt"
TUNING = PATH.with_name("seq2seq_spelling_tuning.json")
TEST_SEED, DEV_SEED, DEV_FRACTION, BATCH = 1, 2, 0.15, 256
SEEDS = (0, 1, 2)
GRID = {"lr": (1e-3, 3e-3), "steps": (3000,)}
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
    """The stored seed-0 model ``name`` ("encoder-decoder" or "decoder-only") in float64, in eval mode."""
    blob = torch.load(PATH, weights_only=True)
    model = Seq2Seq(config(name))
    model.load_state_dict({k: v.float() for k, v in blob["weights"][name].items()})
    return model.double().eval()


def stored() -> dict:
    """Everything stored but the weights: recipes, losses, seed accuracies, beam and suggest corrections."""
    blob = torch.load(PATH, weights_only=True)
    return {k: v for k, v in blob.items() if k != "weights"}


def tuning() -> dict:
    """The stored dev-split runs of ``tune``."""
    return json.loads(TUNING.read_text())


def accuracy(model: Seq2Seq, words: list, levels=(1, 2), seed: int = TEST_SEED) -> dict:
    """{level: share of the noisy forms of ``words`` that greedy decoding corrects exactly}."""
    return {k: sum(p == w for p, w in zip(sp.correct(model, noisy), words, strict=True)) / len(words)
            for k, noisy in test_set(words, levels, seed).items()}


def run(job: dict) -> dict:
    """One training (a worker process): ``job`` names the model, lr, steps, seed and the words to fit and score."""
    torch.set_num_threads(1)
    torch.manual_seed(job["seed"])
    model = Seq2Seq(config(job["name"])).to(device())
    start = time.time()
    losses = sp.train(model, job["fit"], steps=job["steps"], batch_size=BATCH, lr=job["lr"], seed=job["seed"])
    out = {k: job[k] for k in ("name", "lr", "steps", "seed")} | {"seconds": time.time() - start, "losses": losses}
    if job.get("dev"):
        out["dev"] = accuracy(model, job["dev"], seed=DEV_SEED)
    out["weights"] = {k: v.detach().cpu().half() for k, v in model.state_dict().items()}
    print(out["name"], out["lr"], out["steps"], out["seed"], f"{out['seconds']:.0f} s", out.get("dev", ""), flush=True)
    return out


def parallel(jobs: list) -> list:
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=get_context("spawn")) as pool:
        return list(pool.map(run, jobs))


def tune(steps=GRID["steps"]) -> None:
    """Every (model, lr, steps) of GRID trained on the fit part of the training words, scored on the dev part;
    runs of other step counts already in the file are kept."""
    fit, dev = sp.split_by_type(sp.split_by_type(list(sp.manual_words()))[0], DEV_FRACTION, seed=DEV_SEED)
    jobs = [{"name": n, "lr": lr, "steps": s, "seed": 0, "fit": fit, "dev": dev}
            for n in CONFIGS for lr in GRID["lr"] for s in steps]
    kept = [r for r in tuning()["runs"] if r["steps"] not in steps] if TUNING.exists() else []
    runs = [{k: v for k, v in r.items() if k not in ("weights", "losses")} for r in parallel(jobs)]
    TUNING.write_text(json.dumps({"fit_words": len(fit), "dev_words": len(dev), "device": device_name(),
                                  "runs": kept + runs}, indent=1) + "\n")


def best(name: str) -> dict:
    """The recipe of ``name`` with the highest mean dev accuracy over one and two edits."""
    mine = [r for r in tuning()["runs"] if r["name"] == name]
    return max(mine, key=lambda r: (r["dev"]["1"] + r["dev"]["2"], -r["steps"]))


def final() -> None:
    """Each model's best recipe on all training words from SEEDS; test scores, beam-4 and suggest corrections."""
    counts = sp.manual_words()
    train_words, test_words = sp.split_by_type(list(counts))
    jobs = [{"name": n, "lr": best(n)["lr"], "steps": best(n)["steps"], "seed": s, "fit": train_words}
            for n in CONFIGS for s in SEEDS]
    runs = parallel(jobs)
    torch.set_num_threads(8)
    blob = {"weights": {}, "losses": {}, "seconds": {}, "recipe": {}, "accuracy": {}, "device": device_name()}
    for r in runs:
        model = Seq2Seq(config(r["name"]))
        model.load_state_dict({k: v.float() for k, v in r["weights"].items()})
        blob["accuracy"].setdefault(r["name"], {})[r["seed"]] = accuracy(model.double().eval(), test_words)
        blob["losses"].setdefault(r["name"], {})[r["seed"]] = r["losses"]
        blob["seconds"].setdefault(r["name"], {})[r["seed"]] = r["seconds"]
        blob["recipe"][r["name"]] = {"lr": r["lr"], "steps": r["steps"]}
        if r["seed"] == 0:
            blob["weights"][r["name"]] = r["weights"]
    old = torch.load(PATH, weights_only=True) if PATH.exists() else {}
    noisy = test_set(test_words)
    # suggest's corrections depend on nothing trained (about 80 s): kept from the file if it has them
    blob["suggest"] = old.get("suggest") or {k: suggest_corrections(v, counts) for k, v in noisy.items()}
    torch.save(blob, PATH)
    print("wrote", PATH, f"{PATH.stat().st_size / 1e6:.2f} MB", blob["accuracy"])


def matched() -> None:
    """The decoder-only model trained with the encoder-decoder's chosen recipe from SEEDS: test scores, losses."""
    train_words, test_words = sp.split_by_type(list(sp.manual_words()))
    blob, recipe = torch.load(PATH, weights_only=True), best("encoder-decoder")
    runs = parallel([{"name": "decoder-only", "lr": recipe["lr"], "steps": recipe["steps"], "seed": s,
                      "fit": train_words} for s in SEEDS])
    torch.set_num_threads(8)
    entry = {"lr": recipe["lr"], "steps": recipe["steps"], "accuracy": {}, "seconds": {}, "losses": {}}
    for r in runs:
        model = Seq2Seq(config("decoder-only"))
        model.load_state_dict({k: v.float() for k, v in r["weights"].items()})
        entry["accuracy"][r["seed"]] = accuracy(model.double().eval(), test_words)
        entry["seconds"][r["seed"]], entry["losses"][r["seed"]] = r["seconds"], r["losses"]
    blob["matched_lr"] = {"decoder-only": entry}
    torch.save(blob, PATH)


def add_beam() -> None:
    """Store the seed-0 encoder-decoder's beam-4 corrections of the noisy test words (CPU, float64)."""
    blob, model = torch.load(PATH, weights_only=True), load("encoder-decoder")
    noisy = test_set(sp.split_by_type(list(sp.manual_words()))[1])
    blob["beam4"] = {k: beam_corrections(model, v) for k, v in noisy.items()}
    torch.save(blob, PATH)


def beam_corrections(model: Seq2Seq, noisy: list, num_beams: int = 4) -> list:
    """Beam-search corrections of ``noisy``, one word at a time (slow: about 0.1 s a word)."""
    if not isinstance(noisy, list) or not all(isinstance(w, str) for w in noisy):
        raise TypeError(f"noisy must be a list of words (str), got {type(noisy).__name__}")
    out = []
    for w in noisy:
        ids, _ = beam_search(model, sp.encode([w])[0][0], max_len=16, num_beams=num_beams)
        out.append(sp.decode(torch.tensor([ids]))[0])
    return out


def device_name() -> str:
    d = device()
    return torch.cuda.get_device_name(d) if d.type == "cuda" else f"{d.type} ({torch.get_num_threads()} threads)"


if __name__ == "__main__":
    if sys.argv[1] == "tune":
        tune(tuple(map(int, sys.argv[2:])) or GRID["steps"])
    else:
        {"final": final, "matched": matched, "beam": add_beam}[sys.argv[1]]()
