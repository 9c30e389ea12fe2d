"""Appendix A's induction head: the attention patterns of a TinyGPT, and the score that
finds an induction head.

The model computes attention with ``F.scaled_dot_product_attention``, which returns
only the mixed values, never the weights. To read the weights without a second copy
of the attention code, ``attention_patterns`` runs the model's own forward pass with
that one call replaced by a recorder: it receives the very queries, (smeared) keys
and mask the model computed, keeps ``softmax(q kᵀ / √d + mask)``, and returns what
the real call returns, so the pass itself is unchanged.

An *induction head* attends, from a token that occurred once before, to the
position just after that occurrence: "last time this token came, what followed?".
``induction_scores`` measures exactly that for every head.
"""

from __future__ import annotations

import math
import types
from collections.abc import Sequence
from unittest import mock

import torch
import torch.nn.functional as F

from specdec_lib.checks import check_int
from specdec_lib.engine import model as model_module
from specdec_lib.engine.model import TinyGPT


def _recording_functional(record: list[torch.Tensor]) -> types.SimpleNamespace:
    """``torch.nn.functional`` with ``scaled_dot_product_attention`` recording its weights."""

    def sdpa(q, k, v, attn_mask=None, is_causal=False, **kwargs):  # noqa: ANN001, ANN202
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, nh, T, L)
        T, L = scores.shape[-2:]
        if is_causal:
            allowed = torch.ones(T, L, dtype=torch.bool).tril(diagonal=L - T)
            scores = scores.masked_fill(~allowed, float("-inf"))
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        record.append(torch.softmax(scores, dim=-1))
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kwargs
        )

    names = {name: getattr(F, name) for name in dir(F) if not name.startswith("__")}
    return types.SimpleNamespace(**{**names, "scaled_dot_product_attention": sdpa})


@torch.inference_mode()
def attention_patterns(model: TinyGPT, token_ids: Sequence[int]) -> torch.Tensor:
    """Attention weights of one uncached pass over ``token_ids``: (n_layer, n_head, T, T).

    Row ``t`` of head ``h`` in layer ``l`` is how query ``t`` shares its attention
    over keys ``0 … t`` (each row sums to 1; keys after ``t`` get 0).
    """
    ids = list(token_ids)
    if not ids:
        raise ValueError("token_ids must hold at least one token")
    if len(ids) > model.config.block_size:
        raise ValueError(
            f"token_ids must fit the context of {model.config.block_size} tokens, got {len(ids)}"
        )
    if not all(isinstance(t, int) and 0 <= t < model.config.vocab_size for t in ids):
        raise ValueError(f"token_ids must be ints in [0, {model.config.vocab_size})")
    record: list[torch.Tensor] = []
    with mock.patch.object(model_module, "F", _recording_functional(record)):
        model(torch.tensor([ids]))
    return torch.stack([weights[0] for weights in record])  # (n_layer, nh, T, T)


def induction_targets(token_ids: Sequence[int], start: int = 0) -> list[tuple[int, int]]:
    """(query, key) pairs: query ``t >= start`` whose token occurred exactly once before,
    at ``p``, and key ``p + 1``, the position just after it (excluding ``p + 1 = t``).

    On a copy prompt followed by its quote, ``start`` = the quote's first position keeps
    the queries where copying is the right answer: inside the quote, at a token that
    occurred once in the passage.
    """
    check_int("start", start, minimum=0)
    seen: dict[int, list[int]] = {}
    pairs = []
    for t, token in enumerate(token_ids):
        earlier = seen.setdefault(token, [])
        if t >= start and len(earlier) == 1 and earlier[0] + 1 < t:
            pairs.append((t, earlier[0] + 1))
        earlier.append(t)
    return pairs


def induction_scores(
    patterns: torch.Tensor, token_ids: Sequence[int], start: int = 0
) -> torch.Tensor:
    """Per head (n_layer, n_head): mean attention from each induction query to its target.

    1.0 means the head puts all of its attention on the position just after the
    token's earlier occurrence, for every such query; a head that spreads its
    attention evenly scores about one over the context length.
    """
    if patterns.dim() != 4 or patterns.shape[-1] != patterns.shape[-2]:
        raise ValueError(f"patterns must be (n_layer, n_head, T, T), got {tuple(patterns.shape)}")
    if patterns.shape[-1] != len(token_ids):
        raise ValueError(
            f"token_ids must have the patterns' length {patterns.shape[-1]}, got {len(token_ids)}"
        )
    pairs = induction_targets(token_ids, start)
    if not pairs:
        raise ValueError("token_ids must hold at least one repeated token, got none")
    queries = torch.tensor([q for q, _ in pairs])
    keys = torch.tensor([k for _, k in pairs])
    return patterns[:, :, queries, keys].mean(dim=-1)


def induction_weights(
    patterns: torch.Tensor, token_ids: Sequence[int], layer: int, head: int, start: int = 0
) -> list[float]:
    """For one head, the attention each induction query puts on its target, query by query."""
    check_int("layer", layer, minimum=0)
    check_int("head", head, minimum=0)
    if layer >= patterns.shape[0] or head >= patterns.shape[1]:
        raise ValueError(f"layer, head must index patterns of shape {tuple(patterns.shape[:2])}")
    return [float(patterns[layer, head, q, k]) for q, k in induction_targets(token_ids, start)]
