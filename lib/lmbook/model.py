"""A decoder-only Transformer language model: the architecture, in one file. Chapter 9.

The first five definitions are the whole model, Llama-style as in SmolLM2 (pre-RMSNorm, RoPE, GQA, SwiGLU):

    x_0 = E[ids];   x = x + Attn(Norm(x)),   x = x + FFN(Norm(x))   (L blocks);   logits = Norm(x) E^T

``plain_forward`` (chapter 9's listing) is their forward pass in one function, without later chapters' hooks.
The variants that other chapters compare are small named pieces that the page calls, chosen by name in the config:

- norms (``make_norm``): RMSNorm, or LayerNorm (GPT-2, the 2017 Transformer), from ``lmbook.normalization``;
- feed-forward networks (``make_ffn``): SwiGLU, or GPT-2's :class:`GeluFeedForward`;
- blocks (``make_block``): pre-norm, or :class:`PostNormBlock` (the 2017 Transformer, BERT);
- positions: RoPE on queries and keys, none, or chapter 12's learned and sinusoidal tables added to the
  embeddings (``embed``) and ALiBi's bias on the scores (``alibi_mask``).

Left out on purpose: training (``lmbook.training``), weights (``lmbook.pretrained``), the KV cache (chapter 11
plugs one in through ``forward(..., cache=)``), mixture-of-experts, mixed precision and multi-device runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import validate
from .attention import fast_attention, merge_heads, split_heads
from .normalization import LayerNorm, RMSNorm
from .positional import alibi_bias, rope_cos_sin, rope_inv_freq, rotate_pairs, sinusoidal_encoding

__all__ = ["TransformerConfig", "Transformer", "Block", "CausalSelfAttention", "FeedForward", "GeluFeedForward",
           "PostNormBlock", "RMSNorm", "LayerNorm", "plain_forward"]

NORMS, NORM_POSITIONS, FFNS, POSITIONALS = ("layernorm", "rmsnorm"), ("pre", "post"), ("gelu", "swiglu"), (
    "none", "learned", "rope", "sinusoidal", "alibi")


@dataclass
class TransformerConfig:
    """Every size and choice of a model; the defaults are a tiny Llama-style model. Chapter 9."""
    vocab_size: int = 2404          # V, the number of token ids
    context_length: int = 128       # longest sequence; sizes the learned position table
    d_model: int = 128              # d, the width of the residual stream
    n_layers: int = 4               # L, the number of blocks
    n_heads: int = 4                # H query heads of size d_h = d / H
    n_kv_heads: int | None = None   # H_kv key/value heads: None = H (MHA), 1 = MQA, a divisor of H = GQA
    d_ff: int | None = None         # FFN hidden width; None = 4 d (GELU) or 8/3 d rounded up to 8 (SwiGLU)
    norm: str = "rmsnorm"           # "rmsnorm" | "layernorm"
    norm_position: str = "pre"      # "pre" (GPT-2, Llama) | "post" (the 2017 Transformer, BERT)
    norm_eps: float = 1e-5          # added to the mean square (or the variance) before the square root
    ffn: str = "swiglu"             # "swiglu" | "gelu"
    positional: str = "rope"        # "rope" | "none" | "learned" | "sinusoidal" | "alibi" (chapter 12)
    rope_base: float = 10000.0      # RoPE's base b in theta_i = b^(-2i/d_h)
    tie_embeddings: bool = True     # W_out = E: the output layer reuses the embedding matrix
    bias: bool = False              # biases in every linear layer and LayerNorm (GPT-2: True)
    dropout: float = 0.0            # on the embeddings and on each residual branch while training
    def __post_init__(self):
        _check_config(self)
        self.n_kv_heads, self.d_ff = self.n_kv_heads or self.n_heads, self.d_ff or default_d_ff(self)
    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class CausalSelfAttention(nn.Module):
    """softmax(q k^T / sqrt(d_h) + causal mask) v in every head, then W_O: x (B, T, d) -> (B, T, d), with
    RoPE on q and k, H_kv <= H key/value heads (chapter 8) and chapter 11's KV cache. Chapter 9."""
    def __init__(self, config: TransformerConfig, layer_idx: int):
        super().__init__()
        _check_layer(config, layer_idx)
        self.n_heads, self.n_kv_heads, self.layer_idx = config.n_heads, config.n_kv_heads, layer_idx
        self.alibi = config.positional == "alibi"  # chapter 12
        self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=config.bias)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=config.bias)  # GQA: fewer
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=config.bias)
        self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=config.bias)
    def forward(self, x, rope=None, cache=None):  # rope: (cos, sin) of every position's angles
        _check_activations(x, self.q_proj.in_features, cache)
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, d_h)
        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, H_kv, T, d_h)
        v = split_heads(self.v_proj(x), self.n_kv_heads)  # (B, H_kv, T, d_h)
        if rope is not None:
            q, k = rotate_pairs(q, *rope), rotate_pairs(k, *rope)
        if cache is not None:  # store this step's keys and values, get back all of them
            k, v = cache.update(self.layer_idx, k, v)  # (B, H_kv, T_past + T, d_h)
        mask = alibi_mask(q, k) if self.alibi else None
        out = fast_attention(q, k, v, mask=mask, is_causal=True)  # (B, H, T, d_h); chapter 7's SDPA, by tiles
        return self.o_proj(merge_heads(out))  # (B, T, d)


