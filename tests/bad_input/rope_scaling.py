"""Bad-input cases for lmbook.rope_scaling (chapter 12): stretching RoPE to longer contexts."""

import copy
import functools

from lmbook import rope_scaling as RS
from lmbook.model import Transformer, TransformerConfig

from ._case import Case

HEAD = {"head_dim": 16, "base": 10000.0}
YARN = {"factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": True}


@functools.cache
def _rope_model():
    config = TransformerConfig(vocab_size=11, d_model=16, n_layers=1, n_heads=2, context_length=16, positional="rope")
    return Transformer(config)


CASES = [
    Case("scaled_inv_freq",
         lambda: (RS.scaled_inv_freq, {**HEAD, "scaling": {"type": "yarn", "factor": 4.0,
                                                          "original_max_position_embeddings": 64}}),
         ok={"scaling": {"none"}}),  # documented: None gives the unscaled theta_i
    Case("linear_inv_freq", lambda: (RS.linear_inv_freq, {**HEAD, "factor": 4.0})),
    Case("ntk_inv_freq", lambda: (RS.ntk_inv_freq, {**HEAD, "factor": 4.0})),
    Case("dynamic_inv_freq", lambda: (RS.dynamic_inv_freq, {**HEAD, "factor": 4.0,
                                                            "original_max_position_embeddings": 64, "seq_len": 128}),
         ok={"seq_len": {"zero"}}),  # documented: n = max(seq_len, L), so 0 (the default) means "no change"
    Case("yarn_inv_freq", lambda: (RS.yarn_inv_freq, {**HEAD, **YARN, "ramp": "index"})),
    Case("yarn_ramp", lambda: (RS.yarn_ramp, {**HEAD, **{k: v for k, v in YARN.items() if k != "factor"},
                                              "by": "ratio"})),
    Case("yarn_attention_factor", lambda: (RS.yarn_attention_factor, {"s": 4.0})),
    Case("llama3_inv_freq", lambda: (RS.llama3_inv_freq, {**HEAD, "factor": 8.0,
                                                          "original_max_position_embeddings": 256,
                                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0})),
    Case("scaling_for", lambda: (RS.scaling_for, {"method": "YaRN", "s": 4.0, "original_length": 16})),
    Case("rescale_rope", lambda: (RS.rescale_rope, {"model": copy.deepcopy(_rope_model()), "method": "YaRN",
                                                    "s": 4.0, "original_length": 16})),
]

SKIP = {}
