"""A decoder-only Transformer language model: the architecture, in one file.

One model class, :class:`Transformer`, configured by :class:`TransformerConfig`, covers GPT-2-style and
Llama-style models:

    x_0 = E[ids] (+ P[positions] for learned positions)
    pre-norm (GPT-2, Llama):  x = x + Attn(Norm(x)),   x = x + FFN(Norm(x));  logits = Norm(x) W_out^T
    post-norm (2017, BERT):   x = Norm(x + Attn(x)),   x = Norm(x + FFN(x));  logits = x W_out^T

- Norm: LayerNorm (x - mean) / sqrt(var + eps) * g + b, or RMSNorm x / sqrt(mean(x^2) + eps) * g;
- FFN: GELU MLP W_down GELU(W_up x), or SwiGLU W_down (SiLU(W_gate x) * W_up x);
- Attn: causal multi-head attention through ``lmbook.attention`` with n_kv_heads = n_heads (MHA),
  1 (MQA) or a divisor of n_heads (GQA); positions: none, learned absolute, or RoPE (``lmbook.positional``),
  and chapter 12's fixed sinusoids (added to x_0) and ALiBi (a bias on the scores);
- W_out tied to E or not; dropout on the embeddings and on each residual branch.

Then: :func:`train` (AdamW, warm-up + cosine schedule, gradient clipping, validation loss) and
:func:`evaluate`; the chapter-1 word tokens of the Python manual (:func:`word_corpus`) and a tiny model
trained on them (:func:`load_tiny`, made by ``make model``); and SmolLM2-135M-Instruct read from its GGUF
file into this same class (:func:`load_smollm2`). Chapter 9.

Left out on purpose: the KV cache (chapter 11 plugs one in through ``forward(..., cache=)``),
mixture-of-experts, mixed precision and multi-device training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import merge_heads, scaled_dot_product_attention, split_heads
from .positional import alibi_bias, rope_cos_sin, rope_inv_freq, rotate_pairs, sinusoidal_encoding

__all__ = ["TransformerConfig", "Transformer", "LayerNorm", "RMSNorm", "FeedForward", "CausalSelfAttention", "Block"]

NORMS, NORM_POSITIONS, FFNS, POSITIONALS = ("layernorm", "rmsnorm"), ("pre", "post"), ("gelu", "swiglu"), (
    "none", "learned", "rope", "sinusoidal", "alibi")


@dataclass
class TransformerConfig:
    vocab_size: int = 2404          # number of token ids
    context_length: int = 128       # longest sequence; sizes the learned position table
    d_model: int = 128              # width of the residual stream
    n_layers: int = 4               # number of blocks
    n_heads: int = 4                # query heads; head_dim = d_model / n_heads
    n_kv_heads: int | None = None   # key/value heads: None = n_heads (MHA), 1 = MQA, a divisor = GQA
    d_ff: int | None = None         # FFN hidden width; None = 4 d (GELU) or 8/3 d rounded up to 8 (SwiGLU)
    norm: str = "rmsnorm"           # "layernorm" | "rmsnorm"
    norm_position: str = "pre"      # "pre" (GPT-2, Llama) | "post" (the 2017 Transformer, BERT)
    norm_eps: float = 1e-5          # added to the variance / mean square before the square root
    ffn: str = "swiglu"             # "gelu" | "swiglu"
    positional: str = "rope"        # "none" | "learned" | "rope" | "sinusoidal" | "alibi" (chapter 12)
    rope_base: float = 10000.0      # RoPE's base b in theta_i = b^(-2i/d)
    tie_embeddings: bool = True     # W_out = E (the output layer reuses the embedding matrix)
    bias: bool = False              # biases in every linear layer and LayerNorm (GPT-2: True)
    dropout: float = 0.0            # on the embeddings and on each residual branch while training

    def __post_init__(self):
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if self.ffn == "gelu" else 8 * math.ceil(8 * self.d_model / 3 / 8)
        for name in ("vocab_size", "context_length", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name, allowed in (("norm", NORMS), ("norm_position", NORM_POSITIONS), ("ffn", FFNS),
                              ("positional", POSITIONALS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide d_model={self.d_model}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}")
        if self.positional == "rope" and self.head_dim % 2:
            raise ValueError(f"RoPE rotates pairs, so head_dim = d_model / n_heads must be even, got {self.head_dim}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class LayerNorm(nn.Module):
    """y = (x - mean(x)) / sqrt(var(x) + eps) * g + b, over the features of each token separately."""

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        y = (x - mean) / torch.sqrt(var + self.eps) * self.weight
        return y if self.bias is None else y + self.bias


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * g: LayerNorm without centring and without b (Zhang & Sennrich 2019)."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def make_norm(config: TransformerConfig) -> nn.Module:
    if config.norm == "layernorm":
        return LayerNorm(config.d_model, config.norm_eps, bias=config.bias)
    return RMSNorm(config.d_model, config.norm_eps)


class FeedForward(nn.Module):
    """The per-token network. GELU: W_down GELU(W_up x). SwiGLU: W_down (SiLU(W_gate x) * W_up x),
    where the gate SiLU(W_gate x) multiplies the up projection elementwise (Shazeer 2020)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.kind = config.ffn
        if self.kind == "swiglu":
            self.gate_proj = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.bias)

    def forward(self, x):
        if self.kind == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x)))  # exact GELU x Phi(x); GPT-2 used a tanh approximation


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with MHA/GQA/MQA and optional RoPE on queries and keys."""

    def __init__(self, config: TransformerConfig, layer_idx: int):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.layer_idx = config.n_heads, config.n_kv_heads, layer_idx
        self.rope = config.positional == "rope"
        self.alibi = config.positional == "alibi"  # a linear distance penalty on the scores (chapter 12)
        d, dh = config.d_model, config.head_dim
        self.q_proj = nn.Linear(d, config.n_heads * dh, bias=config.bias)
        self.k_proj = nn.Linear(d, config.n_kv_heads * dh, bias=config.bias)  # smaller for GQA/MQA
        self.v_proj = nn.Linear(d, config.n_kv_heads * dh, bias=config.bias)
        self.o_proj = nn.Linear(config.n_heads * dh, d, bias=config.bias)

    def forward(self, x, rope=None, cache=None):
        """x (B, T, d); rope: the (cos, sin) of every position's RoPE angles, from Transformer.forward."""
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, dh)
        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, H_kv, T, dh)
        v = split_heads(self.v_proj(x), self.n_kv_heads)  # (B, H_kv, T, dh)
        if self.rope:
            q, k = rotate_pairs(q, *rope), rotate_pairs(k, *rope)
        if cache is not None:  # append this step's keys/values, get all of them back
            k, v = cache.update(self.layer_idx, k, v)  # (B, H_kv, T_past + T, dh)
        bias = alibi_bias(self.n_heads, q.shape[-2], k.shape[-2], q.device).to(q.dtype) if self.alibi else None
        out = scaled_dot_product_attention(q, k, v, mask=bias, is_causal=True)  # (B, H, T, dh); GQA expanded inside
        return self.o_proj(merge_heads(out))  # (B, T, d)


