"""The encoder-decoder Transformer (Vaswani et al. 2017), built from chapter 7's attention. Chapter 13.

An encoder of bidirectional self-attention reads the source once and leaves a *memory*, one vector per source
token; a decoder of causal self-attention writes the target, and in every layer its **cross-attention** reads
the memory (queries from the target, keys and values from the source):

    m = Encoder(E[src] + P);   y = Decoder(E[tgt] + P, m);   logits = y E^T   (one E, shared by all three)

:class:`Seq2SeqConfig`, :class:`EncoderLayer`, :class:`DecoderLayer` and :class:`Seq2Seq` are the model on one
page; ``n_decoder_layers=0`` leaves an encoder-only model (BERT's shape) and ``n_encoder_layers=0`` a
decoder-only one (the decoder layers then have no cross-attention). The defaults are the 2017 layout:
post-norm LayerNorm with biases, sinusoidal positions, GELU (2017: ReLU) feed-forward networks.
``norm_position="pre"`` with ``norm="rmsnorm"`` and ``bias=False`` is T5-like in its norms and biases only
(T5's relative position buckets, ReLU/GeGLU FFN and BART's embedding LayerNorm cannot be set here).
:func:`greedy_decode` and :func:`beam_search` run the encoder and the cross-attention's key and value
projections once per source (:meth:`Seq2Seq.cross_kv`), not once per step.

Left out on purpose: T5's relative position buckets (``lmbook.positional.relative_position_bucket``,
chapter 12), a KV cache for the decoder's self-attention (chapter 11), dropout schedules, label smoothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from . import validate
from .attention import MultiHeadAttention, merge_heads, padding_mask, scaled_dot_product_attention, split_heads
from .model import TransformerConfig, _init_module, embed, make_ffn, make_norm

__all__ = ["Seq2SeqConfig", "EncoderLayer", "DecoderLayer", "Seq2Seq", "cross_attention", "greedy_decode",
           "beam_search", "mlm_mask", "PAD", "BOS", "EOS"]

PAD, BOS, EOS = 0, 1, 2  # reserved ids: padding, start of target, end of target


@dataclass
class Seq2SeqConfig:
    """Sizes and choices of an encoder-decoder; the defaults: the 2017 layout but a GELU FFN, toy size. Ch. 13."""
    vocab_size: int = 32            # one vocabulary for source and target: the embedding is shared
    context_length: int = 32        # longest source or target; sizes a learned position table
    d_model: int = 64               # d, the width of both residual streams
    n_heads: int = 4                # H heads in every attention layer
    n_encoder_layers: int = 2       # N encoder layers; 0 = a decoder-only model
    n_decoder_layers: int = 2       # M decoder layers; 0 = an encoder-only model
    d_ff: int | None = None         # FFN width; None = 4 d
    norm: str = "layernorm"         # "layernorm" (2017, BART) | "rmsnorm" (T5)
    norm_position: str = "post"     # "post" (2017, BART) | "pre" (T5, most large models since)
    ffn: str = "gelu"               # "gelu" | "swiglu"
    positional: str = "sinusoidal"  # "sinusoidal" (2017) | "learned" (BART)
    bias: bool = True               # biases in linear layers and LayerNorm (T5: False)
    def __post_init__(self):
        _check_config(self)
    def block(self) -> TransformerConfig:  # the sizes lmbook.model's norms and FFNs read
        return TransformerConfig(vocab_size=self.vocab_size, context_length=self.context_length, d_model=self.d_model,
                                 n_heads=self.n_heads, d_ff=self.d_ff, norm=self.norm, ffn=self.ffn,
                                 norm_position=self.norm_position, positional=self.positional, bias=self.bias)


class EncoderLayer(nn.Module):
    """x (B, S, d) -> (B, S, d): bidirectional self-attention, then an FFN, each in a residual. Chapter 13."""
    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        _check_is_config(config)
        c = config.block()
        self.pre = config.norm_position == "pre"
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, bias=c.bias)
        self.ffn, self.norm1, self.norm2 = make_ffn(c), make_norm(c), make_norm(c)
    def forward(self, x, mask=None):  # mask (B, 1, 1, S): True = a real source token
        x = residual(x, self.norm1, lambda h: self.self_attn(h, mask=mask), self.pre)  # every token sees all
        return residual(x, self.norm2, self.ffn, self.pre)


class DecoderLayer(nn.Module):
    """y (B, T, d) -> (B, T, d): causal self-attention, cross-attention to the memory, an FFN. Chapter 13."""
    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        _check_is_config(config)
        c = config.block()
        self.pre = config.norm_position == "pre"
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, bias=c.bias)
        self.cross_attn = MultiHeadAttention(c.d_model, c.n_heads, bias=c.bias) if config.n_encoder_layers else None
        self.ffn, self.norm1, self.norm2, self.norm3 = make_ffn(c), make_norm(c), make_norm(c), make_norm(c)
    def forward(self, y, cross_kv=None, memory_mask=None):  # cross_kv: this layer's (K, V) of the memory
        _check_layer_input(self, y, cross_kv, memory_mask)
        y = residual(y, self.norm1, lambda h: self.self_attn(h, is_causal=True), self.pre)
        if self.cross_attn is not None:
            y = residual(y, self.norm2, lambda h: cross_attention(self.cross_attn, h, *cross_kv, memory_mask), self.pre)
        return residual(y, self.norm3, self.ffn, self.pre)


class Seq2Seq(nn.Module):
    """An encoder-decoder with one embedding E for source, target and output layer. Chapter 13."""
    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        _check_is_config(config)
        self.config, c = config, config.block()
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)  # E, shared
        self.pos_emb = nn.Embedding(c.context_length, c.d_model) if c.positional == "learned" else None
        self.encoder = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        final = (lambda: make_norm(c)) if config.norm_position == "pre" else nn.Identity  # pre-norm ends un-normed
        self.encoder_norm, self.decoder_norm = final(), final()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied: W_out = E
        self.apply(_init_module)  # N(0, 0.02^2) for every matrix and embedding, zero biases (chapter 9)
    def encode(self, src, src_lengths):
        """src (B, S) right-padded ids, src_lengths (B,) -> memory (B, S, d) and its mask (B, 1, 1, S)."""
        _check_src(self, src, src_lengths)
        mask = padding_mask(src_lengths, src.shape[1])  # no query reads a padded key
        x = embed(self, src, torch.arange(src.shape[1], device=src.device))  # (B, S, d)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.encoder_norm(x), mask
    def cross_kv(self, memory):
        """Each decoder layer's keys and values of the memory, (B, H, S, d_h) twice: once per source."""
        _check_memory(self, memory)
        return [(split_heads(layer.cross_attn.k_proj(memory), layer.cross_attn.n_heads),
                 split_heads(layer.cross_attn.v_proj(memory), layer.cross_attn.n_heads)) for layer in self.decoder]
    def decode(self, tgt, cross=None, memory_mask=None):
        """tgt (B, T) ids -> logits (B, T, V); cross: cross_kv(memory) (None for a decoder-only model)."""
        _check_tgt(self, tgt, cross)
        _check_memory_mask(memory_mask)
        y = embed(self, tgt, torch.arange(tgt.shape[1], device=tgt.device))  # (B, T, d)
        for i, layer in enumerate(self.decoder):
            y = layer(y, None if cross is None else cross[i], memory_mask)
        return self.lm_head(self.decoder_norm(y))  # (B, T, V)
    def forward(self, src, src_lengths, tgt):
        """Teacher forcing: logits (B, T, V) of the target tokens after tgt[:, :t+1], given the source."""
        memory, mask = self.encode(src, src_lengths)
        return self.decode(tgt, self.cross_kv(memory), mask)