class FeedForward(nn.Module):
    """SwiGLU, Llama's per-token network: W_down (SiLU(W_gate x) * W_up x), x (..., d) -> (..., d); the gate
    SiLU(W_gate x) scales the up projection elementwise (Shazeer 2020). Chapter 9."""
    def __init__(self, config: TransformerConfig):
        super().__init__()
        _check_is_config(config)
        self.gate_proj = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.bias)
    def forward(self, x):
        _check_activations(x, self.up_proj.in_features, ndim=None)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """A pre-norm block (GPT-2, Llama): x + Attn(Norm(x)), then x + FFN(Norm(x)); x (B, T, d). Chapter 9."""
    def __init__(self, config: TransformerConfig, layer_idx: int):
        super().__init__()
        self.attn_norm, self.attn = make_norm(config), CausalSelfAttention(config, layer_idx)
        self.ffn_norm, self.ffn = make_norm(config), make_ffn(config)
        self.dropout = nn.Dropout(config.dropout)
    def forward(self, x, rope=None, cache=None):  # x is checked by the norm and the attention it enters
        x = x + self.dropout(self.attn(self.attn_norm(x), rope, cache))  # the stream itself is never normalised
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class Transformer(nn.Module):
    """ids (B, T) -> logits (B, T, V), logits[:, t] scoring the token after ids[:, t]; positions (T,) or (B, T)
    default to 0 .. T-1 after any cached tokens (chapter 11); last_only: the last position's only. Chapter 9."""
    def __init__(self, config: TransformerConfig):
        super().__init__()
        _check_is_config(config)
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)  # E
        self.pos_emb = nn.Embedding(config.context_length, config.d_model) if config.positional == "learned" else None
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(make_block(config, i) for i in range(config.n_layers))
        self.final_norm = make_final_norm(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)  # W_out
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one matrix, used at both ends
        self.inv_freq = rope_inv_freq(config.head_dim, config.rope_base) if config.positional == "rope" else None
        init_weights(self)
    def forward(self, ids, positions=None, cache=None, last_only=False):
        _check_forward(self, ids, positions, cache, last_only)
        positions = next_positions(ids, cache) if positions is None else positions  # (T,) or (B, T)
        x = self.dropout(embed(self, ids, positions))  # (B, T, d)
        rope = None if self.inv_freq is None else rope_angles(positions, self.inv_freq, x.dtype)  # for all layers
        for block in self.blocks:
            x = block(x, rope, cache)
        x = x[:, -1:] if last_only else x  # (B, 1, d) or (B, T, d)
        return self.lm_head(self.final_norm(x))  # (B, 1 or T, V)
    def num_parameters(self, exclude_embeddings: bool = False) -> int:  # a tied matrix counts once
        validate.boolean("exclude_embeddings", exclude_embeddings)
        skip = ("tok_emb.", "pos_emb.") if exclude_embeddings else ()
        return sum(p.numel() for name, p in self.named_parameters() if not name.startswith(skip))


def plain_forward(model: Transformer, ids: torch.Tensor) -> torch.Tensor:
    """Transformer.forward of a pre-norm RoPE model, spelled out without the KV cache, ALiBi, dropout and input
    checks: ids (B, T) -> logits (B, T, V), the same logits (tests/test_model.py). Chapter 9."""
    _check_plain(model, ids)
    x = model.tok_emb(ids)  # (B, T, d): the residual stream
    cos_sin = rope_angles(torch.arange(ids.shape[1], device=ids.device), model.inv_freq, x.dtype)  # per position
    for block in model.blocks:
        attn, h = block.attn, block.attn_norm(x)  # the sub-layer reads a normalised copy of the stream
        q = rotate_pairs(split_heads(attn.q_proj(h), attn.n_heads), *cos_sin)  # (B, H, T, d_h)
        k = rotate_pairs(split_heads(attn.k_proj(h), attn.n_kv_heads), *cos_sin)  # (B, H_kv, T, d_h)
        v = split_heads(attn.v_proj(h), attn.n_kv_heads)  # (B, H_kv, T, d_h)
        x = x + attn.o_proj(merge_heads(fast_attention(q, k, v, is_causal=True)))  # and writes into it
        x = x + block.ffn(block.ffn_norm(x))
    return model.lm_head(model.final_norm(x))  # (B, T, V)


