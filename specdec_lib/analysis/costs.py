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

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specdec_lib.analysis.runs import Timing, time_median
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.generate import SpeculationStats
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.sampling import SamplingParams


def weight_bytes(model: TinyGPT) -> int:
    """Bytes of the model's parameters as held in memory (a tied tensor counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_cache_bytes_per_token(config: ModelConfig, bytes_per_value: int = 4) -> int:
    """Bytes of KV cache one token occupies: a key and a value per layer, ``n_embd`` wide."""
    return 2 * config.n_layer * config.n_embd * bytes_per_value


def _context(length: int, vocab_size: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (1, length), generator=gen)


def decode_step(model: TinyGPT, context_len: int, seed: int = 0) -> Callable[[], torch.Tensor]:
    """A function that runs one cached decode step (one new token) after ``context_len`` tokens.

    The cache is filled once, here; each call appends one token and rolls it
    back, so every call sees the same context length.
    """
    if not 1 <= context_len < model.config.block_size:
        raise ValueError(
            f"context_len must lie in [1, {model.config.block_size - 1}], got {context_len}"
        )
    ids = _context(context_len + 1, model.config.vocab_size, seed)
    cache = model.new_cache(1)
    with torch.inference_mode():
        model(ids[:, :context_len], cache)
    step = ids[:, context_len:]

    @torch.inference_mode()
    def one_step() -> torch.Tensor:
        logits = model(step, cache)
        cache.crop(context_len)
        return logits

    return one_step


def decode_step_timing(
    model: TinyGPT, context_len: int, repeats: int = 30, warmup: int = 5, seed: int = 0
) -> Timing:
    """Wall-clock time of one cached decode step after ``context_len`` tokens (median)."""
    return time_median(decode_step(model, context_len, seed), repeats=repeats, warmup=warmup)


def proposal_call(
    drafter: Drafter, context: Sequence[int], k: int, params: SamplingParams
) -> Callable[[], None]:
    """A function that runs one ``drafter.propose(context, k, params)`` call."""
    ctx = list(context)

    def one_call() -> None:
        drafter.propose(ctx, k, params)

    return one_call


@dataclass(frozen=True)
class Ratio:
    """time(numerator) / time(denominator), from interleaved repeats.

    ``ratio`` divides the ``quantile`` times of the two sides (the fast runs);
    ``median_ratio`` divides their medians. Times are in seconds.
    """

    ratio: float
    median_ratio: float
    quantile: float
    numerator: float
    denominator: float
    repeats: int


def time_ratio(
    numerator: Callable[[], object],
    denominator: Callable[[], object],
    repeats: int = 100,
    warmup: int = 5,
    quantile: float = 0.1,
) -> Ratio:
    """How long ``numerator`` takes relative to ``denominator``, robust to a busy machine.

    The two run back to back, alternating which goes first, so both see the
    same conditions. The ratio is taken between their fast runs (the
    ``quantile``, 10% by default), not their medians: when other processes
    compete for the cores, the scheduler interrupts a longer operation more
    often than a shorter one, so the medians measure the machine's load as much
    as the code, and their ratio is biased towards the shorter side. On an idle
    machine the two ratios agree; ``median_ratio`` is returned for comparison.
    """
    if repeats < 10:
        raise ValueError(f"repeats must be >= 10, got {repeats}")
    if not 0 < quantile <= 0.5:
        raise ValueError(f"quantile must lie in (0, 0.5], got {quantile}")
    for _ in range(warmup):
        numerator()
        denominator()
    tops, bottoms = [], []
    for i in range(repeats):
        pair = (numerator, denominator) if i % 2 == 0 else (denominator, numerator)
        t0 = time.perf_counter()
        pair[0]()
        t1 = time.perf_counter()
        pair[1]()
        t2 = time.perf_counter()
        top, bottom = (t1 - t0, t2 - t1) if i % 2 == 0 else (t2 - t1, t1 - t0)
        tops.append(top)
        bottoms.append(bottom)
    tops.sort()
    bottoms.sort()
    j = int(quantile * (repeats - 1))
    return Ratio(
        ratio=tops[j] / bottoms[j],
        median_ratio=statistics.median(tops) / statistics.median(bottoms),
        quantile=quantile,
        numerator=tops[j],
        denominator=bottoms[j],
        repeats=repeats,
    )


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
