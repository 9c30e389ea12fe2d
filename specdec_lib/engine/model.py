"""TinyGPT: a Llama-shaped decoder small enough to train and run on one CPU core.

Parameter names map one to one onto Hugging Face's ``LlamaForCausalLM``, and the shape
covers what a real Llama needs (fewer key/value heads than query heads, its RoPE base
and RMSNorm epsilon), so the same class runs SmolLM2-135M (:mod:`.smollm2`). The one
addition (``ModelConfig.smear_keys``) mixes each key with the previous position's, so a
single head can copy from context and a small model learns to within a few hundred
steps. The KV cache is static, as in gpt-fast: rolling back is lowering a length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from numbers import Integral

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from specdec_lib.checks import check_forward, check_int, check_model_config
from specdec_lib.engine.random_init import normal_
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
    n_kv_head: int | None = None  # grouped-query attention: key/value heads (None: n_head)
    rms_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        check_model_config(self)

    @property
    def kv_heads(self) -> int:
        """Key/value heads: each serves n_head / kv_heads query heads, and the cache
        stores only these, which is what grouped-query attention saves."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head


class KVCache:
    """Static per-layer key/value buffers with one length per sequence.

    ``k[layer]`` has shape ``(B, kv_heads, block_size, n_embd / n_head)``. Position ``t`` of
    sequence ``b`` lives at ``k[layer][b, :, t]``; entries at or beyond
    ``lengths[b]`` are stale and never attended to. The lengths are a Python list (the
    loop reads and sets them every round; as a tensor each read is an operator call).
    They move only here: a forward pass claims positions with ``_advance``, rollback
    gives them back with :meth:`crop`, and a server's requests take and free rows with
    :meth:`join` and :meth:`leave`.
    """

    def __init__(self, config: ModelConfig, batch_size: int = 1, capacity: int | None = None):
        check_int("batch_size", batch_size, 0)
        capacity = max(batch_size, 1) if capacity is None else capacity
        check_int("capacity", capacity, max(batch_size, 1))
        shape = (capacity, config.kv_heads, config.block_size, config.n_embd // config.n_head)
        self.k = [torch.zeros(shape) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape) for _ in range(config.n_layer)]
        self.lengths = [0] * batch_size

    @property
    def batch_size(self) -> int:
        """Rows in use: always the first ``batch_size`` of the buffers, so a pass reads them
        as a view, whatever the capacity."""
        return len(self.lengths)

    @property
    def capacity(self) -> int:
        return self.k[0].shape[0]

    def join(self, source: KVCache, row: int) -> int:
        """Add a row holding a copy of ``source``'s row ``row`` (a request prefilled elsewhere
        joins a running batch); returns its index. Only its cached positions are copied."""
        if self.batch_size == self.capacity:
            raise ValueError(f"the cache is full: all {self.capacity} rows are in use")
        if not 0 <= check_int("row", row, 0) < source.batch_size:
            raise ValueError(f"row must lie in [0, {source.batch_size - 1}], got {row}")
        b, n = self.batch_size, source.lengths[row]
        for mine, theirs in zip(self.k + self.v, source.k + source.v, strict=True):
            mine[b, :, :n] = theirs[row, :, :n]
        self.lengths = [*self.lengths, n]
        return b

    def leave(self, row: int) -> None:
        """Free row ``row`` at once (a finished request leaves the batch): the last row moves
        into its place, so one row is copied and the rows in use stay the first ones."""
        last = self.batch_size - 1
        if not 0 <= check_int("row", row, 0) <= last:
            raise ValueError(f"row must lie in [0, {last}], got {row}")
        n = self.lengths[last]
        if row != last:
            for buffer in self.k + self.v:
                buffer[row, :, :n] = buffer[last, :, :n]
        lengths = list(self.lengths)
        lengths[row] = n
        self.lengths = lengths[:last]

    def _advance(self, n: int) -> torch.Tensor:
        """Claim the next ``n`` positions of every sequence: (B, n) positions to write."""
        if max(self.lengths) + n > self.k[0].shape[2]:
            raise ValueError(f"cached + new tokens must be <= block_size={self.k[0].shape[2]}")
        pos = torch.from_numpy(np.add.outer(self.lengths, np.arange(n)))  # one op, no copy
        self.lengths = [c + n for c in self.lengths]
        return pos

    def crop(self, lengths: int | Sequence[int]) -> None:
        """Roll back to ``lengths`` tokens (one int for all, or one each): the whole of
        rollback. Nothing is erased; later positions stop being visible until overwritten."""
        one = isinstance(lengths, Integral)
        new = [int(lengths)] * self.batch_size if one else [int(n) for n in lengths]
        if len(new) != self.batch_size or not all(
            0 <= n <= c for n, c in zip(new, self.lengths, strict=True)
        ):
            raise ValueError(f"lengths must lie in [0, {self.lengths}] (one each), got {lengths}")
        self.lengths = new