class Block(nn.Module):
    """One Transformer block: attention, then FFN, each wrapped in a residual connection and a norm."""

    def __init__(self, config: TransformerConfig, layer_idx: int):
        super().__init__()
        self.pre_norm = config.norm_position == "pre"
        self.attn_norm, self.attn = make_norm(config), CausalSelfAttention(config, layer_idx)
        self.ffn_norm, self.ffn = make_norm(config), FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, rope=None, cache=None):
        if self.pre_norm:  # x + f(Norm(x)): the residual stream itself is never normalised
            x = x + self.dropout(self.attn(self.attn_norm(x), rope, cache))
            return x + self.dropout(self.ffn(self.ffn_norm(x)))
        x = self.attn_norm(x + self.dropout(self.attn(x, rope, cache)))  # Norm(x + f(x))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


class Transformer(nn.Module):
    """The decoder-only language model: ``Transformer(config)(ids)`` -> next-token logits (B, T, V)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.context_length, config.d_model) if config.positional == "learned" else None
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.final_norm = make_norm(config) if config.norm_position == "pre" else nn.Identity()
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one matrix, used at both ends
        # RoPE frequencies: a plain float32 tensor, not a buffer, so model.to(dtype) never rounds them
        self.inv_freq = rope_inv_freq(config.head_dim, config.rope_base) if config.positional == "rope" else None
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: shrink the layers that write into the residual stream
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor | None = None, cache=None,
                last_only: bool = False) -> torch.Tensor:
        """ids (B, T) -> logits (B, T, V); logits[:, t] scores the token after ids[:, t].

        positions (T,) or (B, T): the position of each token; by default 0..T-1, or, with a cache,
        cache.seq_len .. cache.seq_len + T - 1. ``cache`` (chapter 11) is any object with an int
        ``seq_len`` (tokens already stored) and ``update(layer_idx, k, v)`` that stores the new keys and
        values (B, H_kv, T, head_dim) of one layer and returns all of them, old and new.
        last_only=True returns only the last position's logits (B, 1, V), all that generation needs.
        """
        V = self.config.vocab_size
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() != 2:
            raise ValueError(f"ids must be an integer tensor of shape (B, T), got {getattr(ids, 'dtype', ids)!r} "
                             f"{tuple(getattr(ids, 'shape', ()))}")
        if ids.numel() and (ids.min() < 0 or ids.max() >= V):
            bad = ids[(ids < 0) | (ids >= V)][0].item()
            raise ValueError(f"token ids must be in [0, {V - 1}] (max id {V - 1}), found {bad}")
        if positions is None:
            start = 0 if cache is None else int(cache.seq_len)
            positions = torch.arange(start, start + ids.shape[1], device=ids.device)
        elif (not isinstance(positions, torch.Tensor) or positions.is_floating_point() or positions.dim() not in (1, 2)
              or positions.shape[-1] != ids.shape[1]):
            raise ValueError(f"positions must be an integer tensor of shape (T,) or (B, T) with T={ids.shape[1]}, got "
                             f"{getattr(positions, 'dtype', type(positions).__name__)} "
                             f"{tuple(getattr(positions, 'shape', ()))}")
        if self.pos_emb is not None and positions.max() >= self.config.context_length:
            raise ValueError(f"position {positions.max().item()} is beyond the learned position table "
                             f"(context_length={self.config.context_length})")
        x = self.tok_emb(ids)  # (B, T, d)
        if self.pos_emb is not None:
            x = x + self.pos_emb(positions)
        if self.config.positional == "sinusoidal":  # chapter 12: sqrt(d) E[ids] + the fixed table (Vaswani et al.)
            table = sinusoidal_encoding(int(positions.max()) + 1, self.config.d_model).to(x)  # (max position + 1, d)
            x = x * math.sqrt(self.config.d_model) + table[positions]
        x = self.dropout(x)
        rope = None
        if self.inv_freq is not None:  # the rotation angles of every position, computed once for all layers
            cos, sin = rope_cos_sin(positions, self.inv_freq, x.dtype)  # (T, dh/2) or (B, T, dh/2)
            rope = (cos, sin) if positions.dim() == 1 else (cos[:, None], sin[:, None])  # heads share them
        for block in self.blocks:
            x = block(x, rope, cache)
        if last_only:
            x = x[:, -1:]  # (B, 1, d): skip the output layer for positions whose prediction is not needed
        return self.lm_head(self.final_norm(x))  # (B, T, V)

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """Number of distinct parameters (a tied matrix counts once); optionally without token/position tables."""
        n = sum(p.numel() for p in self.parameters())
        if exclude_embeddings:
            n -= self.tok_emb.weight.numel() + (self.pos_emb.weight.numel() if self.pos_emb is not None else 0)
        return n
