"""Timing, done one way everywhere: warm-up excluded, repeats interleaved, medians.

Every wall-clock figure in the course comes from here. A measurement on a shared machine
is noisy, so: untimed warm-up calls first; repeats of the compared variants interleaved
(so a burst of load hits them alike); the median reported with the range; and, for the
ratio of two operations, the ratio of their fast runs (:func:`time_ratio`). Every result
file is stamped with :func:`machine_stamp`.

* :func:`time_median`, :class:`Timing`: repeated timing of one callable.
* :func:`time_ratio`, :class:`Ratio`: one operation against another, interleaved.
* :func:`decode_step`, :func:`decode_step_timing`, :func:`proposal_call`: the operations
  the cost model needs timed (a cached decode step, a drafter's proposal).
* :func:`time_passes`: a KV-cached pass over T new positions, for several T.
* :func:`time_batched_decoding`: plain batched decoding at several batch sizes.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specdec_lib.engine.batched import generate_batch
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams


def machine_stamp() -> dict[str, str]:
    """What the numbers were measured on: CPU, threads, Python and PyTorch versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "torch_threads": str(torch.get_num_threads()),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


@dataclass(frozen=True)
class Timing:
    """Median and spread of repeated wall-clock measurements, in seconds."""

    median: float
    low: float
    high: float
    repeats: int


def time_median(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times; report the median and range."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return Timing(statistics.median(times), min(times), max(times), repeats)


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
