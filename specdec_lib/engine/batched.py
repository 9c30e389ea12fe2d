"""Batched decoding and batched speculation: several requests share each forward pass.

This is the regime where speculation stops paying. Plain batched decoding
already amortises the weight read across B requests; speculation adds k extra
positions per request to every pass, work that was free at batch one (the
hardware sat idle) and competes with real work at large batch.

Each request keeps its own length in the shared KV cache (see
:class:`~specdec_lib.engine.model.KVCache`), so per-request acceptance and per-request
rollback are a crop to a different length per row. Requests with fewer proposals
than the longest are right-padded; the padding is written past their length and
therefore never seen. Same invariant as :func:`~specdec_lib.engine.generate.speculative_generate`:
the cache holds each request's context except its last, pending token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from specdec_lib.checks import check_int
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.generate import SpeculationStats, check_prompt, next_token
from specdec_lib.engine.model import KVCache, TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.verify import accept_greedy, accept_sampled

PAD = 0  # any valid id: padded positions lie beyond each row's length and are never attended


def _prefill_all_but_last(model: TinyGPT, prompts: list[list[int]]) -> KVCache:
    cache = model.new_cache(len(prompts))
    width = max(len(p) for p in prompts) - 1
    if width > 0:
        rows = [p[:-1] + [PAD] * (width - len(p) + 1) for p in prompts]
        model(torch.tensor(rows), cache)
    cache.crop(torch.tensor([len(p) - 1 for p in prompts]))
    return cache


def _check_batch(
    model: TinyGPT, prompts: Sequence[Sequence[int]], params: SamplingParams
) -> list[list[int]]:
    if len(prompts) < 1:
        raise ValueError("prompts must hold at least 1 prompt")
    return [check_prompt(p, model, params) for p in prompts]


@torch.inference_mode()
def generate_batch(
    model: TinyGPT,
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Plain decoding of B requests together: one forward pass per step for all of them."""
    seqs = _check_batch(model, prompts, params)
    cache = _prefill_all_but_last(model, seqs)
    pending = torch.tensor([[s[-1]] for s in seqs])  # (B, 1)
    outs: list[list[int]] = [[] for _ in seqs]
    for _ in range(params.max_tokens):
        logits = model(pending, cache)[:, -1]  # (B, V)
        for b, out in enumerate(outs):
            out.append(next_token(logits[b], params, generator))
        pending = torch.tensor([[o[-1]] for o in outs])
    return outs


@torch.inference_mode()
def speculative_generate_batch(
    target: TinyGPT,
    drafters: Sequence[Drafter] | Callable[[], Drafter],
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    k: int = 4,
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
) -> list[list[int]]:
    """Speculative decoding for B requests, verified together in one target pass per round.

    ``drafters`` is one drafter per request, or a factory called once per request
    (a drafter may keep per-request state, such as a draft model's cache).
    Each request accepts its own prefix and rolls back its own rejected
    positions; with greedy decoding each output equals running the request alone.
    Finished requests ride along with no proposals until the slowest finishes.
    """
    check_int("k", k)
    seqs = _check_batch(target, prompts, params)
    block = target.config.block_size
    longest = max(len(s) for s in seqs)
    if longest + params.max_tokens + k > block:
        # Padded rows of a finished or nearly finished request still take k+1 positions.
        raise ValueError(
            f"k must be <= {block - longest - params.max_tokens} here: batched speculation needs "
            f"prompt length + max_tokens + k <= block_size={block}, got {longest} + "
            f"{params.max_tokens} + {k}"
        )
    if callable(drafters):
        drafters = [drafters() for _ in seqs]
    if len(drafters) != len(seqs):
        raise ValueError(
            f"drafters must hold one drafter per prompt ({len(seqs)}), got {len(drafters)}"
        )
    n_prompt = [len(s) for s in seqs]
    cache = _prefill_all_but_last(target, seqs)
    while True:
        remaining = [params.max_tokens - (len(s) - n) for s, n in zip(seqs, n_prompt, strict=True)]
        active = [b for b, r in enumerate(remaining) if r > 0]
        if not active:
            break
        proposals = {
            b: drafters[b].propose(seqs[b], min(k, remaining[b] - 1), params, generator)
            for b in active
        }
        width = 1 + max(len(p.tokens) for p in proposals.values())
        rows = []
        for b, s in enumerate(seqs):
            row = s[-1:] + (proposals[b].tokens if b in proposals else [])
            rows.append(row + [PAD] * (width - len(row)))
        before = cache.lengths.clone()
        logits = target(torch.tensor(rows), cache)  # (B, width, V): one pass for every request
        keep = before.clone()
        for b in active:
            prop = proposals[b]
            m = len(prop.tokens)
            if params.greedy:
                emitted, n_acc = accept_greedy(logits[b, : m + 1], prop.tokens)
            else:
                emitted, n_acc = accept_sampled(
                    logits[b, : m + 1], prop.probs, prop.tokens, params, generator
                )
            seqs[b].extend(emitted)
            keep[b] = before[b] + 1 + n_acc  # pending + accepted; the rest rolls back
            if stats is not None:
                stats.record(
                    prop.tokens,
                    n_acc,
                    emitted,
                    prop.draft_passes,
                    target_passes=int(b == active[0]),
                    k=k,
                    cache_length=int(keep[b]),
                )
        cache.crop(keep)
    return [s[n:] for s, n in zip(seqs, n_prompt, strict=True)]
