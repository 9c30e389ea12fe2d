"""Timing, done one way everywhere: one loop, warm-up excluded, repeats shuffled, medians.

Every wall-clock figure in the course comes from :func:`interleaved`, the only timing loop:
untimed warm-up calls of every job first, then repeats in each of which every job runs
once, in a freshly shuffled order (so a burst of load falls on the compared jobs alike
instead of on whichever runs last), wall and CPU time recorded per job and repeat. The
other timers are thin uses of it, and the intervals read what it returns.

* :func:`interleaved`, :class:`JobTimes`: the loop and what it records per job.
* :class:`Timing`, :func:`time_median`: median and range (fastest, slowest run) of one
  callable's repeats. :class:`Ratio`, :func:`time_ratio`: one operation against another.
* :func:`time_passes`, :func:`time_batched_passes`: a KV-cached pass over T new positions
  (for B sequences), for several T (and B). :func:`decode_step`, :func:`proposal_call`:
  single operations the cost model needs timed. (Plain batched decoding by its parts,
  chapter 1's, is :func:`specdec_lib.experiments.batch_steps.time_batch_decode_steps`.)
* :func:`time_inside`, :func:`batch_time_parts`: one call split into time inside the
  models' forward passes and the host's own work (forward hooks, not a loop).
  What a benchmark adds around the loop (its load check) is ``benchmarks/harness.py``'s.
* Not here: the bootstrap intervals on what the loop records (a comparison of two
  methods timed on the same prompts in the same repeats is the paired interval of
  their ratio, resampling prompts and blocks of repeats) are
  :mod:`specdec_lib.analysis.intervals`'s.

Every results file is stamped (:mod:`specdec_lib.analysis.provenance`).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams


class JobTimes(NamedTuple):
    """One job's seconds per repeat, in the order the repeats ran."""

    wall: list[float]
    cpu: list[float]


def interleaved(
    jobs: Mapping[Hashable, Callable[[], object]],
    repeats: int,
    seed: int = 0,
    warmup: int = 1,
    progress: Callable[[int], None] | None = None,
    untimed: Mapping[Hashable, Callable[[], object]] | None = None,
) -> dict[Hashable, JobTimes]:
    """Time every job ``repeats`` times, each repeat in a freshly shuffled order.

    ``warmup`` untimed runs of every job come first. Shuffling makes a slow phase of the
    machine fall on all jobs alike instead of on whichever runs last; since every repeat
    runs the whole job list, consecutive repeats are spread over the run, and a block of
    them (:func:`~specdec_lib.analysis.intervals.blocks_of`) samples one stretch of the
    machine's time. ``untimed[key]``, if given, runs just before each timed call of
    ``jobs[key]`` (e.g. rolling a cache back), outside the clock; ``progress(r)`` after r.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    untimed = dict(untimed or {})
    if not set(untimed) <= set(jobs):
        raise ValueError(f"untimed must only hold keys of jobs, got {set(untimed) - set(jobs)}")
    keys = list(jobs)
    for _ in range(warmup):
        for key in keys:
            if key in untimed:
                untimed[key]()
            jobs[key]()
    shuffle = random.Random(seed)
    out = {key: JobTimes([], []) for key in keys}
    for r in range(repeats):
        shuffle.shuffle(keys)
        for key in keys:
            if key in untimed:
                untimed[key]()
            t0, c0 = time.perf_counter(), time.process_time()
            jobs[key]()
            out[key].wall.append(time.perf_counter() - t0)
            out[key].cpu.append(time.process_time() - c0)
        if progress is not None:
            progress(r + 1)
    return out


@dataclass(frozen=True)
class Timing:
    """Median of repeated wall-clock measurements with their range (the fastest and the
    slowest run), in seconds; a range, not an interval (:mod:`specdec_lib.analysis.intervals`)."""

    median: float
    fastest: float
    slowest: float
    repeats: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timing:
        """The median and range of ``seconds`` (at least one)."""
        if not seconds:
            raise ValueError("seconds must hold at least one time")
        return cls(statistics.median(seconds), min(seconds), max(seconds), len(seconds))


def time_median(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times; its median and range."""
    return Timing.of(interleaved({"fn": fn}, repeats, warmup=warmup)["fn"].wall)


