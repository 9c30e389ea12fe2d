"""What one forward pass of the target costs, measured the way verification uses it.

Plain decoding feeds the target one new position per pass; verifying k drafted
tokens feeds k+1 positions in one pass. Whether speculation can pay at all
depends on how the time of a pass grows with the number of new positions T, so
:func:`time_passes` measures exactly that: a KV-cached pass of T new tokens
after a fixed, already-cached context, for several T.

Why the measurement is shaped this way:

* **The context is fixed and cached**, as it is in a real decode step; each
  timed call first rolls the cache back to the context (a crop, which costs
  nothing), so every call does the same work.
* **The values of T are interleaved** (every repeat visits every T, in a
  seeded shuffled order) rather than timed one after another. On a shared
  machine load comes and goes; interleaving spreads it over all T alike, so
  the *ratios* between T survive even when the absolute times drift.
* **Warm-up calls are not timed; the median is reported**, with the lowest
  and highest time as the spread.

:func:`fit_pass_cost` summarises such a curve as a straight line, a fixed cost
per pass plus a cost per position, fitted robustly (Theil-Sen: the median of
the slopes between every pair of points), so one measurement spoiled by a
burst of load from another process cannot bend it.

:func:`parameter_bytes` is the other half of the argument: the bytes of
weights a batch-one decode step has to read to produce its single token.
:func:`time_batched_decoding` times plain batched decoding, the regime where
that read is shared among many users.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from specdec_lib.analysis.runs import Timing, time_median
from specdec_lib.engine.batched import generate_batch
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams

__all__ = [
    "PassCostFit",
    "fit_pass_cost",
    "parameter_bytes",
    "time_batched_decoding",
    "time_passes",
]


def parameter_bytes(model: TinyGPT) -> int:
    """Bytes of all parameters, each tensor counted once (the tied embedding is one tensor)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


@torch.inference_mode()
def time_passes(
    model: TinyGPT,
    positions: Sequence[int],
    context_len: int = 256,
    repeats: int = 21,
    warmup: int = 3,
    seed: int = 0,
) -> dict[int, Timing]:
    """Median wall time of one KV-cached forward pass of ``T`` new positions, for each T.

    The cache holds ``context_len`` tokens (random bytes from ``seed``: the
    cost of a pass does not depend on which tokens they are). Returns
    ``{T: Timing}`` in seconds.
    """
    positions = [int(t) for t in positions]
    if not positions or min(positions) < 1:
        raise ValueError(f"positions must be a non-empty list of integers >= 1, got {positions}")
    if context_len < 1 or context_len + max(positions) > model.config.block_size:
        raise ValueError(
            f"context_len must be >= 1 with context_len + max(positions) <= block_size="
            f"{model.config.block_size}, got {context_len} + {max(positions)}"
        )
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    context = torch.randint(0, vocab, (1, context_len), generator=gen)
    new = {t: torch.randint(0, vocab, (1, t), generator=gen) for t in positions}
    cache = model.new_cache(1)
    model(context, cache)

    def one_pass(t: int) -> float:
        cache.crop(context_len)
        start = time.perf_counter()
        model(new[t], cache)
        return time.perf_counter() - start

    order = list(positions)
    shuffle = random.Random(seed)
    times: dict[int, list[float]] = {t: [] for t in positions}
    for rep in range(warmup + repeats):
        shuffle.shuffle(order)
        for t in order:
            elapsed = one_pass(t)
            if rep >= warmup:
                times[t].append(elapsed)
    return {t: Timing(statistics.median(ts), min(ts), max(ts), len(ts)) for t, ts in times.items()}


@dataclass(frozen=True)
class PassCostFit:
    """Time of a pass over T new positions modelled as ``fixed + per_position * T`` (seconds)."""

    fixed: float
    per_position: float

    def predict(self, positions: int) -> float:
        return self.fixed + self.per_position * positions

    def ratio(self, positions: int) -> float:
        """Predicted cost of a pass over ``positions`` relative to a pass over one."""
        return self.predict(positions) / self.predict(1)


def fit_pass_cost(timings: Mapping[int, Timing]) -> PassCostFit:
    """Theil-Sen line through the medians of :func:`time_passes`: robust to a few bad points."""
    points = sorted((t, tm.median) for t, tm in timings.items())
    if len(points) < 2:
        raise ValueError(f"timings must hold at least 2 values of T, got {len(points)}")
    slopes = [
        (y2 - y1) / (t2 - t1) for i, (t1, y1) in enumerate(points) for t2, y2 in points[i + 1 :]
    ]
    slope = statistics.median(slopes)
    fixed = statistics.median(y - slope * t for t, y in points)
    return PassCostFit(fixed=fixed, per_position=slope)


def time_batched_decoding(
    model: TinyGPT,
    prompt_ids: Sequence[int],
    batch_sizes: Sequence[int],
    n_tokens: int = 32,
    repeats: int = 3,
    warmup: int = 1,
) -> dict[int, Timing]:
    """Wall time of plain greedy batched decoding of ``n_tokens`` for B copies of one prompt.

    Every request in the batch is the same prompt, so each batch does the same
    work per request and only the batch size varies. Returns ``{B: Timing}``
    for the whole call (prefill included), in seconds; throughput is
    ``B * n_tokens / timing.median``.
    """
    params = SamplingParams(temperature=0.0, max_tokens=n_tokens)
    ids = list(prompt_ids)
    return {
        b: time_median(lambda b=b: generate_batch(model, [ids] * b, params), repeats, warmup)
        for b in batch_sizes
    }
