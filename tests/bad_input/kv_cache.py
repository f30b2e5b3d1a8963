"""Bad-input cases for lmbook.kv_cache (chapter 11): the caches, their size, int8 vectors, cached losses."""

import torch
from lmbook import kv_cache as KV
from lmbook import model as M

from ._case import Case


def _config(**more):
    return M.TransformerConfig(**{"vocab_size": 11, "context_length": 16, "d_model": 8, "n_layers": 2, "n_heads": 2,
                                  "n_kv_heads": 1, **more})


def _model():
    torch.manual_seed(0)
    return M.Transformer(_config()).eval()


def _kv():
    return torch.randn(1, 1, 2, 4, generator=torch.Generator().manual_seed(0))  # (B, H_kv, T, d)


SIZES = {"n_layers": 2, "n_kv_heads": 1, "head_dim": 4, "max_len": 6, "batch": 1, "dtype": torch.float32,
         "device": "cpu"}
# k and v are not searched for NaN or inf: append runs in every layer at every decoding step, and a pass over
# the new vectors would cost a device sync each time
KV_OK = {"nan", "inf"}

CASES = [
    Case("KVCache", lambda: (KV.KVCache, dict(SIZES))),
    Case("KVCache.for_model", lambda: (KV.KVCache.for_model, {"model": _model(), "max_len": 6, "batch": 1})),
    Case("KVCache.append", lambda: (KV.KVCache(**SIZES).append, {"layer": 0, "k": _kv(), "v": _kv()}),
         ok={"k": KV_OK, "v": KV_OK}),
    Case("KVCache.update", lambda: (KV.KVCache(**SIZES).update, {"layer": 0, "k": _kv(), "v": _kv()}),
         ok={"k": KV_OK, "v": KV_OK}),
    Case("KVCache.get", lambda: (KV.KVCache(**SIZES).get, {"layer": 0})),
    Case("KVCache.reset", lambda: (KV.KVCache(**SIZES).reset, {})),
    Case("KVCache.crop", lambda: (KV.KVCache(**SIZES).crop, {"n": 3}), ok={"n": {"zero"}}),  # crop(0) empties
    Case("RollingKVCache", lambda: (KV.RollingKVCache, {"n_layers": 2, "n_kv_heads": 1, "head_dim": 4, "window": 4,
                                                        "n_sinks": 0, "batch": 1, "dtype": torch.float32,
                                                        "device": "cpu"})),
    Case("RollingKVCache.for_model",
         lambda: (KV.RollingKVCache.for_model, {"model": _model(), "window": 4, "n_sinks": 0, "batch": 1})),
    Case("RollingKVCache.slot", lambda: (KV.RollingKVCache(2, 1, 4, window=4, n_sinks=1).slot, {"position": 7}),
         ok={"position": {"zero"}}),  # position 0, the first token, is documented input
    Case("Int8KVCache", lambda: (KV.Int8KVCache, dict(SIZES))),
    Case("kv_cache_bytes", lambda: (KV.kv_cache_bytes, {"config": _config(), "seq_len": 10, "batch": 2,
                                                        "dtype_bytes": 2}),
         ok={"config": {"wrong_type"},  # a dict of the sizes is documented input (a published model's numbers)
             "seq_len": {"zero"}}),  # an empty cache takes 0 bytes
    Case("quantize_int8", lambda: (KV.quantize_int8, {"x": torch.randn(4, generator=torch.Generator().manual_seed(0))}),
         ok={"x": {"extra_dim"}}),  # x (..., d): any leading axes are documented input
    Case("cached_nll", lambda: (lambda m: (KV.cached_nll, {"model": m, "ids": torch.tensor([1, 2, 3, 4, 5]),
                                                           "cache": KV.KVCache.for_model(m, 8), "prefill": 2}))(
        _model())),
]

SKIP = {}
