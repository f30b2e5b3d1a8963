"""Bad-input cases for lmbook.inference_cost (chapter 11): FLOPs of a forward pass, fitted exponents."""

from lmbook import inference_cost as IC
from lmbook import model as M

from ._case import Case


def _config():
    return M.TransformerConfig(vocab_size=11, context_length=16, d_model=8, n_layers=2, n_heads=2, n_kv_heads=1)


SIZES_DICT_OK = {"wrong_type"}  # a dict of the sizes is documented input (a published model's numbers)

CASES = [
    Case("forward_flops", lambda: (IC.forward_flops, {"config": _config(), "n_new": 3, "n_past": 2,
                                                         "last_only": False}),
         ok={"config": SIZES_DICT_OK,
             "n_new": {"zero"}, "n_past": {"zero"}}),  # no new tokens cost 0; no cached tokens is the plain pass
    Case("fit_exponent", lambda: (IC.fit_exponent, {"x": [1.0, 2.0, 4.0], "y": [3.0, 12.0, 48.0]})),
    Case("config_sizes", lambda: (IC.config_sizes, {"config": _config(), "names": ("n_layers", "head_dim")}),
         ok={"config": SIZES_DICT_OK}),
]

SKIP = {}

CASES.append(Case("mla_step_flops", lambda: (IC.mla_step_flops, {"T": 5, "n_heads": 2, "head_dim": 4, "d_c": 3,
                                                                  "d_model": 6, "absorbed": False})))