# ----- the variants the page chooses between by name --------------------------------------------------------------

def make_norm(config: TransformerConfig) -> nn.Module:
    """config.norm: "rmsnorm" -> RMSNorm, "layernorm" -> LayerNorm (with b when config.bias)."""
    _check_is_config(config)  # the first thing Block.__init__ does with its config
    if config.norm == "layernorm":
        return LayerNorm(config.d_model, config.norm_eps, bias=config.bias)
    return RMSNorm(config.d_model, config.norm_eps)


def make_final_norm(config: TransformerConfig) -> nn.Module:
    """The norm before the output layer: pre-norm blocks need it, post-norm blocks end normalised already."""
    return make_norm(config) if config.norm_position == "pre" else nn.Identity()


class GeluFeedForward(nn.Module):
    """GPT-2's network: W_down GELU(W_up x), x (..., d) -> (..., d), with the exact GELU x Phi(x) (GPT-2 used
    a tanh approximation). Chapter 9."""
    def __init__(self, config: TransformerConfig):
        super().__init__()
        _check_is_config(config)
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.bias)
    def forward(self, x):
        _check_activations(x, self.up_proj.in_features, ndim=None)
        return self.down_proj(F.gelu(self.up_proj(x)))


def make_ffn(config: TransformerConfig) -> nn.Module:
    """config.ffn: "swiglu" -> FeedForward, "gelu" -> GeluFeedForward."""
    return GeluFeedForward(config) if config.ffn == "gelu" else FeedForward(config)


