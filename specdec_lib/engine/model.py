"""TinyGPT: a Llama-shaped decoder small enough to train and run on one CPU core.

The shape is Llama's: RMSNorm before each sub-layer, rotary position embeddings on
queries and keys, a SwiGLU MLP, no biases anywhere, and the output head tied to the
token embedding (one matrix, stored once). Parameter names map one to one onto
Hugging Face's ``LlamaForCausalLM``::

    model.embed_tokens.weight                       (vocab_size, n_embd)
    model.layers.{i}.input_layernorm.weight         (n_embd,)
    model.layers.{i}.self_attn.{q,k,v,o}_proj.weight  (n_embd, n_embd)
    model.layers.{i}.post_attention_layernorm.weight  (n_embd,)
    model.layers.{i}.mlp.{gate,up}_proj.weight       (n_hidden, n_embd)
    model.layers.{i}.mlp.down_proj.weight            (n_embd, n_hidden)
    model.norm.weight                               (n_embd,)
    lm_head.weight                                  tied to model.embed_tokens.weight

Rotary uses Llama's "rotate half" layout. The one addition, switched by
``ModelConfig.smear_keys``, is ``model.layers.{i}.self_attn.k_smear`` (n_head,): each
head's key at position j is mixed with the key at j - 1. Copying needs an *induction
head* (attend just after an earlier occurrence of the current token), which a large
model builds late in training from two heads in two layers; the smear hands every key
its previous token, so one head can do it and a small model learns to copy within a
few hundred steps (see ``specdec_lib.engine.train``).

The KV cache is static, as in gpt-fast: rotated keys and values are written *by
position* into buffers the size of the context window, with one length per sequence.
Rolling back rejected draft tokens is lowering a length; stale entries are masked out
and later overwritten. The smear is applied when attending, so it needs no cache of
its own. Per-sequence lengths let every sequence of a batch accept a different number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from specdec_lib.checks import check_int
from specdec_lib.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a TinyGPT. Frozen: a config is a fact about shipped weights."""

    block_size: int = 512  # context window, in tokens
    vocab_size: int = Tokenizer().vocab_size
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    n_hidden: int = 384  # SwiGLU width (Llama: about 8/3 of n_embd)
    rope_theta: float = 10000.0
    smear_keys: bool = True

    def __post_init__(self) -> None:
        for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd", "n_hidden"):
            value = getattr(self, name)
            check_int(name, value)
        if self.n_embd % self.n_head or (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"n_embd / n_head must be an even integer, got n_embd={self.n_embd}, "
                f"n_head={self.n_head}"
            )
        if not self.rope_theta > 1:
            raise ValueError(f"rope_theta must be > 1, got {self.rope_theta!r}")

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head


