"""What a drafter costs: forward-pass time, memory, and an estimated cost per token.

Tokens per target pass says how many target passes speculation saves; it says
nothing about what the drafter spent to save them. A draft model runs one
forward pass per proposed token, so the honest unit is the target forward pass:

    cost per emitted token = (target passes + c · draft passes + o · rounds) / emitted

where ``c`` is the draft model's forward-pass time as a fraction of the
target's, and ``o`` the time of one proposal call of a model-free drafter (an
n-gram lookup), also as a fraction of a target pass. Plain decoding scores
exactly 1. The model counts a verification pass over k+1 positions as one
target pass, which holds at batch one on a memory-bound pass (the serial-decode
chapter measures it); it is an estimate, not a wall-clock measurement.

``c`` is measured, not read off the parameter counts: at this size a forward
pass is dominated by per-layer overhead, not by arithmetic, so a model with
a fifth of the parameters is not five times faster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .bench import Timing, time_median
from .drafters import Drafter
from .generate import SpeculationStats
from .model import ModelConfig, TinyGPT
from .sampling import SamplingParams


def weight_bytes(model: TinyGPT) -> int:
    """Bytes of the model's parameters as held in memory (a tied tensor counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_cache_bytes_per_token(config: ModelConfig, bytes_per_value: int = 4) -> int:
    """Bytes of KV cache one token occupies: a key and a value per layer, ``n_embd`` wide."""
    return 2 * config.n_layer * config.n_embd * bytes_per_value


def _context(length: int, vocab_size: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (1, length), generator=gen)


@torch.inference_mode()
def decode_step_timing(
    model: TinyGPT, context_len: int, repeats: int = 30, warmup: int = 5, seed: int = 0
) -> Timing:
    """Wall-clock time of one cached decode step (one new token) after ``context_len`` tokens.

    The cache is filled once; each timed step appends one token and is then
    rolled back, so every repeat sees the same context length.
    """
    if not 1 <= context_len < model.config.block_size:
        raise ValueError(
            f"context_len must lie in [1, {model.config.block_size - 1}], got {context_len}"
        )
    ids = _context(context_len + 1, model.config.vocab_size, seed)
    cache = model.new_cache(1)
    model(ids[:, :context_len], cache)
    step = ids[:, context_len:]

    def one_step() -> None:
        model(step, cache)
        cache.crop(context_len)

    return time_median(one_step, repeats=repeats, warmup=warmup)


def proposal_timing(
    drafter: Drafter,
    context: Sequence[int],
    k: int,
    params: SamplingParams,
    repeats: int = 30,
    warmup: int = 5,
) -> Timing:
    """Wall-clock time of one ``drafter.propose(context, k, params)`` call."""
    ctx = list(context)
    return time_median(lambda: drafter.propose(ctx, k, params), repeats=repeats, warmup=warmup)


def interleaved_medians(fns: dict[str, Callable[[], Timing]], rounds: int = 3) -> dict[str, float]:
    """Median over ``rounds`` of each timing function's median, the functions taking turns.

    On a shared machine the load changes while you measure. Taking turns
    exposes every measurement to the same spells of contention, so their
    *ratio* is steadier than either number alone.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    seen: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            seen[name].append(fn().median)
    return {name: sorted(v)[len(v) // 2] for name, v in seen.items()}


def cost_per_token(
    target_passes: int, draft_passes: int, emitted: int, c: float, rounds: int = 0, o: float = 0.0
) -> float:
    """Estimated cost of one emitted token, in target forward passes (plain decoding: 1).

    ``c``: draft forward pass / target forward pass; ``o``: one proposal call of
    a model-free drafter / target forward pass, charged once per round.
    """
    if emitted < 1:
        raise ValueError(f"emitted must be >= 1, got {emitted}")
    if c < 0 or o < 0:
        raise ValueError(f"c and o must be >= 0, got c={c}, o={o}")
    return (target_passes + c * draft_passes + o * rounds) / emitted


def stats_cost_per_token(stats: SpeculationStats, c: float, o: float = 0.0) -> float:
    """:func:`cost_per_token` for the counts pooled in ``stats``."""
    return cost_per_token(
        stats.target_passes, stats.draft_passes, stats.emitted, c, stats.rounds, o
    )
