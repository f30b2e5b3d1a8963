"""Bad-input cases for lmbook.model (chapter 9): the Transformer and its layers."""

import torch
from lmbook import kv_cache as KV
from lmbook import model as M

from ._case import Case


def _config(**more):
    """A tiny model: V = 11, d = 8, 2 heads of 4, one block, learned positions up to 8 unless overridden."""
    return M.TransformerConfig(**{"vocab_size": 11, "context_length": 8, "d_model": 8, "n_layers": 1, "n_heads": 2,
                                  "positional": "learned", **more})


def _model(**more):
    torch.manual_seed(0)
    return M.Transformer(_config(**more)).eval()


def _x():
    return torch.randn(1, 3, 8, generator=torch.Generator().manual_seed(0))  # (B, T, d)


def _token():
    return torch.randn(8, generator=torch.Generator().manual_seed(0))  # one token's features (d,)


def _cache(model):
    return KV.KVCache.for_model(model, max_len=8)


# NaN or inf in a layer's activations is not looked for: it would cost a pass over the values in every layer
# at every decoding step (Transformer.forward checks its ids, which cannot be NaN).
ACTIVATIONS_OK = {"nan", "inf"}
# a norm or an FFN acts on the last axis of (..., d): more leading axes are documented input
ANY_LEADING_OK = ACTIVATIONS_OK | {"extra_dim"}
NOT_DRIVEN = ()  # rope: the (cos, sin) angles that Transformer.forward computes for its layers, not an input

POSITIONS_OK = {"extra_dim"}  # positions (T,) made (1, T): one row shared by the batch is documented input

CONFIG_FIELDS = {"vocab_size": 11, "context_length": 8, "d_model": 8, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
                 "d_ff": 16, "norm": "layernorm", "norm_position": "pre", "norm_eps": 1e-5, "ffn": "gelu",
                 "positional": "rope", "rope_base": 10000.0, "tie_embeddings": True, "bias": True, "dropout": 0.0}

CASES = [
    Case("TransformerConfig", lambda: (M.TransformerConfig, dict(CONFIG_FIELDS))),
    Case("CausalSelfAttention", lambda: (M.CausalSelfAttention, {"config": _config(), "layer_idx": 0})),
    Case("CausalSelfAttention.forward",
         lambda: (M.CausalSelfAttention(_config(positional="none"), 0), {"x": _x(), "cache": _cache(_model())}),
         ok={"x": ACTIVATIONS_OK}, kinds={"rope": NOT_DRIVEN}),
    Case("FeedForward", lambda: (M.FeedForward, {"config": _config()})),
    Case("FeedForward.forward", lambda: (M.FeedForward(_config()), {"x": _token()}), ok={"x": ANY_LEADING_OK}),
    Case("GeluFeedForward", lambda: (M.GeluFeedForward, {"config": _config(ffn="gelu")})),
    Case("GeluFeedForward.forward", lambda: (M.GeluFeedForward(_config(ffn="gelu")), {"x": _token()}),
         ok={"x": ANY_LEADING_OK}),
    Case("Block", lambda: (M.Block, {"config": _config(), "layer_idx": 0})),
    Case("Block.forward", lambda: (M.Block(_config(positional="none"), 0), {"x": _x(), "cache": _cache(_model())}),
         ok={"x": ACTIVATIONS_OK}, kinds={"rope": NOT_DRIVEN}),
    Case("PostNormBlock", lambda: (M.PostNormBlock, {"config": _config(norm_position="post"), "layer_idx": 0})),
    Case("PostNormBlock.forward",
         lambda: (M.PostNormBlock(_config(norm_position="post", positional="none"), 0),
                  {"x": _x(), "cache": _cache(_model())}),
         ok={"x": ACTIVATIONS_OK}, kinds={"rope": NOT_DRIVEN}),
    Case("Transformer", lambda: (M.Transformer, {"config": _config()})),
    Case("Transformer.forward",
         lambda: (lambda m: (m, {"ids": torch.tensor([[1, 2, 3, 4]]), "positions": torch.arange(4),
                                 "cache": _cache(m), "last_only": True}))(_model()),
         ok={"positions": POSITIONS_OK}),
    Case("Transformer.forward",  # RoPE has no position table: any position >= 0 is documented input (chapter 12)
         lambda: (lambda m: (m, {"ids": torch.tensor([[1, 2, 3, 4]]), "positions": torch.arange(4),
                                 "cache": _cache(m), "last_only": False}))(_model(positional="rope")),
         ok={"positions": POSITIONS_OK | {"huge_id"}}, label="rope"),
    Case("Transformer.num_parameters", lambda: (_model().num_parameters, {"exclude_embeddings": True})),
    Case("plain_forward", lambda: (M.plain_forward, {"model": _model(positional="rope"),
                                                     "ids": torch.tensor([[1, 2, 3, 4]])})),
]

SKIP = {}