class KVCache:
    """Static per-layer key/value buffers with one length per sequence.

    ``k[layer]`` has shape ``(B, n_head, block_size, head_size)``. Position ``t`` of
    sequence ``b`` lives at ``k[layer][b, :, t]``; entries at or beyond
    ``lengths[b]`` are stale and never attended to. Lengths move only here: a forward
    pass claims positions with :meth:`advance`, rollback gives them back with :meth:`crop`.
    """

    def __init__(self, config: ModelConfig, batch_size: int = 1) -> None:
        check_int("batch_size", batch_size)
        shape = (batch_size, config.n_head, config.block_size, config.head_size)
        self.k = [torch.zeros(shape) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape) for _ in range(config.n_layer)]
        self.lengths = torch.zeros(batch_size, dtype=torch.long)

    @property
    def batch_size(self) -> int:
        return int(self.lengths.shape[0])

    def advance(self, n: int) -> torch.Tensor:
        """Claim the next ``n`` positions of every sequence: (B, n) positions to write."""
        pos = self.lengths[:, None] + torch.arange(n)[None, :]
        if int(pos.max()) >= self.k[0].shape[2]:
            raise ValueError(
                f"cached length + new tokens must be <= block_size={self.k[0].shape[2]}"
            )
        self.lengths = self.lengths + n
        return pos

    def crop(self, lengths: int | torch.Tensor) -> None:
        """Roll back to ``lengths`` tokens (an int for every sequence, or one each).

        This is the whole of rollback: nothing is erased, the positions past the
        new length simply stop being visible and are overwritten by the next write.
        """
        new = torch.as_tensor(lengths, dtype=torch.long).expand(self.batch_size).clone()
        if (new < 0).any() or (new > self.lengths).any():
            raise ValueError(
                f"lengths must lie in [0, current length], got {new.tolist()} "
                f"with current {self.lengths.tolist()}"
            )
        self.lengths = new


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotary_tables(config: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, each (block_size, head_size), in Llama's rotate-half layout."""
    hs = config.head_size
    inv_freq = 1.0 / config.rope_theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    angles = torch.arange(config.block_size, dtype=torch.float64)[:, None] * inv_freq[None]
    angles = torch.cat([angles, angles], dim=-1)  # (block_size, hs)
    return angles.cos().float(), angles.sin().float()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (B, nh, T, hs) by its positions' angles; cos/sin are (B, 1, T, hs)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def smear(keys: torch.Tensor, logit: torch.Tensor) -> torch.Tensor:
    """Mix each key (B, nh, L, hs) with the one before it, a learned share per head."""
    mix = torch.sigmoid(logit)[None, :, None, None]  # (1, nh, 1, 1)
    previous = torch.cat([keys[:, :, :1], keys[:, :, :-1]], dim=2)  # position 0 keeps its own
    return mix * keys + (1 - mix) * previous


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.q_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.k_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.v_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.o_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.k_smear = nn.Parameter(torch.zeros(config.n_head)) if config.smear_keys else None

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv: tuple[torch.Tensor, torch.Tensor] | None,
        pos: torch.Tensor,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """``kv`` is this layer's (key, value) cache buffers, ``pos`` (B, T) the positions
        the new tokens take there, ``mask`` (B, 1, T, L) what each query may see."""
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = self.v_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        keys, values = k, v
        if kv is not None:
            rows = torch.arange(B)[:, None]  # (B, 1)
            kv[0][rows, :, pos] = k.transpose(1, 2)  # write (B, T, nh, hs) by position
            kv[1][rows, :, pos] = v.transpose(1, 2)
            keys, values = kv[0][:, :, : mask.shape[-1]], kv[1][:, :, : mask.shape[-1]]
        if self.k_smear is not None:
            keys = smear(keys, self.k_smear)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=mask is None)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.o_proj(y)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.n_embd, config.n_hidden, bias=False)
        self.up_proj = nn.Linear(config.n_embd, config.n_hidden, bias=False)
        self.down_proj = nn.Linear(config.n_hidden, config.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm block, as in Llama: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.n_embd)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x, cos, sin, kv, pos, mask) -> torch.Tensor:  # noqa: ANN001
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv, pos, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyGPT(nn.Module):
    """Llama-shaped decoder: RMSNorm, rotary positions, SwiGLU, no biases, tied embeddings."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = nn.ModuleDict(
            dict(
                embed_tokens=nn.Embedding(config.vocab_size, config.n_embd),
                layers=nn.ModuleList(DecoderLayer(config) for _ in range(config.n_layer)),
                norm=RMSNorm(config.n_embd),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight  # tied
        cos, sin = rotary_tables(config)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # GPT-2's rule: residual-branch outputs scaled by 1/sqrt(2 * n_layer).
                scale = (
                    1 / math.sqrt(2 * config.n_layer)
                    if name.endswith(("o_proj.weight", "down_proj.weight"))
                    else 1
                )
                nn.init.normal_(p, mean=0.0, std=0.02 * scale)

    def num_parameters(self) -> int:
        """Parameters counted once (the tied embedding is not counted twice)."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch_size: int = 1) -> KVCache:
        return KVCache(self.config, batch_size)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Logits for every position of ``idx`` (B, T) -> (B, T, vocab_size).

        With a ``cache``, ``idx`` holds only the new tokens: they are placed after
        each sequence's cached length, written into the cache, and the lengths
        advance by T. Without one, ``idx`` is the whole sequence from position 0.
        """
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
        B, T = idx.shape
        n_layer = self.config.n_layer
        if cache is None:
            if T > self.config.block_size:
                raise ValueError(
                    f"sequence length must be <= block_size={self.config.block_size}, got {T}"
                )
            pos = torch.arange(T)[None, :].expand(B, T)  # (B, T)
            kvs, mask = [None] * n_layer, None  # plain causal attention
        else:
            if cache.batch_size != B:
                raise ValueError(f"cache batch size {cache.batch_size} != input batch size {B}")
            pos = cache.advance(T)  # (B, T)
            kvs = list(zip(cache.k, cache.v, strict=True))
            # Query at position p sees keys 0..p of its own sequence, nothing stale.
            L = int(pos.max()) + 1
            mask = (torch.arange(L)[None, None, :] <= pos[:, :, None])[:, None]  # (B, 1, T, L)
        cos = self.rope_cos[pos][:, None]  # (B, 1, T, hs)
        sin = self.rope_sin[pos][:, None]  # (B, 1, T, hs)
        x = self.model.embed_tokens(idx)  # (B, T, C)
        for block, kv in zip(self.model.layers, kvs, strict=True):
            x = block(x, cos, sin, kv, pos, mask)
        return self.lm_head(self.model.norm(x))  # (B, T, vocab_size)