def residual(x, norm, sublayer, pre: bool):
    """Pre-norm x + f(Norm(x)) (T5, GPT-2), or post-norm Norm(x + f(x)) (the 2017 Transformer, BERT, BART)."""
    return x + sublayer(norm(x)) if pre else norm(x + sublayer(x))


def cross_attention(attn: MultiHeadAttention, y, k, v, memory_mask=None):
    """softmax(Q K^T / sqrt(d_h) + M) V W_O with Q = y W_Q (B, H, T, d_h) from the target and K, V (B, H, S, d_h)
    projected from the memory beforehand; memory_mask (B, 1, 1, S) hides padded source tokens. Chapter 13."""
    _check_cross(attn, y, k, v, memory_mask)
    q = split_heads(attn.q_proj(y), attn.n_heads)  # (B, H, T, d_h)
    out = scaled_dot_product_attention(q, k, v, mask=memory_mask)  # (B, H, T, d_h): no causal mask here
    return attn.o_proj(merge_heads(out))  # (B, T, d)


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src, src_lengths, max_len: int = 20):
    """The most probable token at each step, for a batch of sources: (B, <= max_len) ids, PAD after EOS."""
    _check_decode(model, max_len)
    memory, mask = model.encode(src, src_lengths)  # once
    cross = model.cross_kv(memory)  # once: every step below reuses these keys and values
    out = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        nxt = model.decode(out, cross, mask)[:, -1].argmax(-1)  # (B,)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        out, done = torch.cat([out, nxt[:, None]], dim=1), done | (nxt == EOS)
        if done.all():
            break
    return out[:, 1:]


