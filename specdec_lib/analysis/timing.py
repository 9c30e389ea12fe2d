"""Timing, done one way everywhere: warm-up excluded, repeats interleaved, medians.

Every wall-clock figure in the course comes from here. A measurement on a shared machine
is noisy, so: untimed warm-up calls first; repeats of the compared variants interleaved
(so a burst of load hits them alike); the median reported with the range; and, for the
ratio of two operations, the ratio of their fast runs (:func:`time_ratio`). Every result
file is stamped (:mod:`specdec_lib.analysis.provenance`).

* Every results file carries :func:`~specdec_lib.analysis.provenance.run_stamp` and
  :func:`~specdec_lib.analysis.provenance.busy_report` (machine, code, load).
* :func:`interleaved`: the benchmarks' timing loop: warm-up, then repeats of every
  compared job in a freshly shuffled order, wall and CPU time per job and repeat.
* :func:`bootstrap_interval`, :func:`paired_speedup`, :class:`Estimate`: medians with
  bootstrap 95% intervals, and speed-ups resampled over prompts and repeats together.
* :func:`time_median`, :class:`Timing`: repeated timing of one callable.
* :func:`time_ratio`, :class:`Ratio`: one operation against another, interleaved.
* :func:`decode_step`, :func:`proposal_call`: the operations
  the cost model needs timed (a cached decode step, a drafter's proposal).
* :func:`time_passes`: a KV-cached pass over T new positions, for several T.
* :func:`time_batched_decoding`: plain batched decoding at several batch sizes.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch

from specdec_lib.engine.batched import generate_batch
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams


def interleaved(
    jobs: Mapping[Hashable, Callable[[], object]],
    repeats: int,
    seed: int = 0,
    warmup: int = 1,
    progress: Callable[[int], None] | None = None,
) -> dict[Hashable, tuple[list[float], list[float]]]:
    """Time every job ``repeats`` times, each repeat in a freshly shuffled order.

    ``warmup`` untimed runs of every job come first. Shuffling makes a slow phase of
    the machine fall on all jobs alike instead of on whichever runs last. Returns
    ``{key: (wall seconds per repeat, CPU seconds per repeat)}``.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    keys = list(jobs)
    for _ in range(warmup):
        for key in keys:
            jobs[key]()
    shuffle = random.Random(seed)
    out: dict[Hashable, tuple[list[float], list[float]]] = {key: ([], []) for key in keys}
    for r in range(repeats):
        shuffle.shuffle(keys)
        for key in keys:
            t0, c0 = time.perf_counter(), time.process_time()
            jobs[key]()
            out[key][0].append(time.perf_counter() - t0)
            out[key][1].append(time.process_time() - c0)
        if progress is not None:
            progress(r + 1)
    return out


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a bootstrap interval (``level``, 95% by default)."""

    value: float
    low: float
    high: float
    level: float = 0.95

    def resolves(self, other: float) -> bool:
        """Whether the interval excludes ``other`` (e.g. 1.0: "does it pay?")."""
        return not self.low <= other <= self.high


def _percentiles(samples: list[float], level: float) -> tuple[float, float]:
    samples = sorted(samples)
    tail = (1 - level) / 2
    n = len(samples)
    return samples[int(tail * (n - 1))], samples[int(round((1 - tail) * (n - 1)))]


def bootstrap_interval(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = statistics.median,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """``statistic`` of ``values`` with a percentile-bootstrap interval."""
    values = list(values)
    if not values:
        raise ValueError("values must hold at least one number")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if resamples < 100:
        raise ValueError(f"resamples must be >= 100, got {resamples}")
    rng = random.Random(seed)
    n = len(values)
    boot = [statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    return Estimate(statistic(values), *_percentiles(boot, level), level)


def paired_speedup(
    base: Sequence[Sequence[float]],
    method: Sequence[Sequence[float]],
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Speed-up of ``method`` over ``base``: total over prompts of each prompt's median
    time over repeats, base / method. ``base[p][r]`` and ``method[p][r]`` are the times of
    prompt p in repeat r.

    The interval resamples prompts and repeats together (the same draws for both sides,
    which were measured side by side), so it covers both the spread between prompts (a
    different sample of prompts would give a different speed-up) and the timing noise.
    """
    n_p, n_r = len(base), len(base[0]) if base else 0
    if n_p == 0 or n_r == 0 or len(method) != n_p or any(len(m) != n_r for m in method):
        raise ValueError("base and method must be non-empty prompts x repeats tables of one shape")

    def ratio(prompts: Sequence[int], reps: Sequence[int]) -> float:
        b = sum(statistics.median(base[p][r] for r in reps) for p in prompts)
        m = sum(statistics.median(method[p][r] for r in reps) for p in prompts)
        return b / m

    rng = random.Random(seed)
    boot = [
        ratio([rng.randrange(n_p) for _ in range(n_p)], [rng.randrange(n_r) for _ in range(n_r)])
        for _ in range(resamples)
    ]
    return Estimate(ratio(range(n_p), range(n_r)), *_percentiles(boot, level), level)


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

    The cache holds ``context_len`` tokens (random token ids from ``seed``: the
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


def time_inside(
    models: Sequence[torch.nn.Module],
    fn: Callable[[], object],
    calls: list[tuple[int, float]] | None = None,
) -> tuple[float, float]:
    """Run ``fn`` once; return (its wall seconds, seconds spent inside the models' forward).

    The difference is the host's own work (building tensors, choosing tokens, the
    drafter's bookkeeping, the cache's crops): time a cost model that counts only passes
    leaves out. Forward hooks mark entry and exit of each model's top-level call; if
    ``calls`` is given, each call of the first model is appended to it as
    ``(new positions, seconds)``, timed where it ran, inside the real decoding loop.
    """
    inside = [0.0]
    entered: list[float] = []

    def pre(_module, _args) -> None:
        entered.append(time.perf_counter())

    def post(module, args, _out) -> None:
        elapsed = time.perf_counter() - entered.pop()
        inside[0] += elapsed
        if calls is not None and module is models[0]:
            calls.append((int(args[0].shape[1]), elapsed))

    handles = [
        h for m in models for h in (m.register_forward_pre_hook(pre), m.register_forward_hook(post))
    ]
    try:
        start = time.perf_counter()
        fn()
        wall = time.perf_counter() - start
    finally:
        for h in handles:
            h.remove()
    return wall, inside[0]


@torch.inference_mode()
def time_batched_passes(
    model: TinyGPT,
    cells: Sequence[tuple[int, int]],
    context: Sequence[int],
    repeats: int = 15,
    warmup: int = 3,
) -> dict[tuple[int, int], Timing]:
    """Median wall time of one KV-cached pass over ``T`` new positions for each of ``B``
    sequences, for every ``(B, T)`` in ``cells``, each sequence's cache holding ``context``.

    The cells are timed in a freshly shuffled order in every repeat, so a slow phase of a
    shared machine falls on all of them alike. Returns ``{(B, T): Timing}`` in seconds.
    """
    cells = [(int(b), int(t)) for b, t in cells]
    if not cells or min(min(c) for c in cells) < 1:
        raise ValueError(f"cells must be a non-empty list of (B, T) with B, T >= 1, got {cells}")
    ctx = list(context)
    if not ctx or len(ctx) + max(t for _, t in cells) > model.config.block_size:
        raise ValueError(
            f"context must be non-empty with len(context) + max T <= block_size="
            f"{model.config.block_size}, got {len(ctx)}"
        )
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    caches = {}
    for b in sorted({b for b, _ in cells}):
        caches[b] = model.new_cache(b)
        model(torch.tensor([ctx] * b), caches[b])
    new = {(b, t): torch.tensor([ctx[-t:]] * b) for b, t in cells}

    def one_pass(cell: tuple[int, int]) -> float:
        cache = caches[cell[0]]
        cache.crop(len(ctx))
        start = time.perf_counter()
        model(new[cell], cache)
        return time.perf_counter() - start

    order, shuffle = list(cells), random.Random(0)
    times: dict[tuple[int, int], list[float]] = {c: [] for c in cells}
    for rep in range(warmup + repeats):
        shuffle.shuffle(order)
        for cell in order:
            elapsed = one_pass(cell)
            if rep >= warmup:
                times[cell].append(elapsed)
    return {c: Timing(statistics.median(ts), min(ts), max(ts), len(ts)) for c, ts in times.items()}


def batch_time_parts(model: TinyGPT, fn: Callable[[], object]) -> dict[str, float]:
    """Run ``fn`` (a batched decoding call) once and split its wall time into the prefill
    (the model's first forward call), the later passes, and the host's own work outside
    any pass (drafting, acceptance, building tensors). Seconds, plus the number of passes."""
    calls: list[tuple[int, float]] = []
    wall, inside = time_inside([model], fn, calls)
    if not calls:
        raise ValueError("fn must call the model at least once")
    return {
        "wall": wall,
        "prefill": calls[0][1],
        "passes": inside - calls[0][1],
        "host": wall - inside,
        "n_passes": len(calls) - 1,
    }
