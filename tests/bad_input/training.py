"""Bad-input cases for lmbook.training (chapter 9): the training loop and evaluation."""

import torch
from lmbook import model as M
from lmbook import training as T

from ._case import Case


def _model():
    torch.manual_seed(0)
    return M.Transformer(M.TransformerConfig(vocab_size=11, context_length=8, d_model=8, n_layers=1, n_heads=2))


def _stream():
    return torch.arange(40) % 11  # one token stream (N,)


def _config():
    return T.TrainConfig(steps=2, batch_size=2, seq_len=4, warmup_steps=1, eval_every=1)


CONFIG_FIELDS = {"steps": 3, "batch_size": 2, "seq_len": 4, "lr": 1e-3, "warmup_steps": 1, "min_lr_ratio": 0.1,
                 "weight_decay": 0.1, "beta2": 0.95, "grad_clip": 1.0, "eval_every": 1, "seed": 1}
RANGE_OK = {"zero"}  # 0 is in the documented range: no warm-up, a floor of 0, no decay, beta2 = 0, seed 0

CASES = [
    Case("TrainConfig", lambda: (T.TrainConfig, dict(CONFIG_FIELDS)),
         ok={"warmup_steps": RANGE_OK, "min_lr_ratio": RANGE_OK, "weight_decay": RANGE_OK, "beta2": RANGE_OK,
             "seed": RANGE_OK,
             "grad_clip": {"inf"}}),  # math.inf is documented: never clip (chapter 9's norm-placement runs)
    Case("learning_rate", lambda: (T.learning_rate, {"step": 0, "config": _config()})),
    Case("adamw", lambda: (T.adamw, {"model": _model(), "config": _config()})),
    Case("set_learning_rate",
         lambda: (T.set_learning_rate, {"optimizer": T.adamw(_model(), _config()), "step": 0, "config": _config()})),
    Case("random_windows",
         lambda: (T.random_windows, {"ids": _stream(), "config": _config(), "generator": torch.Generator()}),
         # random_windows runs every step and does not know the vocabulary: the model's forward rejects the
         # ids of a batch that are too large for it
         ok={"ids": {"huge_id"}}),
    Case("evaluate", lambda: (T.evaluate, {"model": _model(), "ids": _stream(), "seq_len": 8, "stride": 4,
                                           "batch_size": 2})),
    Case("train", lambda: (T.train, {"model": _model(), "train_ids": _stream(), "val_ids": _stream(),
                                     "config": _config()})),
]

SKIP = {}
