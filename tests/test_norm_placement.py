"""Chapter 9's stored pre-norm vs post-norm sweep: complete, and reproduced by its own code."""

import numpy as np
from lmbook.experiments import norm_placement as NP


def test_the_stored_sweep_has_every_arm_and_seed():
    sweep = NP.load()
    assert sweep["steps"] == NP.STEPS and sweep["eval_every"] == NP.EVAL_EVERY
    arms = {(r["placement"], r["lr"], r["warmup_steps"], r["seed"]) for r in sweep["runs"]}
    assert arms == {(p, lr, w, s) for p, lr, w in NP.ARMS for s in NP.SEEDS}
    for run in sweep["runs"]:
        assert len(run["train_loss"]) == NP.STEPS
        assert run["val_step"] == list(range(NP.EVAL_EVERY, NP.STEPS + 1, NP.EVAL_EVERY))
    assert 3.5 < sweep["unigram_loss"] < np.log(2404)  # worse than any trained model, better than a uniform guess


def test_a_rerun_reproduces_the_start_of_a_stored_run():
    # The constant learning rate makes the first 50 steps of a 400-step run a 50-step run. Training amplifies
    # last-bit differences between CPUs, but over 50 steps they stay far below the tolerance.
    stored = next(r for r in NP.load()["runs"] if (r["placement"], r["lr"], r["warmup_steps"], r["seed"])
                  == ("post", 3e-3, 1, 0))
    rerun = NP.run("post", 3e-3, 1, seed=0, steps=50)
    assert np.allclose(rerun["train_loss"], stored["train_loss"][:50], atol=1e-3)
    assert np.allclose(rerun["val_loss"], stored["val_loss"][:2], atol=1e-3)


def test_the_unigram_loss_is_that_of_the_add_one_unigram_model():
    assert abs(NP.unigram_loss() - NP.load()["unigram_loss"]) < 1e-9
