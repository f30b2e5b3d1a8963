"""Bad-input cases for lmbook.seq2seq (chapter 13): the encoder-decoder, its layers, decoding and MLM masking."""

import torch
from lmbook import seq2seq as S

from ._case import Case

FIELDS = {"vocab_size": 13, "context_length": 8, "d_model": 8, "n_heads": 2, "n_encoder_layers": 1,
          "n_decoder_layers": 1, "d_ff": 16, "norm": "layernorm", "norm_position": "post", "ffn": "gelu",
          "positional": "sinusoidal", "bias": True}


def _config(**more):
    return S.Seq2SeqConfig(**{**FIELDS, **more})


def _model(**more):
    torch.manual_seed(0)
    return S.Seq2Seq(_config(**more)).eval()


def _t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _kv():
    return _t(2, 2, 5, 4, seed=1), _t(2, 2, 5, 4, seed=2)  # (B, H, S, d_h)


# activations inside a layer are not scanned for NaN or inf (a pass over every value at every step); the attention
# layer they enter checks their shapes
ACTIVATIONS_OK = {"nan", "inf"}
MASK_OK = {"float_dtype", "extra_dim", "missing_dim"}  # a mask broadcasts against the scores: documented

CASES = [
    Case("Seq2SeqConfig", lambda: (S.Seq2SeqConfig, dict(FIELDS)),
         ok={"n_encoder_layers": {"zero"}, "n_decoder_layers": {"zero"}}),  # 0: decoder-only or encoder-only
    Case("EncoderLayer", lambda: (S.EncoderLayer, {"config": _config()})),
    Case("EncoderLayer.forward",
         lambda: (S.EncoderLayer(_config()), {"x": _t(2, 5, 8), "mask": torch.ones(2, 1, 1, 5, dtype=torch.bool)}),
         ok={"x": ACTIVATIONS_OK, "mask": MASK_OK}),
    Case("DecoderLayer", lambda: (S.DecoderLayer, {"config": _config()})),
    Case("DecoderLayer.forward", lambda: (S.DecoderLayer(_config()), {"y": _t(2, 3, 8), "cross_kv": _kv(),
                                                                       "memory_mask": torch.ones(2, 1, 1, 5,
                                                                                                 dtype=torch.bool)}),
         ok={"y": ACTIVATIONS_OK, "memory_mask": MASK_OK}),
    Case("Seq2Seq", lambda: (S.Seq2Seq, {"config": _config()})),
    Case("Seq2Seq.encode", lambda: (_model().encode, {"src": torch.tensor([[3, 4, 5], [6, 7, 0]]),
                                                      "src_lengths": torch.tensor([3, 2])})),
    Case("Seq2Seq.cross_kv", lambda: (_model().cross_kv, {"memory": _t(2, 5, 8)}), ok={"memory": ACTIVATIONS_OK}),
    Case("Seq2Seq.decode", lambda: (lambda m: (m.decode, {"tgt": torch.tensor([[1, 4, 5]]),
                                                          "cross": m.cross_kv(_t(1, 5, 8)),
                                                          "memory_mask": torch.ones(1, 1, 1, 5, dtype=torch.bool)}))(
        _model()), ok={"memory_mask": MASK_OK}),
    Case("Seq2Seq.forward", lambda: (_model(), {"src": torch.tensor([[3, 4, 5], [6, 7, 0]]),
                                                "src_lengths": torch.tensor([3, 2]), "tgt": torch.tensor([[1, 4],
                                                                                                          [1, 5]])})),
    Case("cross_attention", lambda: (S.cross_attention, {"attn": _model().decoder[0].cross_attn, "y": _t(2, 3, 8),
                                                         "k": _kv()[0], "v": _kv()[1],
                                                         "memory_mask": torch.ones(2, 1, 1, 5, dtype=torch.bool)}),
         ok={"memory_mask": MASK_OK}),
    Case("greedy_decode", lambda: (S.greedy_decode, {"model": _model(), "src": torch.tensor([[3, 4, 5], [6, 7, 0]]),
                                                     "src_lengths": torch.tensor([3, 2]), "max_len": 4})),
    Case("beam_search", lambda: (S.beam_search, {"model": _model(), "src": torch.tensor([3, 4, 5]), "max_len": 4,
                                                 "num_beams": 2}),
         kinds={"src": ("not_tensor", "float_dtype", "negative_id", "huge_id", "extra_dim", "none")}),
    Case("mlm_mask", lambda: (S.mlm_mask, {"ids": torch.tensor([[5, 6, 7], [8, 9, 0]]), "lengths": torch.tensor([3, 2]),
                                           "mask_id": 4, "first_id": 5, "vocab_size": 13, "p": 0.15,
                                           "generator": torch.Generator().manual_seed(0)}),
         ok={"p": {"zero"}}),  # p = 0: nothing is chosen, documented
]
SKIP = {"Seq2SeqConfig.block": "takes no arguments: the TransformerConfig of a checked Seq2SeqConfig"}