@dataclass(frozen=True)
class Layout:
    """Where a cached pass's T new tokens sit when they are not a line (a token tree,
    :mod:`.tree` builds it): ``positions`` (B, T) their rotary positions, ``mask``
    (B, 1, T, L) the slots each may attend to, ``before`` (B, L) each slot's predecessor,
    for the key smear. The new tokens still take the next T slots of the cache."""

    positions: torch.Tensor
    mask: torch.Tensor
    before: torch.Tensor

    def check(self, B: int, T: int, L: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        shapes = (tuple(self.positions.shape), tuple(self.mask.shape), tuple(self.before.shape))
        if shapes != ((B, T), (B, 1, T, L), (B, L)):
            raise ValueError(
                f"layout shapes must be positions {(B, T)}, mask {(B, 1, T, L)}, before "
                f"{(B, L)} for this pass, got {shapes}"
            )
        return self.positions, self.mask, self.before


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotary_tables(config: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, each (block_size, head_size), in Llama's rotate-half layout."""
    hs = config.n_embd // config.n_head
    inv_freq = 1.0 / config.rope_theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    angles = torch.arange(config.block_size, dtype=torch.float64)[:, None] * inv_freq[None]
    angles = torch.cat([angles, angles], dim=-1)  # (block_size, hs)
    return angles.cos().float(), angles.sin().float()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (B, nh, T, hs) by its positions' angles; cos/sin are (B, 1, T, hs)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def smear(
    keys: torch.Tensor, logit: torch.Tensor, before: torch.Tensor | None = None
) -> torch.Tensor:
    """Mix each key (B, nh, L, hs) with the one before it, a learned share per head.

    "Before" is the previous slot of the cache, unless ``before`` (B, L) says which slot
    holds each one's predecessor: in a token tree that is a node's parent, not its neighbour.
    """
    mix = torch.sigmoid(logit)[None, :, None, None]  # (1, nh, 1, 1)
    if before is None:
        previous = torch.cat([keys[:, :, :1], keys[:, :, :-1]], dim=2)  # slot 0 keeps its own
    else:
        index = before[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
        previous = keys.gather(2, index)
    return mix * keys + (1 - mix) * previous


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_head, self.n_kv = config.n_head, config.kv_heads
        kv_width = config.kv_heads * (config.n_embd // config.n_head)
        self.q_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.k_proj = nn.Linear(config.n_embd, kv_width, bias=False)
        self.v_proj = nn.Linear(config.n_embd, kv_width, bias=False)
        self.o_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.k_smear = nn.Parameter(torch.zeros(self.n_kv)) if config.smear_keys else None

    def forward(self, x, cos, sin, kv, slots, mask, before=None) -> torch.Tensor:  # noqa: ANN001
        """``x`` (B, T, C); ``cos``, ``sin`` (B, 1, T, hs); ``kv`` this layer's (key, value)
        cache buffers or None; ``slots`` (B, T) where the new tokens' keys go there;
        ``mask`` (B, 1, T, L) what each query may see (None: plain causal attention);
        ``before`` (B, L) each slot's predecessor, for the smear (None: the slot before)."""
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, self.n_kv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, self.n_kv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        keys, values = k, v
        if kv is not None:
            rows = torch.arange(B)[:, None]  # (B, 1)
            kv[0][rows, :, slots] = k.transpose(1, 2)  # write (B, T, nkv, hs) by slot
            kv[1][rows, :, slots] = v.transpose(1, 2)
            keys, values = kv[0][:, :, : mask.shape[-1]], kv[1][:, :, : mask.shape[-1]]
        if self.k_smear is not None:
            keys = smear(keys, self.k_smear, before)
        y = F.scaled_dot_product_attention(  # each key/value head serves nh / nkv query heads
            q,
            keys,
            values,
            attn_mask=mask,
            is_causal=mask is None,
            enable_gqa=self.n_kv != self.n_head,
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.o_proj(y)


class _MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.n_embd, config.n_hidden, bias=False)
        self.up_proj = nn.Linear(config.n_embd, config.n_hidden, bias=False)
        self.down_proj = nn.Linear(config.n_hidden, config.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _DecoderLayer(nn.Module):
    """Pre-norm block, as in Llama: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.n_embd, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.n_embd, config.rms_norm_eps)
        self.mlp = _MLP(config)

    def forward(self, x, cos, sin, kv, slots, mask, before) -> torch.Tensor:  # noqa: ANN001
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv, slots, mask, before)
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyGPT(nn.Module):
    """Llama-shaped decoder: RMSNorm, rotary positions, SwiGLU, no biases, tied embeddings."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = nn.ModuleDict(
            dict(
                embed_tokens=nn.Embedding(config.vocab_size, config.n_embd),
                layers=nn.ModuleList(_DecoderLayer(config) for _ in range(config.n_layer)),
                norm=RMSNorm(config.n_embd, config.rms_norm_eps),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight  # tied
        cos, sin = rotary_tables(config)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2's rule: residual-branch outputs scaled by 1/sqrt(2 * n_layer)
                residual = name.endswith(("o_proj.weight", "down_proj.weight"))
                normal_(p, std=0.02 * (1 / math.sqrt(2 * config.n_layer) if residual else 1))

    def num_parameters(self) -> int:
        """Parameters counted once (the tied embedding is not counted twice)."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch_size: int = 1, capacity: int | None = None) -> KVCache:
        return KVCache(self.config, batch_size, capacity)

    def forward(
        self,
        idx: torch.Tensor,
        cache: KVCache | None = None,
        logits_to_keep: int = 0,
        layout: Layout | None = None,
        hidden: bool = False,
        embeds: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits for the positions of ``idx`` (B, T) -> (B, T, vocab_size).

        With a ``cache``, ``idx`` holds only the new tokens: they are placed after
        each sequence's cached length, written into the cache, and the lengths
        advance by T. Without one, ``idx`` is the whole sequence from position 0.
        ``logits_to_keep=n`` scores only the last n positions (0: all), as in Hugging
        Face: a prefill needs one row of the output head, the largest matrix here.
        A ``layout`` (cached only) places the new tokens otherwise than in a line: a
        token tree (:mod:`.tree`). ``hidden=True`` also returns the final normed hidden
        states of every fed position, (B, T, n_embd), which drafters that read the
        target's state use (Medusa's heads, EAGLE): normalising all T rows costs little
        beside the pass, and a drafter with its own cache needs the prompt's states too.
        ``embeds`` (B, T, n_embd) replaces the embeddings of ``idx``, which still gives the
        shape: EAGLE's head (:mod:`.eagle`) feeds a token joined with a feature.
        """
        B, T = check_forward(idx, cache, logits_to_keep, self.config.block_size)
        if embeds is not None and tuple(embeds.shape) != (B, T, self.config.n_embd):
            raise ValueError(
                f"embeds must have shape {(B, T, self.config.n_embd)}, got {tuple(embeds.shape)}"
            )
        before = None
        if cache is None:
            if layout is not None:
                raise ValueError("layout needs a cache: it places tokens among cached ones")
            pos = slots = torch.arange(T)[None, :].expand(B, T)  # (B, T)
            kvs, mask = [None] * self.config.n_layer, None  # plain causal attention
        else:
            slots = cache._advance(T)  # (B, T)
            kvs = list(zip(cache.k, cache.v, strict=True))
            if B < cache.capacity:  # a server's cache: only the rows in use, as views
                kvs = [(k[:B], v[:B]) for k, v in kvs]
            if layout is None:
                # Query at position p sees keys 0..p of its own sequence, nothing stale.
                L = max(cache.lengths)
                mask = (torch.arange(L)[None, None, :] <= slots[:, :, None])[:, None]  # (B,1,T,L)
                pos = slots
            else:
                pos, mask, before = layout.check(B, T, max(cache.lengths))
        cos = self.rope_cos[pos][:, None]  # (B, 1, T, hs)
        sin = self.rope_sin[pos][:, None]  # (B, 1, T, hs)
        x = self.model.embed_tokens(idx) if embeds is None else embeds  # (B, T, C)
        for block, kv in zip(self.model.layers, kvs, strict=True):
            x = block(x, cos, sin, kv, slots, mask, before)
        if hidden:
            states = self.model.norm(x)  # (B, T, C)
            logits = self.lm_head(states[:, -logits_to_keep:] if logits_to_keep else states)
            return logits, states
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        return self.lm_head(self.model.norm(x))  # (B, T or logits_to_keep, vocab_size)


def early_exit(model: TinyGPT, layers: int) -> TinyGPT:
    """A drafter made of the target itself: its first ``layers`` decoder layers, then its
    own final norm and output layer (self-speculation, as in Draft & Verify and LayerSkip).

    Nothing is copied or trained: the returned model shares every tensor with ``model``,
    so it costs no memory beyond its own KV cache. Its guesses are as good as the target's
    intermediate hidden state happens to be when read by a head trained on the last
    layer's; LayerSkip trains the model so that early layers read well, this does not.
    """
    if not isinstance(model, TinyGPT):
        raise ValueError(f"model must be a TinyGPT, got {type(model).__name__}")
    if check_int("layers", layers) >= model.config.n_layer:
        raise ValueError(f"layers must lie in [1, {model.config.n_layer - 1}], got {layers}")
    config = replace(model.config, n_layer=layers)
    with torch.device("meta"):  # the shape only: every tensor is the target's
        draft = TinyGPT(config)
    draft.model["embed_tokens"] = model.model.embed_tokens
    draft.model["layers"] = nn.ModuleList(model.model.layers[:layers])
    draft.model["norm"] = model.model.norm
    draft.lm_head = model.lm_head
    draft.rope_cos, draft.rope_sin = model.rope_cos, model.rope_sin
    return draft.eval()
