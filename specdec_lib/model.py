"""TinyGPT: a GPT-2-shaped decoder small enough to train and run on one CPU core.

The layout follows GPT-2 name for name (``transformer.wte``, ``transformer.h.0.attn.c_attn``,
``transformer.ln_f``, tied ``lm_head``), so a reader who knows GPT-2 or nanoGPT can
find every tensor. One difference: GPT-2 stores its projections as ``Conv1D``
(weight shape ``(in, out)``); we use ``nn.Linear`` (``(out, in)``), so a GPT-2
checkpoint maps onto this model by name with those weights transposed.

The KV cache is static, in the style of gpt-fast: keys and values are written
*by position* into a buffer the size of the context window, and each sequence
keeps its own length. Rolling back rejected draft tokens is then nothing more
than lowering a length: the stale entries beyond it are masked out and later
overwritten. Per-sequence lengths are what make batched verification possible,
where every sequence in the batch accepts a different number of tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a TinyGPT. Frozen: a config is a fact about shipped weights."""

    block_size: int = 768  # context window, in tokens (bytes)
    vocab_size: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128

    def __post_init__(self) -> None:
        for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"n_embd must be a multiple of n_head, got n_embd={self.n_embd}, "
                f"n_head={self.n_head}"
            )


class KVCache:
    """Static per-layer key/value buffers with one length per sequence.

    ``k[layer]`` has shape ``(B, n_head, block_size, head_size)``. Position ``t`` of
    sequence ``b`` lives at ``k[layer][b, :, t]``; entries at or beyond
    ``lengths[b]`` are stale and never attended to.
    """

    def __init__(self, config: ModelConfig, batch_size: int = 1) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        hs = config.n_embd // config.n_head
        shape = (batch_size, config.n_head, config.block_size, hs)
        self.config = config
        self.k = [torch.zeros(shape) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape) for _ in range(config.n_layer)]
        self.lengths = torch.zeros(batch_size, dtype=torch.long)

    @property
    def batch_size(self) -> int:
        return int(self.lengths.shape[0])

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


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(
        self, x: torch.Tensor, cache: KVCache | None, layer: int, pos: torch.Tensor | None
    ) -> torch.Tensor:
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        else:
            rows = torch.arange(B)[:, None]  # (B, 1)
            cache.k[layer][rows, :, pos] = k.transpose(1, 2)  # write (B, T, nh, hs) by position
            cache.v[layer][rows, :, pos] = v.transpose(1, 2)
            L = int(pos.max()) + 1
            keys = cache.k[layer][:, :, :L]  # (B, nh, L, hs)
            values = cache.v[layer][:, :, :L]  # (B, nh, L, hs)
            # Query at position p sees keys 0..p of its own sequence, nothing stale.
            mask = torch.arange(L)[None, None, :] <= pos[:, :, None]  # (B, T, L)
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask[:, None])
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-LayerNorm transformer block, as in GPT-2."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(
        self, x: torch.Tensor, cache: KVCache | None, layer: int, pos: torch.Tensor | None
    ) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache, layer, pos)
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    """GPT-2-shaped decoder: learned positions, pre-LN blocks, GELU MLP, tied embeddings."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
                ln_f=nn.LayerNorm(config.n_embd),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as in GPT-2
        self.apply(self._init_weights)
        # GPT-2: scale residual projections by 1/sqrt(2 * n_layer).
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

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
        if cache is None:
            if T > self.config.block_size:
                raise ValueError(
                    f"sequence length must be <= block_size={self.config.block_size}, got {T}"
                )
            pos = None
            positions = torch.arange(T)[None, :]  # (1, T)
        else:
            if cache.batch_size != B:
                raise ValueError(f"cache batch size {cache.batch_size} != input batch size {B}")
            positions = cache.lengths[:, None] + torch.arange(T)[None, :]  # (B, T)
            if int(positions.max()) >= self.config.block_size:
                raise ValueError(
                    f"cached length + new tokens must be <= block_size={self.config.block_size}"
                )
            pos = positions
        x = self.transformer.wte(idx) + self.transformer.wpe(positions)  # (B, T, C)
        for layer, block in enumerate(self.transformer.h):
            x = block(x, cache, layer, pos)
        if cache is not None:
            cache.lengths = cache.lengths + T
        return self.lm_head(self.transformer.ln_f(x))  # (B, T, vocab_size)