class PostNormBlock(Block):
    """A post-norm block (the 2017 Transformer, BERT): x = Norm(x + Attn(x)), then Norm(x + FFN(x)). Chapter 9."""
    def forward(self, x, rope=None, cache=None):  # x is checked by the attention it enters
        x = self.attn_norm(x + self.dropout(self.attn(x, rope, cache)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


def make_block(config: TransformerConfig, layer_idx: int) -> Block:
    """config.norm_position: "pre" -> Block, "post" -> PostNormBlock."""
    return PostNormBlock(config, layer_idx) if config.norm_position == "post" else Block(config, layer_idx)


def embed(model: Transformer, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x_0 = E[ids] (B, T, d), plus chapter 12's absolute positions: a learned P[positions], or the fixed
    sinusoids with E scaled by sqrt(d) (Vaswani et al.). RoPE and ALiBi act inside attention instead."""
    x = model.tok_emb(ids)  # (B, T, d)
    if model.pos_emb is not None:
        x = x + model.pos_emb(positions)
    if model.config.positional == "sinusoidal":
        table = sinusoidal_encoding(int(positions.max()) + 1, model.config.d_model).to(x)  # (max position + 1, d)
        x = x * math.sqrt(model.config.d_model) + table[positions]
    return x


def next_positions(ids: torch.Tensor, cache) -> torch.Tensor:
    """0 .. T-1 for ids (B, T), or, with a cache that holds n tokens, n .. n + T - 1: shape (T,)."""
    start = 0 if cache is None else int(cache.seq_len)
    return torch.arange(start, start + ids.shape[1], device=ids.device)


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype):
    """cos and sin of every position's RoPE angles, shaped to broadcast over the heads of q and k. The model
    keeps inv_freq as a plain float32 tensor, not a buffer, so that model.to(dtype) never rounds it."""
    cos, sin = rope_cos_sin(positions, inv_freq, dtype)  # (T, d_h/2) or (B, T, d_h/2)
    return (cos, sin) if positions.dim() == 1 else (cos[:, None], sin[:, None])  # (B, 1, T, d_h/2)


def alibi_mask(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """ALiBi's distance penalty (H, T_q, T_k) for q (B, H, T_q, d_h) and k (B, H_kv, T_k, d_h). Chapter 12."""
    return alibi_bias(q.shape[1], q.shape[-2], k.shape[-2], q.device).to(q.dtype)


def init_weights(model: Transformer) -> None:
    """GPT-2's initialisation: N(0, 0.02^2) for every matrix and embedding, zero biases, and std 0.02 / sqrt(2 L)
    for the layers that write into the residual stream (W_O and W_down), so its variance does not grow with L."""
    model.apply(_init_module)
    for name, p in model.named_parameters():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            nn.init.normal_(p, std=0.02 / math.sqrt(2 * model.config.n_layers))


def _init_module(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def default_d_ff(config: TransformerConfig) -> int:
    """4 d for GELU; 8/3 d rounded up to a multiple of 8 for SwiGLU (its three matrices cost what two of 4 d do)."""
    return 4 * config.d_model if config.ffn == "gelu" else 8 * math.ceil(8 * config.d_model / 3 / 8)


# ----- argument checks --------------------------------------------------------------------------------------------

def _check_config(c: TransformerConfig) -> None:
    for name in ("vocab_size", "context_length", "d_model", "n_layers", "n_heads"):
        validate.integer(name, getattr(c, name))
    for name in ("n_kv_heads", "d_ff"):
        if getattr(c, name) is not None:
            validate.integer(name, getattr(c, name))
    for name, options in (("norm", NORMS), ("norm_position", NORM_POSITIONS), ("ffn", FFNS),
                          ("positional", POSITIONALS)):
        validate.choice(name, getattr(c, name), options)
    validate.number("norm_eps", c.norm_eps, low=0, low_open=True)
    validate.number("rope_base", c.rope_base, low=1, low_open=True)
    validate.boolean("tie_embeddings", c.tie_embeddings)
    validate.boolean("bias", c.bias)
    validate.number("dropout", c.dropout, low=0, high=1, high_open=True)
    n_kv_heads = c.n_heads if c.n_kv_heads is None else c.n_kv_heads
    if c.d_model % c.n_heads:
        raise ValueError(f"n_heads={c.n_heads} must divide d_model={c.d_model}")
    if c.n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={c.n_heads}")
    if c.positional == "rope" and (c.d_model // c.n_heads) % 2:
        raise ValueError(f"RoPE rotates pairs, so head_dim = d_model / n_heads must be even, got "
                         f"d_model={c.d_model} / n_heads={c.n_heads} = {c.d_model // c.n_heads}")


def _check_is_config(config) -> None:
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {validate.describe(config)}")


def _check_layer(config, layer_idx) -> None:
    _check_is_config(config)
    validate.integer("layer_idx", layer_idx, low=0, high=config.n_layers - 1)


def _check_cache(cache) -> None:
    if cache is not None and (isinstance(cache, type) or not (hasattr(cache, "seq_len") and callable(
            getattr(cache, "update", None)))):
        raise TypeError(f"cache must be None or a KV cache with seq_len and update(layer_idx, k, v) (chapter 11), "
                        f"got {validate.describe(cache)}")


def _check_activations(x, d: int, cache=None, ndim: int | None = 3) -> None:
    """Cheap checks of a layer's input (type, shape): no pass over the values, so NaN is not looked for."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor of activations, got {validate.describe(x)}")
    if (ndim is not None and x.dim() != ndim) or x.dim() == 0 or x.shape[-1] != d:
        want = "(B, T, d)" if ndim == 3 else "(..., d)"
        raise ValueError(f"x must have shape {want} with d={d}, got {tuple(x.shape)}")
    _check_cache(cache)


def _check_plain(model, ids) -> None:
    if not isinstance(model, Transformer) or (model.config.positional, model.config.norm_position) != ("rope", "pre"):
        raise ValueError(f"model must be a pre-norm RoPE Transformer, got {validate.describe(model)}")
    _check_forward(model, ids, None, None, False)


def _check_forward(model: Transformer, ids, positions, cache, last_only) -> None:
    """ids and positions as Transformer.forward documents them; the ids range costs one .min() and .max()."""
    V = model.config.vocab_size
    if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dtype == torch.bool or ids.dim() != 2:
        raise ValueError(f"ids must be an integer tensor of shape (B, T), got {validate.describe(ids)}")
    if ids.numel() == 0:
        raise ValueError(f"ids must hold at least one token, got shape {tuple(ids.shape)}")
    if ids.min() < 0 or ids.max() >= V:
        bad = ids[(ids < 0) | (ids >= V)][0].item()
        raise ValueError(f"ids must be token ids in [0, {V - 1}] (max id {V - 1}), found {bad}")
    _check_cache(cache)
    validate.boolean("last_only", last_only)
    B, T = ids.shape
    if positions is not None and (
            not isinstance(positions, torch.Tensor) or positions.is_floating_point() or positions.dtype == torch.bool
            or positions.dim() not in (1, 2) or positions.shape[-1] != T
            or (positions.dim() == 2 and positions.shape[0] not in (1, B))):
        raise ValueError(f"positions must be an integer tensor of shape (T,) or (B, T) with T={T} and B={B}, got "
                         f"{validate.describe(positions)}")
    if positions is not None and positions.min() < 0:
        raise ValueError(f"positions must be >= 0, found {positions.min().item()}")
    if model.pos_emb is not None:  # the learned table has context_length rows
        last = T - 1 + int(cache.seq_len) if positions is None and cache is not None else (
            T - 1 if positions is None else int(positions.max()))
        if last >= model.config.context_length:
            raise ValueError(f"position {last} is beyond the learned position table (context_length="
                             f"{model.config.context_length}); positions must be < context_length")