@dataclass(frozen=True)
class Ratio:
    """time(numerator) / time(denominator), from repeats timed side by side.

    ``ratio`` divides the ``quantile`` times of the two sides (their fast runs);
    ``median_ratio`` divides their medians. ``numerator`` and ``denominator`` are the
    two sides' ``quantile`` times, in seconds.
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

    The two run in every repeat, in a shuffled order, so both see the same conditions.
    The ratio is taken between their fast runs (the ``quantile``, 10% by default), not
    their medians: when other processes compete for the cores, the scheduler interrupts
    a longer operation more often than a shorter one, so the medians measure the
    machine's load as much as the code, and their ratio is biased towards the shorter
    side. On an idle machine the two ratios agree; ``median_ratio`` is returned too.
    """
    if repeats < 10:
        raise ValueError(f"repeats must be >= 10, got {repeats}")
    if not 0 < quantile <= 0.5:
        raise ValueError(f"quantile must lie in (0, 0.5], got {quantile}")
    timed = interleaved({"top": numerator, "bottom": denominator}, repeats, warmup=warmup)
    tops, bottoms = sorted(timed["top"].wall), sorted(timed["bottom"].wall)
    j = int(quantile * (repeats - 1))
    return Ratio(
        ratio=tops[j] / bottoms[j],
        median_ratio=statistics.median(tops) / statistics.median(bottoms),
        quantile=quantile,
        numerator=tops[j],
        denominator=bottoms[j],
        repeats=repeats,
    )


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


@torch.inference_mode()
def _time_cached_passes(
    model: TinyGPT,
    new: Mapping[Hashable, torch.Tensor],
    context: torch.Tensor,
    repeats: int,
    warmup: int,
    seed: int,
) -> dict[Hashable, Timing]:
    """Time one pass of each ``new[key]`` (B x T tokens) after ``context`` (one row, the
    same for every sequence) in a cache of B sequences, with :func:`interleaved`; the cache
    is rolled back to the context, untimed, before every pass."""
    caches = {}
    for b in sorted({int(t.shape[0]) for t in new.values()}):
        caches[b] = model.new_cache(b)
        model(context.expand(b, -1), caches[b])
    n = context.shape[1]

    def run(key: Hashable) -> Callable[[], object]:
        cache, tokens = caches[int(new[key].shape[0])], new[key]
        return lambda: model(tokens, cache)  # inside this function's inference mode

    def crop(key: Hashable) -> Callable[[], object]:
        cache = caches[int(new[key].shape[0])]
        return lambda: cache.crop(n)

    timed = interleaved(
        {k: run(k) for k in new}, repeats, seed, warmup, untimed={k: crop(k) for k in new}
    )
    return {k: Timing.of(t.wall) for k, t in timed.items()}


def time_passes(
    model: TinyGPT,
    positions: Sequence[int],
    context_len: int = 256,
    repeats: int = 21,
    warmup: int = 3,
    seed: int = 0,
) -> dict[int, Timing]:
    """Median and range of the wall time of one KV-cached forward pass of ``T`` new
    positions, for each T, timed with :func:`interleaved`.

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
    return _time_cached_passes(model, new, context, repeats, warmup, seed)


def time_batched_passes(
    model: TinyGPT,
    cells: Sequence[tuple[int, int]],
    context: Sequence[int],
    repeats: int = 15,
    warmup: int = 3,
) -> dict[tuple[int, int], Timing]:
    """Median and range of the wall time of one KV-cached pass over ``T`` new positions
    for each of ``B`` sequences, for every ``(B, T)`` in ``cells``, each sequence's cache
    holding ``context``; the cells timed with :func:`interleaved`. Returns
    ``{(B, T): Timing}`` in seconds.
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
    new = {(b, t): torch.tensor([ctx[-t:]] * b) for b, t in cells}
    return _time_cached_passes(model, new, torch.tensor([ctx]), repeats, warmup, 0)


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