@torch.no_grad()
def beam_search(model: Seq2Seq, src, max_len: int = 20, num_beams: int = 4):
    """The best of num_beams hypotheses by total log-probability for ONE source src (S,): (ids, score)."""
    _check_decode(model, max_len, num_beams, src)
    memory, mask = model.encode(src[None], torch.tensor([src.shape[0]], device=src.device))
    cross = model.cross_kv(memory)  # (1, H, S, d_h): broadcast over the beams below, never recomputed
    beams, scores, finished = [[BOS]], [0.0], []  # finished: (ids, total log-probability)
    for _ in range(max_len):
        ids = torch.tensor(beams, device=src.device)  # (n, t)
        layer_kv = [(k.expand(len(beams), -1, -1, -1), v.expand(len(beams), -1, -1, -1)) for k, v in cross]
        logp = model.decode(ids, layer_kv, mask)[:, -1].double().log_softmax(-1)  # (n, V)
        total = (torch.tensor(scores, dtype=torch.float64)[:, None] + logp).flatten()  # (n * V,)
        top, V = total.topk(min(num_beams, total.numel())), logp.shape[1]
        grown = [(beams[i // V] + [i % V], s) for s, i in zip(top.values.tolist(), top.indices.tolist(), strict=False)]
        finished += [(seq, s) for seq, s in grown if seq[-1] == EOS]
        beams, scores = [seq for seq, _ in grown if seq[-1] != EOS], [s for seq, s in grown if seq[-1] != EOS]
        if not beams or (finished and max(s for _, s in finished) >= scores[0]):  # log-probs only fall
            break
    best = max(finished or list(zip(beams, scores, strict=False)), key=lambda f: f[1])
    return best[0][1:], best[1]


def mlm_mask(ids, lengths, mask_id: int, first_id: int, vocab_size: int, p: float = 0.15, generator=None):
    """BERT's masked-LM corruption of right-padded ids (B, S): each real token is chosen with probability p; a
    chosen one becomes mask_id (80%), a random id in [first_id, vocab_size) (10%) or stays (10%). Returns the corrupted
    ids and the targets (the original id where chosen, PAD elsewhere). Chapter 13."""
    _check_mlm(ids, lengths, mask_id, first_id, vocab_size, p, generator)
    real = torch.arange(ids.shape[1]) < lengths[:, None]  # (B, S)
    u = torch.rand(ids.shape, generator=generator)
    chosen = real & (u < p)
    r = torch.rand(ids.shape, generator=generator)  # which of the three fates
    random_ids = torch.randint(first_id, vocab_size, ids.shape, generator=generator)
    corrupted = torch.where(chosen & (r < 0.8), torch.full_like(ids, mask_id), ids)
    corrupted = torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, corrupted)
    return corrupted, torch.where(chosen, ids, torch.full_like(ids, PAD))


# ----- argument checks ---------------------------------------------------------------------------------------

def _check_config(c) -> None:
    for name in ("vocab_size", "context_length", "d_model", "n_heads"):
        validate.integer(name, getattr(c, name))
    for name in ("n_encoder_layers", "n_decoder_layers"):
        validate.integer(name, getattr(c, name), low=0)
    if c.n_encoder_layers + c.n_decoder_layers == 0:
        raise ValueError("n_encoder_layers and n_decoder_layers must not both be 0")
    if c.d_ff is not None:
        validate.integer("d_ff", c.d_ff)
    for name, options in (("norm", ("layernorm", "rmsnorm")), ("norm_position", ("post", "pre")),
                          ("ffn", ("gelu", "swiglu")), ("positional", ("sinusoidal", "learned"))):
        validate.choice(name, getattr(c, name), options)
    validate.boolean("bias", c.bias)
    if c.d_model % c.n_heads or (c.positional == "sinusoidal" and c.d_model % 2):
        raise ValueError(f"d_model must be even and divisible by n_heads = {c.n_heads}, got {c.d_model}")
    if c.vocab_size <= EOS:
        raise ValueError(f"vocab_size must be > {EOS} (ids 0, 1, 2 are PAD, BOS, EOS), got {c.vocab_size}")


def _check_is_config(config) -> None:
    if not isinstance(config, Seq2SeqConfig):
        raise TypeError(f"config must be a Seq2SeqConfig, got {validate.describe(config)}")


def _check_src(model, src, src_lengths) -> None:
    _check_seq(model, "src", src)
    validate.tensor("src_lengths", src_lengths, ndim=1, kind="int")
    if src_lengths.shape[0] != src.shape[0] or (src_lengths < 1).any() or (src_lengths > src.shape[1]).any():
        raise ValueError(f"src_lengths must hold {src.shape[0]} lengths in [1, {src.shape[1]}], got {src_lengths}")
    if not model.config.n_encoder_layers:
        raise ValueError("src must not be given to a decoder-only model (n_encoder_layers = 0): call decode")


def _check_tgt(model, tgt, cross) -> None:
    _check_seq(model, "tgt", tgt)
    wanted = bool(model.config.n_encoder_layers)
    if (cross is not None) != wanted or not model.config.n_decoder_layers or (
            wanted and (not isinstance(cross, list) or len(cross) != len(model.decoder))):
        raise ValueError("cross must be model.cross_kv(memory) (a list of one (K, V) pair per decoder layer) for an "
                         f"encoder-decoder and None for a decoder-only model, got {validate.describe(cross)}")


def _check_layer_input(layer, y, cross_kv, memory_mask) -> None:
    validate.tensor("y", y, ndim=3)
    if y.shape[-1] != layer.self_attn.d_model:
        raise ValueError(f"y must be (B, T, {layer.self_attn.d_model}), got {tuple(y.shape)}")
    if layer.cross_attn is not None and (not isinstance(cross_kv, (tuple, list)) or len(cross_kv) != 2):
        raise TypeError(f"cross_kv must be the pair (K, V) of this layer's memory, got {validate.describe(cross_kv)}")
    _check_memory_mask(memory_mask)


def _check_memory_mask(memory_mask) -> None:
    if memory_mask is not None:
        validate.tensor("memory_mask", memory_mask, kind=None, finite=False)  # a float mask may hold -inf


def _check_seq(model, name, ids) -> None:
    validate.token_ids(name, ids, model.config.vocab_size, ndim=2)
    if not 1 <= ids.shape[1] <= model.config.context_length:
        raise ValueError(f"{name} must have 1 to context_length = {model.config.context_length} tokens, "
                         f"got {ids.shape[1]}")


def _check_memory(model, memory) -> None:
    validate.tensor("memory", memory, ndim=3)
    if memory.shape[-1] != model.config.d_model or not model.config.n_decoder_layers:
        raise ValueError(f"memory must be (B, S, {model.config.d_model}) for a model with a decoder, "
                         f"got {tuple(memory.shape)}")


def _check_cross(attn, y, k, v, memory_mask) -> None:
    _check_memory_mask(memory_mask)
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be a MultiHeadAttention, got {validate.describe(attn)}")
    validate.tensor("y", y, ndim=3)
    validate.tensor("k", k, ndim=4)
    validate.tensor("v", v, ndim=4)
    if y.shape[-1] != attn.d_model or k.shape != v.shape or k.shape[1] != attn.n_heads or k.shape[-1] != attn.d_k:
        raise ValueError(f"y must be (B, T, {attn.d_model}) and k, v (B, {attn.n_heads}, S, {attn.d_k}), got y "
                         f"{tuple(y.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")


def _check_decode(model, max_len, num_beams=1, src=None) -> None:
    if not isinstance(model, Seq2Seq) or not (model.config.n_encoder_layers and model.config.n_decoder_layers):
        raise TypeError(f"model must be a Seq2Seq with an encoder and a decoder, got {validate.describe(model)}")
    if num_beams != 1 or src is not None:  # beam_search: one source, (S,)
        validate.token_ids("src", src, model.config.vocab_size, ndim=1)
    validate.integer("max_len", max_len, high=model.config.context_length)
    validate.integer("num_beams", num_beams)


def _check_mlm(ids, lengths, mask_id, first_id, vocab_size, p, generator) -> None:
    validate.integer("vocab_size", vocab_size)
    validate.token_ids("ids", ids, vocab_size, ndim=2)
    validate.tensor("lengths", lengths, ndim=1, kind="int")
    if lengths.shape[0] != ids.shape[0] or (lengths < 0).any() or (lengths > ids.shape[1]).any():
        raise ValueError(f"lengths must hold {ids.shape[0]} lengths in [0, {ids.shape[1]}], got {lengths}")
    validate.integer("mask_id", mask_id, low=PAD + 1, high=vocab_size - 1)  # never PAD, which the loss ignores
    validate.integer("first_id", first_id, low=PAD + 1, high=vocab_size - 1)
    validate.number("p", p, low=0, high=1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {validate.describe(generator)}")
